package optim

// SGDW is SGD with decoupled weight decay (Loshchilov & Hutter 2019, "Decoupled
// Weight Decay Regularization", Algorithm 1, SGD branch). Per element, with
// momentum m and weight decay wd (0 for NoDecay parameters unless DecayNormBias):
//
//	b = m*b + g                    (momentum > 0 only; dampening 0, b = g on the first step)
//	d = g + m*b  if Nesterov,  d = b  otherwise
//	w = w - lr*d - lr*wd*w         (w on the right is the value before this step)
//
// Unlike SGD's L2 decay, wd*w never enters the momentum buffer, so momentum does not
// amplify the decay and the best wd no longer moves with lr. The paper scales the
// decay by the schedule multiplier eta_t alone; here lr carries the schedule, and
// the decay is lr*wd*w, the form of PyTorch's AdamW. With wd 0 SGDW is SGD.
type SGDW struct{ sgdHyper }

var _ Optimizer = (*SGDW)(nil)

// NewSGDW returns SGDW configured by c (Momentum, Nesterov, WeightDecay,
// DecayNormBias; the learning rate is passed to each Step).
func NewSGDW(c Config) (*SGDW, error) {
	h, err := newSGDHyper("sgdw", c)
	if err != nil {
		return nil, err
	}
	return &SGDW{h}, nil
}

// Step applies one SGDW update with learning rate lr to every parameter. It checks
// all parameters before changing any.
func (s *SGDW) Step(params []Param, lr float64) error {
	if err := checkStepLR("sgdw", lr); err != nil {
		return err
	}
	if err := s.bufs.prepare(params, true); err != nil {
		return err
	}
	for i := range params {
		p := &params[i]
		wd := s.weightDecay
		if p.NoDecay && !s.decayNormBias {
			wd = 0
		}
		var b []float32
		if s.momentum > 0 {
			b = s.bufs.byName[p.Name][0]
		}
		sgdwKernel(p.Value, p.Grad, b, lr, wd, s.momentum, s.nesterov)
	}
	s.step++
	return nil
}

// sgdwKernel computes in float64 and rounds once per stored value, as SGD's kernels.
func sgdwKernel(w, g, b []float32, lr, wd, m float64, nesterov bool) {
	g = g[:len(w)]
	for i, wi := range w {
		d := float64(g[i])
		if b != nil {
			bi := m*float64(b[i]) + d
			b[i] = float32(bi)
			if nesterov {
				d += m * bi
			} else {
				d = bi
			}
		}
		w[i] = float32(float64(wi) - lr*d - lr*wd*float64(wi))
	}
}
