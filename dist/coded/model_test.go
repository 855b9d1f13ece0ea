package coded

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func tinyProblem(m int) *Problem {
	r := rand.New(rand.NewPCG(9, 9))
	const d = 5
	X := mat.NewDense(m, d, nil)
	y := make([]float64, m)
	for i := range m {
		for j := range d - 1 {
			X.Set(i, j, r.NormFloat64())
		}
		X.Set(i, d-1, 1)
		if X.At(i, 0)+0.5*X.At(i, 1)+0.3*r.NormFloat64() > 0.2 {
			y[i] = 1
		}
	}
	return &Problem{X: X, Y: y, XTest: X, YTest: y}
}

// TestCodedGradients checks both losses' gradients against central differences.
// The hinge is not differentiable at s z = 1; a random w keeps every example
// away from the kink by more than the step.
func TestCodedGradients(t *testing.T) {
	p := tinyProblem(40)
	w := mat.NewVecDense(5, []float64{0.3, -0.2, 0.1, 0.05, -0.1})
	const lambda, h = 0.01, 1e-6
	for _, model := range Models {
		g := Gradient(model, p.X, p.Y, w, lambda)
		for j := range 5 {
			wp, wm := mat.VecDenseCopyOf(w), mat.VecDenseCopyOf(w)
			wp.SetVec(j, w.AtVec(j)+h)
			wm.SetVec(j, w.AtVec(j)-h)
			fd := (Loss(model, p.X, p.Y, wp, lambda) - Loss(model, p.X, p.Y, wm, lambda)) / (2 * h)
			if math.Abs(fd-g.AtVec(j)) > 1e-7*math.Max(1, math.Abs(fd)) {
				t.Errorf("%s: gradient[%d] %v, finite difference %v", model, j, g.AtVec(j), fd)
			}
		}
	}
}

// TestCodedLossByHand: one example x = (1, 2), w = (0.5, -0.25), so z = 0; the
// logistic loss is log 2 for either label, its residual 0.5 - y; the hinge
// loss is 1 with residual -s; lambda 0.2 adds 0.1 * (0.25 + 0.0625).
func TestCodedLossByHand(t *testing.T) {
	X := mat.NewDense(1, 2, []float64{1, 2})
	w := mat.NewVecDense(2, []float64{0.5, -0.25})
	reg := 0.1 * (0.25 + 0.0625)
	for _, c := range []struct {
		model string
		y     float64
		loss  float64
		r     float64
	}{{"logreg", 1, math.Ln2, -0.5}, {"logreg", 0, math.Ln2, 0.5}, {"svm", 1, 1, -1}, {"svm", 0, 1, 1}} {
		if got := Loss(c.model, X, []float64{c.y}, w, 0.2); math.Abs(got-c.loss-reg) > 1e-15 {
			t.Errorf("%s y = %v: loss %v, want %v", c.model, c.y, got, c.loss+reg)
		}
		if got := Residual(c.model, []float64{0}, []float64{c.y})[0]; got != c.r {
			t.Errorf("%s y = %v: residual %v, want %v", c.model, c.y, got, c.r)
		}
	}
	// hinge beyond the margin: s z = 2 > 1, no loss, no residual
	if got := Residual("svm", []float64{-2}, []float64{0})[0]; got != 0 {
		t.Errorf("svm past the margin: residual %v, want 0", got)
	}
}
