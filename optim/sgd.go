package optim

// SGD is stochastic gradient descent with optional momentum, Nesterov momentum and
// L2 weight decay, with the semantics of torch.optim.SGD (dampening 0). Per element:
//
//	d = g + wd*w                 (wd is 0 for NoDecay parameters)
//	b = m*b + d                  (momentum > 0 only)
//	d = d + m*b  if Nesterov,  d = b  otherwise
//	w -= lr*d
//
// NoDecay parameters get decay too when Config.DecayNormBias is set.
//
// PyTorch starts the momentum buffer at b = d on a parameter's first step; a buffer
// allocated as zeros gives exactly that (m*0 + d = d), so there is no special case.
// With momentum 0 SGD keeps no buffers.
type SGD struct {
	sgdHyper
	exchanged map[string]exchangedStep // tensors whose momentum the gradient exchange applies
	update    sgdUpdate
}

// exchangedStep is how SGD updates a tensor whose gradient arrives with
// momentum applied by the exchange (DGC's momentum correction).
type exchangedStep uint8

const (
	plainStep exchangedStep = iota + 1 // PlainSteps: weight decay applied by the exchange too
	decayStep                          // DecaySteps: weight decay applied here, with its own momentum
)

// sgdHyper is what SGD and SGDW share: momentum (PyTorch semantics), Nesterov,
// weight decay and whether it reaches biases and norms, and the momentum
// buffers (slot "momentum", or no slots when momentum is 0).
type sgdHyper struct {
	momentum      float64
	nesterov      bool
	weightDecay   float64
	decayNormBias bool
	stepState
}

// newSGDHyper checks c's common and momentum settings for optimizer who.
func newSGDHyper(who string, c Config) (sgdHyper, error) {
	if err := c.validateCommon(); err != nil {
		return sgdHyper{}, err
	}
	if err := c.validateMomentum(); err != nil {
		return sgdHyper{}, err
	}
	h := sgdHyper{momentum: c.Momentum, nesterov: c.Nesterov, weightDecay: c.WeightDecay, decayNormBias: c.DecayNormBias}
	if c.Momentum > 0 {
		h.bufs = newBuffers(who, "momentum")
	} else {
		h.bufs = newBuffers(who)
	}
	return h, nil
}

var _ Optimizer = (*SGD)(nil)

// NewSGD returns SGD configured by c (LR, Momentum, Nesterov, WeightDecay,
// DecayNormBias; the learning rate itself is passed to each Step). Fields SGD does
// not use are ignored.
func NewSGD(c Config) (*SGD, error) {
	h, err := newSGDHyper("sgd", c)
	if err != nil {
		return nil, err
	}
	return &SGD{sgdHyper: h}, nil
}

// PlainSteps makes SGD update the named tensors with w -= lr*g, without
// momentum and weight decay: their gradients arrive with both already applied
// (by a gradient exchange that applies momentum itself). Their momentum
// buffers are kept all the same, so the checkpoint state does not change shape.
func (s *SGD) PlainSteps(names ...string) { s.setExchanged(plainStep, names) }

// DecaySteps makes SGD update the named tensors as the optimizer of Deep
// Gradient Compression's reference code does (synxlin/deep-gradient-
// compression, dgc/optim/sgd.py, DGCSGD.step): their gradients g arrive with
// momentum applied and without weight decay (DGC accumulates the gradient
// alone), and the decay is applied densely here, every step, with a momentum
// buffer of its own on the decay term only:
//
//	b = m*b + wd*w
//	d = wd*w + m*b  if Nesterov,  d = b  otherwise
//	w -= lr*(d + g)
//
// The buffer is the tensor's momentum slot, so the checkpoint state keeps its
// shape. With momentum 0 there is no buffer: w -= lr*(wd*w + g). A tensor
// without decay (NoDecay, or weight decay 0) takes w -= lr*g and leaves its
// buffer alone, as DGCSGD skips the decay branch when weight_decay is 0.
func (s *SGD) DecaySteps(names ...string) { s.setExchanged(decayStep, names) }

func (s *SGD) setExchanged(how exchangedStep, names []string) {
	if s.exchanged == nil {
		s.exchanged = map[string]exchangedStep{}
	}
	for _, n := range names {
		s.exchanged[n] = how
	}
}

// Step applies one SGD update with learning rate lr to every parameter. It checks
// all parameters before changing any.
func (s *SGD) Step(params []Param, lr float64) error {
	if err := checkStepLR("sgd", lr); err != nil {
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
		u := &s.update
		u.w, u.g, u.lr, u.wd, u.m, u.nesterov = p.Value, p.Grad[:len(p.Value)], lr, wd, s.momentum, s.nesterov
		switch how := s.exchanged[p.Name]; {
		case how == plainStep || how == decayStep && wd == 0:
			u.kernel, u.wd = kernelPlain, 0
		case how == decayStep && s.momentum == 0:
			u.kernel = kernelPlain
		case how == decayStep:
			u.kernel, u.b = kernelDecayMomentum, s.bufs.byName[p.Name][0][:len(p.Value)]
		case s.momentum == 0:
			u.kernel = kernelPlain
		default:
			u.kernel, u.b = kernelMomentum, s.bufs.byName[p.Name][0][:len(p.Value)]
		}
		u.apply()
	}
	s.step++
	return nil
}

// The kernels below compute in float64 and round once per stored value: the loop is
// bound by memory traffic, so the wider arithmetic costs nothing and saves roundings.
// On amd64 the vector kernels of sgd_amd64.s take all but the last few elements,
// with the same operations in the same order (the same bits).

func sgdPlain(w, g []float32, lr, wd float64) {
	g = g[:len(w)]
	for i := sgdPlainVec(w, g, lr, wd); i < len(w); i++ {
		wi := w[i]
		d := float64(g[i]) + wd*float64(wi)
		w[i] = float32(float64(wi) - lr*d)
	}
}

func sgdMomentum(w, g, b []float32, lr, wd, m float64, nesterov bool) {
	g = g[:len(w)]
	b = b[:len(w)]
	for i := sgdMomentumVec(w, g, b, lr, wd, m, nesterov); i < len(w); i++ {
		wi := w[i]
		d := float64(g[i]) + wd*float64(wi)
		bi := m*float64(b[i]) + d
		b[i] = float32(bi)
		if nesterov {
			d += m * bi
		} else {
			d = bi
		}
		w[i] = float32(float64(wi) - lr*d)
	}
}

// sgdDecayMomentum is DecaySteps' update: momentum on the decay term alone,
// the gradient added as it is.
func sgdDecayMomentum(w, g, b []float32, lr, wd, m float64, nesterov bool) {
	g = g[:len(w)]
	b = b[:len(w)]
	for i, wi := range w {
		decay := wd * float64(wi)
		bi := m*float64(b[i]) + decay
		b[i] = float32(bi)
		d := bi
		if nesterov {
			d = decay + m*bi
		}
		w[i] = float32(float64(wi) - lr*(d+float64(g[i])))
	}
}
