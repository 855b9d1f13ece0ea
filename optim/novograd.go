package optim

import "math"

// NovoGrad is stochastic gradient descent with layer-wise gradient normalisation
// (Ginsburg et al. 2019) as OpenSeq2Seq's NovoGrad2. The second moment is one number
// per tensor, the average squared norm of its gradient. For each tensor, with
// n = ||g||^2:
//
//	v = n                           when v is 0 (the first step)
//	v = b2*v + (1-b2)*n             otherwise
//	ghat = g/(sqrt(v)+eps) + wd*w   (NovoGradEpsInsideSqrt: g/sqrt(v+eps), as OpenSeq2Seq)
//	ghat = (1-b1)*ghat              with NovoGradGradAveraging
//	m = b1*m + ghat
//	w = w - lr*m
//
// The weight decay is added after the normalisation, so it is not rescaled by v. The
// first-step test is v == 0, as in the reference, rather than t == 1: a tensor whose
// gradient is still all zeros starts its average at its first non-zero norm instead
// of (1-b2)*n, which would make that step 1/sqrt(1-b2) (7x) too long. The paper puts
// eps outside the square root (the default here); the reference puts it inside.
//
// NoDecay tensors (biases, BatchNorm) get wd = 0 unless Config.DecayNormBias; they
// are normalised per tensor like every other tensor (Config.AdaptNormBias does not
// apply). State: m per element and v per tensor, about half of Adam's.
type NovoGrad struct {
	beta1, beta2, eps float64
	weightDecay       float64
	gradAveraging     bool
	epsInsideSqrt     bool
	decayNormBias     bool
	stepState         // buffers: slot "m" per element, slot "v" per tensor
}

var _ Optimizer = (*NovoGrad)(nil)

// NewNovoGrad returns NovoGrad configured by c (LR, Beta1, Beta2, Eps, WeightDecay,
// NovoGradGradAveraging, NovoGradEpsInsideSqrt, DecayNormBias). Fields NovoGrad does
// not use are ignored; ApplyDefaults sets its betas and eps (0.95, 0.98, 1e-8).
func NewNovoGrad(c Config) (*NovoGrad, error) {
	if err := c.validateCommon(); err != nil {
		return nil, err
	}
	if err := c.validateMoments("novograd"); err != nil {
		return nil, err
	}
	return &NovoGrad{
		beta1: c.Beta1, beta2: c.Beta2, eps: c.Eps, weightDecay: c.WeightDecay,
		gradAveraging: c.NovoGradGradAveraging, epsInsideSqrt: c.NovoGradEpsInsideSqrt,
		decayNormBias: c.DecayNormBias,
		stepState:     stepState{bufs: newBuffersPerTensor("novograd", []string{"m"}, "v")},
	}, nil
}

// Step applies one NovoGrad update with learning rate lr to every parameter. It checks
// all parameters before changing any. A parameter may join after the first step: its
// v starts at its first gradient norm like everyone else's.
func (o *NovoGrad) Step(params []Param, lr float64) error {
	if err := checkStepLR("novograd", lr); err != nil {
		return err
	}
	if err := o.bufs.prepare(params, true); err != nil {
		return err
	}
	for i := range params {
		p := &params[i]
		bufs := o.bufs.byName[p.Name]
		n := sumSquares(p.Grad)
		v := n
		if old := float64(bufs[1][0]); old != 0 {
			v = o.beta2*old + (1-o.beta2)*n
		}
		bufs[1][0] = float32(v)
		var scale float64 // the normalisation 1/(sqrt(v)+eps)
		if o.epsInsideSqrt {
			scale = 1 / math.Sqrt(v+o.eps)
		} else {
			scale = 1 / (math.Sqrt(v) + o.eps)
		}
		wd := o.weightDecay
		if p.NoDecay && !o.decayNormBias {
			wd = 0
		}
		if o.gradAveraging {
			scale *= 1 - o.beta1
			wd *= 1 - o.beta1
		}
		novogradUpdate(p.Value, p.Grad, bufs[0], lr, scale, wd, o.beta1)
	}
	o.step++
	return nil
}

// novogradUpdate: ghat = scale*g + wd*w; m = b1*m + ghat; w -= lr*m. It computes in
// float64 and rounds once per stored value (see the SGD kernels).
func novogradUpdate(w, g, m []float32, lr, scale, wd, b1 float64) {
	g = g[:len(w)]
	m = m[:len(w)]
	for i, wi := range w {
		mi := b1*float64(m[i]) + scale*float64(g[i]) + wd*float64(wi)
		m[i] = float32(mi)
		w[i] = float32(float64(wi) - lr*mi)
	}
}
