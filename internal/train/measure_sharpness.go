package train

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// The measures of gradwire measure that need more than the final parameters
// and a forward pass: the distances to the initialisation, the Fisher-Rao
// norm and the worst-case sharpness (Jiang, Neyshabur, Mobahi, Krishnan,
// Bengio, "Fantastic Generalization Measures and Where to Find Them", ICLR
// 2020, arXiv 1912.02178; measure numbers are the paper's).

// Worst-case sharpness search: bisection of alpha on [0, sharpnessHi],
// sharpnessDepth probes, stopping when the accuracy drop is within
// sharpnessTol of sharpnessTarget; the bounds and target of the PAC-Bayes
// sigma search (pacBayesSigma), but 20 probes instead of 15: the worst-case
// radius of a LeNet-5 is about 1e-3, where 15 halvings of [0, 2] leave steps
// of 6e-5 (5%), 20 of 2e-6. magnitudeEps is the epsilon of the
// magnitude-aware box |u_i| <= alpha (|w_i| + eps).
const (
	sharpnessTarget = 0.1
	sharpnessTol    = 0.01
	sharpnessHi     = 2.0
	sharpnessDepth  = 20
	magnitudeEps    = 1e-3
	// DefaultAscentSteps is the number of projected gradient-ascent steps of
	// one sharpness probe (the paper's count is unverified).
	DefaultAscentSteps = 10
)

// distToInit is the distance of the weight tensors (biases and BatchNorm left
// out, as for the parameter norm) to the run's initial parameters w0:
//
//	fro  = sum_l ||W_l - W0_l||_F^2  (measure 40, "distance from initialization")
//	spec = sum_l ||W_l - W0_l||_2^2  (measure 41, "distance of spectral norms")
//
// each tensor viewed as a matrix of shape[0] rows, its spectral norm by
// spectralNorm's power iteration. w and w0 are flat parameter vectors laid out
// as params.
func distToInit(params []optim.Param, w, w0 []float32, seed uint64) (fro, spec float64) {
	off := 0
	for _, p := range params {
		n := len(p.Value)
		if !p.NoDecay {
			d := make([]float32, n)
			for i := range d {
				d[i] = w[off+i] - w0[off+i]
				fro += float64(d[i]) * float64(d[i])
			}
			s := spectralNorm(d, p.Shape, seed)
			spec += s * s
		}
		off += n
	}
	return fro, spec
}

// depth is the number of weight tensors (parameters that are not biases or
// BatchNorm scales and shifts): the d of Jiang et al.'s measures.
func depth(params []optim.Param) int {
	d := 0
	for _, p := range params {
		if !p.NoDecay {
			d++
		}
	}
	return d
}

// fisherRao is the Fisher-Rao norm in the form Jiang et al. (2020, measure
// 45) give it after Liang, Poggio, Rakhlin, Stokes ("Fisher-Rao Metric,
// Geometry, and Complexity of Neural Networks", AISTATS 2019):
//
//	mu_fr = ((d+1)^2 / m) * sum_{i=1..m} <w, grad_w l(f_w(x_i), y_i)>^2
//
// with w every parameter (weights and biases), l the cross-entropy of example
// i under its training label (the empirical form, Liang et al.'s eq. 5.3),
// m the examples of xs/ys and d the number of weight tensors (depth). The
// inner product is exact: each example's gradient comes from net1, a model
// of batch 1 with the same parameters (w). For a network without biases whose
// layers are positively homogeneous, <w, grad_w l> = d <dl/df, f> (Liang et
// al.'s Lemma 2.1), so their norm <w, I(w) w> = E <w, grad_w l>^2 is
// mu_fr / (d+1)^2; the constant (d+1)^2 is the one recalled from Jiang et
// al.'s appendix (unverified) and changes no ranking among runs of one
// architecture. Returns the sum's mean (without the constant) too.
func fisherRao(net1 *models.Net, w []float32, xs [][]float32, ys [][]int32, d int) (mu, meanSq float64, err error) {
	xPer, yPer := numel(net1.Input().Shape), net1.Input().YLen
	m := 0
	for b := range xs {
		rows := len(ys[b]) / yPer
		for r := range rows {
			copy(net1.Flat(), w)
			if _, err := net1.Step(xs[b][r*xPer:(r+1)*xPer], ys[b][r*yPer:(r+1)*yPer]); err != nil {
				return 0, 0, err
			}
			var s float64
			for i, g := range net1.Grad() {
				s += float64(w[i]) * float64(g)
			}
			meanSq += s * s
			m++
		}
	}
	if m == 0 {
		return 0, 0, fmt.Errorf("fisher-rao: no examples")
	}
	meanSq /= float64(m)
	return float64((d+1)*(d+1)) * meanSq, meanSq, nil
}

// sharpnessProbe is what a worst-case sharpness search needs of the model:
// the parameters to perturb, the mini-batch gradient at them, and the
// training accuracy at them.
type sharpnessProbe struct {
	flat     []float32                 // the model's parameters (perturbed in place)
	grad     func(batch int) []float32 // mean-loss gradient on batch b at flat; nil when the loss is not finite
	batches  int                       // number of batches grad takes
	accuracy func() float64            // training accuracy at flat
	restore  func()                    // undoes what grad changed besides flat (BatchNorm statistics)
}

// sharpnessAlpha is the worst-case sharpness radius of Jiang et al. (2020,
// section on sharpness-based measures; flatness measures 52-62): the largest
// alpha such that the worst perturbation u in the box |u_i| <= alpha
// (magnitude-aware: |u_i| <= alpha (|w_i| + 1e-3), the alpha' of the paper)
// lowers the training accuracy by about 0.1. The paper reports 1/alpha'^2
// (its tables print 1/alpha', the same ranking).
//
// Inner maximisation, per probe alpha: projected gradient ascent on the
// training loss from a uniform random start in the box, steps steps, step k
// taking the gradient on batch (k-1) mod batches of the measured subset and
// moving each coordinate by a quarter of its box half-width in the sign of
// its gradient (the steepest-ascent step of the L-infinity box; 2.5/steps of
// the width for 10 steps, the rule of Madry et al.'s projected gradient
// attack), then clipping to the box. The probe's drop is the accuracy on the
// whole subset at w minus that at the final w + u. Outer search: bisection
// on [0, 2], 20 probes, stopping when the drop is within 0.01 of 0.1 (the
// paper's bounds, depth, start, step rule and count of ascent steps for
// sharpness are unverified). A non-finite training loss
// ends a probe's ascent early (the perturbation already breaks the model).
// It leaves perturbed parameters in flat: the caller restores w.
func sharpnessAlpha(p sharpnessProbe, w []float32, base float64, magnitude bool, steps int, seed uint64) float64 {
	r := rand.New(rand.NewPCG(seed, 0x73686172)) // "shar"
	radius := make([]float64, len(w))
	u := make([]float64, len(w))
	return bisectDrop(sharpnessHi, sharpnessDepth, sharpnessTarget, sharpnessTol, func(alpha float64) float64 {
		for i, v := range w {
			radius[i] = alpha
			if magnitude {
				radius[i] = alpha * (math.Abs(float64(v)) + magnitudeEps)
			}
			u[i] = radius[i] * (2*r.Float64() - 1)
		}
		for k := range steps {
			for i, v := range w {
				p.flat[i] = v + float32(u[i])
			}
			g := p.grad(k % p.batches)
			if g == nil {
				break
			}
			for i, gi := range g {
				switch {
				case gi > 0:
					u[i] = min(u[i]+radius[i]/4, radius[i])
				case gi < 0:
					u[i] = max(u[i]-radius[i]/4, -radius[i])
				}
			}
		}
		for i, v := range w {
			p.flat[i] = v + float32(u[i])
		}
		p.restore()
		return base - p.accuracy()
	})
}
