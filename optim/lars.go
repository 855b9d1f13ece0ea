package optim

import "math"

// defaultLARSEta is the LARS trust coefficient of You et al. 2017 and the TF TPU
// reference; Config.LARSEta 0 selects it.
const defaultLARSEta = 0.001

// LARS is layer-wise adaptive rate scaling (You, Gitman and Ginsburg 2017) as the TF
// TPU LARSOptimizer: momentum SGD whose rate is scaled, tensor by tensor, by a trust
// ratio. For each tensor, with L2 norms ||w|| and ||g|| taken before the update:
//
//	trust = eta*||w|| / (||g|| + wd*||w||)   (1 when ||w|| or ||g|| is 0)
//	rate  = lr*trust                         (LARSClip: min(trust, lr))
//	d = g + wd*w
//	v = m*v + rate*d
//	w = w - v                                (Nesterov: w - (rate*d + m*v))
//
// The velocity v holds the scaled step, so a trust ratio that changes from step to step
// scales only the new gradient, as in the reference. LARSClip is LARC's clip mode
// (OpenSeq2Seq larc_mode "clip", apex LARC clip=True): the local rate trust, not
// lr*trust, capped at the global lr, so no tensor moves faster than plain SGD would.
//
// Parameter groups: NoDecay tensors (biases, BatchNorm) get wd = 0 unless
// Config.DecayNormBias, and rate = lr (trust 1: plain momentum SGD) unless
// Config.AdaptNormBias, as the reference's skip_list. An adapted tensor's trust uses
// its own wd, so an adapted bias without decay has trust = eta*||w||/||g||.
//
// There is no epsilon: the reference's default is 0, and the zero-norm rule keeps the
// division defined. Momentum, Nesterov and WeightDecay are the config's (the run
// config's defaults, not the paper's 0.9 and 1e-4); eta is LARSEta, 0 meaning 0.001.
// With momentum 0 LARS keeps no buffers and steps w -= rate*d.
type LARS struct {
	eta           float64
	momentum      float64
	nesterov      bool
	weightDecay   float64
	clip          bool
	decayNormBias bool
	adaptNormBias bool
	stepState     // buffers: slot "momentum" (the velocity v), or none when momentum is 0
}

var _ Optimizer = (*LARS)(nil)

// NewLARS returns LARS configured by c (LR, Momentum, Nesterov, WeightDecay, LARSEta,
// LARSClip, DecayNormBias, AdaptNormBias). Fields LARS does not use are ignored.
func NewLARS(c Config) (*LARS, error) {
	if err := c.validateCommon(); err != nil {
		return nil, err
	}
	if err := c.validateMomentum(); err != nil {
		return nil, err
	}
	if !finite(c.LARSEta) || c.LARSEta < 0 {
		return nil, &FieldError{Key: "optim.lars_eta", Value: c.LARSEta, Want: "a finite number >= 0 (0 selects the default 0.001)"}
	}
	l := &LARS{
		eta: c.LARSEta, momentum: c.Momentum, nesterov: c.Nesterov, weightDecay: c.WeightDecay,
		clip: c.LARSClip, decayNormBias: c.DecayNormBias, adaptNormBias: c.AdaptNormBias,
	}
	if l.eta == 0 {
		l.eta = defaultLARSEta
	}
	if c.Momentum > 0 {
		l.bufs = newBuffers("lars", "momentum")
	} else {
		l.bufs = newBuffers("lars")
	}
	return l, nil
}

// Step applies one LARS update with global learning rate lr to every parameter. It
// checks all parameters before changing any.
func (l *LARS) Step(params []Param, lr float64) error {
	if err := checkStepLR("lars", lr); err != nil {
		return err
	}
	if err := l.bufs.prepare(params, true); err != nil {
		return err
	}
	for i := range params {
		p := &params[i]
		wd := l.weightDecay
		if p.NoDecay && !l.decayNormBias {
			wd = 0
		}
		rate := lr
		if !p.NoDecay || l.adaptNormBias {
			ww, gg := sumSquaresPair(p.Value, p.Grad)
			rate = l.rate(lr, math.Sqrt(ww), math.Sqrt(gg), wd)
		}
		if l.momentum == 0 {
			sgdPlain(p.Value, p.Grad, rate, wd)
		} else {
			larsMomentum(p.Value, p.Grad, l.bufs.byName[p.Name][0], rate, wd, l.momentum, l.nesterov)
		}
	}
	l.step++
	return nil
}

// rate is the per-tensor learning rate from the norms of the tensor and its gradient.
func (l *LARS) rate(lr, wNorm, gNorm, wd float64) float64 {
	if wNorm == 0 || gNorm == 0 {
		return lr // trust 1: nothing to compare the gradient with, or nothing to scale
	}
	trust := l.eta * wNorm / (gNorm + wd*wNorm)
	if l.clip {
		return min(trust, lr)
	}
	return lr * trust
}

// larsMomentum computes in float64 and rounds once per stored value (see the SGD
// kernels).
func larsMomentum(w, g, v []float32, rate, wd, m float64, nesterov bool) {
	g = g[:len(w)]
	v = v[:len(w)]
	for i, wi := range w {
		d := rate * (float64(g[i]) + wd*float64(wi))
		vi := m*float64(v[i]) + d
		v[i] = float32(vi)
		if nesterov {
			d += m * vi
		} else {
			d = vi
		}
		w[i] = float32(float64(wi) - d)
	}
}

// sumSquaresPair returns the sums of squares of a and b (of equal length) in one pass
// over both, with two partial sums each (see sumSquares).
func sumSquaresPair(a, b []float32) (sa, sb float64) {
	b = b[:len(a)]
	var a0, a1, b0, b1 float64
	i := 0
	for ; i+2 <= len(a); i += 2 {
		x0, x1 := float64(a[i]), float64(a[i+1])
		y0, y1 := float64(b[i]), float64(b[i+1])
		a0 += x0 * x0
		a1 += x1 * x1
		b0 += y0 * y0
		b1 += y1 * y1
	}
	for ; i < len(a); i++ {
		x, y := float64(a[i]), float64(b[i])
		a0 += x * x
		b0 += y * y
	}
	return a0 + a1, b0 + b1
}
