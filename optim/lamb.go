package optim

import (
	"math"
)

// LAMB is layer-wise adaptive moments for batch training (You et al. 2019) as apex
// FusedLAMB (decoupled weight decay, gradient averaging on). At step t (from 1):
//
//	s = 1 / max(1, ||G||/max_grad_norm)  ||G||: global norm of all gradients (s = 1 when max_grad_norm is 0)
//	g = s*g
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g*g
//	u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*w
//	r = ||w|| / ||u||                    per tensor, before the update; 1 when either norm is 0
//	w = w - lr*r*u
//
// LAMBNoBiasCorrection drops the 1-b^t factors. The clip factor s scales the gradients
// inside the update; the caller's gradient buffers are left as they are. A non-finite
// global norm leaves them unscaled (s = 1), as ClipGlobalNorm does. eps is added after
// the square root, as apex does.
//
// Parameter groups: NoDecay tensors (biases, BatchNorm) get wd = 0 unless
// Config.DecayNormBias, and r = 1 (an AdamW step) unless Config.AdaptNormBias. apex
// instead skips the ratio for every group whose weight decay is 0 (unless use_nvlamb);
// here a run with weight_decay 0 still adapts its weights, as in the paper.
//
// The step counter t is shared, so with bias correction every parameter must take part
// from the first step on, as for Adam. Memory: m and v per element (the state, as
// Adam's), and a scratch buffer for u as long as the largest tensor, which is not
// state: it saves computing u twice (once for its norm, once for the update).
type LAMB struct {
	beta1, beta2, eps float64
	weightDecay       float64
	maxGradNorm       float64 // 0 = no clipping
	biasCorrection    bool
	decayNormBias     bool
	adaptNormBias     bool
	stepState                   // buffers: slots "m" and "v"
	scratch           []float32 // the update u of one tensor; not state: as long as the largest tensor
}

var _ Optimizer = (*LAMB)(nil)

// NewLAMB returns LAMB configured by c (LR, Beta1, Beta2, Eps, WeightDecay,
// LAMBMaxGradNorm, LAMBNoBiasCorrection, DecayNormBias, AdaptNormBias). Fields LAMB
// does not use are ignored; ApplyDefaults sets its betas and eps (0.9, 0.999, 1e-6).
func NewLAMB(c Config) (*LAMB, error) {
	if err := c.validateCommon(); err != nil {
		return nil, err
	}
	if err := c.validateMoments("lamb"); err != nil {
		return nil, err
	}
	if !finite(c.LAMBMaxGradNorm) || c.LAMBMaxGradNorm < 0 {
		return nil, &FieldError{Key: "optim.lamb_max_grad_norm", Value: c.LAMBMaxGradNorm,
			Want: "a finite number >= 0 (0 turns LAMB's clipping off)"}
	}
	return &LAMB{
		beta1: c.Beta1, beta2: c.Beta2, eps: c.Eps, weightDecay: c.WeightDecay,
		maxGradNorm: c.LAMBMaxGradNorm, biasCorrection: !c.LAMBNoBiasCorrection,
		decayNormBias: c.DecayNormBias, adaptNormBias: c.AdaptNormBias,
		stepState: stepState{bufs: newBuffers("lamb", "m", "v"), momentsNeedStep: true},
	}, nil
}

// Step applies one LAMB update with learning rate lr to every parameter. It checks all
// parameters before changing any.
func (a *LAMB) Step(params []Param, lr float64) error {
	if err := checkStepLR("lamb", lr); err != nil {
		return err
	}
	if err := a.bufs.prepare(params, a.step == 0 || !a.biasCorrection); err != nil {
		return err
	}
	k := lambCoef{b1: a.beta1, b2: a.beta2, eps: a.eps, scale: 1, mhat: 1, vhat: 1}
	if a.maxGradNorm > 0 {
		var sum float64
		for i := range params {
			sum += sumSquares(params[i].Grad)
		}
		if norm := math.Sqrt(sum); finite(norm) && norm > a.maxGradNorm {
			k.scale = a.maxGradNorm / norm
		}
	}
	if a.biasCorrection {
		t := float64(a.step + 1)
		k.mhat = 1 / (1 - math.Pow(a.beta1, t))
		k.vhat = 1 / math.Sqrt(1-math.Pow(a.beta2, t))
	}
	largest := 0
	for i := range params {
		largest = max(largest, len(params[i].Value))
	}
	if len(a.scratch) < largest {
		a.scratch = make([]float32, largest)
	}
	for i := range params {
		p := &params[i]
		k.wd = a.weightDecay
		if p.NoDecay && !a.decayNormBias {
			k.wd = 0
		}
		bufs := a.bufs.byName[p.Name]
		u := a.scratch[:len(p.Value)]
		ww, uu := lambMoments(p.Value, p.Grad, bufs[0], bufs[1], u, &k)
		rate := lr
		if (!p.NoDecay || a.adaptNormBias) && ww > 0 && uu > 0 {
			rate = lr * math.Sqrt(ww) / math.Sqrt(uu)
		}
		lambApply(p.Value, u, rate)
	}
	a.step++
	return nil
}

// lambCoef holds the per-step (and, for wd, per-tensor) constants of the LAMB kernels.
type lambCoef struct {
	b1, b2, eps float64
	scale       float64 // global clip factor s
	mhat        float64 // 1/(1-b1^t), or 1 without bias correction
	vhat        float64 // 1/sqrt(1-b2^t), or 1
	wd          float64 // this tensor's weight decay
}

// lambMoments updates the moments, stores the update u (rounded to float32) in u and
// returns ||w||^2 and ||u||^2, the norm of u as stored: lambApply applies exactly the
// u whose norm set the ratio, as apex, which stores u in place of the gradient.
func lambMoments(w, g, m, v, u []float32, k *lambCoef) (ww, uu float64) {
	g = g[:len(w)]
	m = m[:len(w)]
	v = v[:len(w)]
	u = u[:len(w)]
	b1, b2, c1, c2 := k.b1, k.b2, 1-k.b1, 1-k.b2
	for i, wi := range w {
		gi := float64(g[i]) * k.scale
		mi := b1*float64(m[i]) + c1*gi
		vi := b2*float64(v[i]) + c2*gi*gi
		m[i], v[i] = float32(mi), float32(vi)
		ui := float32(mi*k.mhat/(math.Sqrt(vi)*k.vhat+k.eps) + k.wd*float64(wi))
		u[i] = ui
		ww += float64(wi) * float64(wi)
		uu += float64(ui) * float64(ui)
	}
	return ww, uu
}

// lambApply sets w -= rate*u.
func lambApply(w, u []float32, rate float64) {
	u = u[:len(w)]
	for i, wi := range w {
		w[i] = float32(float64(wi) - rate*float64(u[i]))
	}
}
