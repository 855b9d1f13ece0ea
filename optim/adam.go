package optim

import (
	"math"
)

// Adam is Adam (Kingma and Ba, 2015) with L2 weight decay, or AdamW (Loshchilov and
// Hutter, 2019) with decoupled weight decay, following torch.optim.Adam and
// torch.optim.AdamW (amsgrad off). At step t (from 1), per element:
//
//	Adam:   g = g + wd*w                  (L2 decay enters the moments)
//	AdamW:  w = w - lr*wd*w               (decoupled, before the update, as PyTorch)
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g*g
//	w = w - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// eps is added after the square root of the bias-corrected v, as PyTorch does. wd is 0
// for NoDecay parameters in both variants, unless Config.DecayNormBias is set. The
// step counter t is shared by all parameters, so every parameter must take part from
// the first step on; a parameter appearing later is an error rather than a silently
// wrong bias correction.
type Adam struct {
	decoupled     bool
	beta1         float64
	beta2         float64
	eps           float64
	weightDecay   float64
	decayNormBias bool
	stepState     // buffers: slots "m" and "v"
}

var _ Optimizer = (*Adam)(nil)

// NewAdam returns Adam with L2 weight decay configured by c (LR, Beta1, Beta2, Eps,
// WeightDecay, DecayNormBias). Fields Adam does not use are ignored.
func NewAdam(c Config) (*Adam, error) { return newAdam(c, false) }

// NewAdamW returns AdamW (decoupled weight decay) configured by c, as NewAdam.
func NewAdamW(c Config) (*Adam, error) { return newAdam(c, true) }

func newAdam(c Config, decoupled bool) (*Adam, error) {
	if err := c.validateCommon(); err != nil {
		return nil, err
	}
	name := "adam"
	if decoupled {
		name = "adamw"
	}
	if err := c.validateMoments(name); err != nil {
		return nil, err
	}
	a := &Adam{decoupled: decoupled, beta1: c.Beta1, beta2: c.Beta2, eps: c.Eps,
		weightDecay: c.WeightDecay, decayNormBias: c.DecayNormBias}
	a.bufs, a.momentsNeedStep = newBuffers(a.name(), "m", "v"), true
	return a, nil
}

func (a *Adam) name() string {
	if a.decoupled {
		return "adamw"
	}
	return "adam"
}

// Step applies one Adam (or AdamW) update with learning rate lr to every parameter.
// It checks all parameters before changing any.
func (a *Adam) Step(params []Param, lr float64) error {
	if err := checkStepLR(a.name(), lr); err != nil {
		return err
	}
	if err := a.bufs.prepare(params, a.step == 0); err != nil {
		return err
	}
	t := float64(a.step + 1)
	k := adamCoef{
		b1:       a.beta1,
		b2:       a.beta2,
		eps:      a.eps,
		stepSize: lr / (1 - math.Pow(a.beta1, t)),
		sqrtBC2:  math.Sqrt(1 - math.Pow(a.beta2, t)),
	}
	for i := range params {
		p := &params[i]
		k.l2, k.keep = 0, 1
		if !p.NoDecay || a.decayNormBias {
			if a.decoupled {
				k.keep = 1 - lr*a.weightDecay
			} else {
				k.l2 = a.weightDecay
			}
		}
		bufs := a.bufs.byName[p.Name]
		adamUpdate(p.Value, p.Grad, bufs[0], bufs[1], &k)
	}
	a.step++
	return nil
}

// adamCoef holds the per-step (and, for l2 and keep, per-parameter) constants of the
// Adam kernel.
type adamCoef struct {
	b1, b2, eps float64
	stepSize    float64 // lr / (1 - b1^t)
	sqrtBC2     float64 // sqrt(1 - b2^t)
	l2          float64 // Adam: weight decay added to the gradient; else 0
	keep        float64 // AdamW: 1 - lr*wd; else 1
}

// adamUpdate computes in float64 and rounds once per stored value (see the SGD
// kernels). Multiplying by keep = 1 and adding 0*w are exact, so one loop serves
// both variants without a branch per element.
func adamUpdate(w, g, m, v []float32, k *adamCoef) {
	g = g[:len(w)]
	m = m[:len(w)]
	v = v[:len(w)]
	b1, b2, c1, c2 := k.b1, k.b2, 1-k.b1, 1-k.b2
	for i, wi := range w {
		x := float64(wi) * k.keep
		gi := float64(g[i]) + k.l2*float64(wi)
		mi := b1*float64(m[i]) + c1*gi
		vi := b2*float64(v[i]) + c2*gi*gi
		m[i] = float32(mi)
		v[i] = float32(vi)
		w[i] = float32(x - k.stepSize*mi/(math.Sqrt(vi)/k.sqrtBC2+k.eps))
	}
}
