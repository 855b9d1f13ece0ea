package train

import (
	"math"
	"testing"

	"github.com/gradwire/gradwire/optim"
)

// quadratic is L(w) = 0.5 w^T diag(a) w: gradient a*w. Every Step also adds 1
// to its buffer, as a BatchNorm step moves its running statistics.
type quadratic struct {
	a, w, g []float32
	buf     []float32
}

func (q *quadratic) Step([]float32, []int32) (float64, error) {
	var loss float64
	for i := range q.w {
		q.g[i] = q.a[i] * q.w[i]
		loss += 0.5 * float64(q.a[i]*q.w[i]*q.w[i])
	}
	q.buf[0]++
	return loss, nil
}
func (q *quadratic) Grad() []float32 { return q.g }
func (q *quadratic) Flat() []float32 { return q.w }

func near(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > tol {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestSAMWorkedExample: L = 0.5 w^T diag(10, 1) w at w = (1, 1), rho 0.05:
// g = (10, 1), ||g|| = 10.04988, e = (0.049752, 0.004975), g_sam = A(w+e) =
// (10.497519, 1.004975); SGD with lr 0.1 then gives (-0.049752, 0.899502)
// where plain SGD gives (0, 0.9). The weights are back at w before the
// update, and the buffer moved once (the second pass's statistics are
// dropped).
func TestSAMWorkedExample(t *testing.T) {
	q := &quadratic{a: []float32{10, 1}, w: []float32{1, 1}, g: make([]float32, 2), buf: []float32{0}}
	params := []optim.Param{{Name: "w", Value: q.w, Grad: q.g}}
	s := newSAMReplica(q, params, [][]float32{q.buf}, 0.05, 0.01, 0, false, false)
	loss, err := s.Step(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loss != 5.5 {
		t.Fatalf("loss %v, want L(w) = 5.5 (the unperturbed pass)", loss)
	}
	near(t, "w after the step", q.w, []float64{1, 1}, 0)
	near(t, "g_sam", q.g, []float64{10.497519, 1.004975}, 2e-6)
	if q.buf[0] != 1 {
		t.Fatalf("buffer %v after one SAM step, want 1 (the first pass's)", q.buf[0])
	}
	for i := range q.w {
		q.w[i] -= 0.1 * q.g[i]
	}
	near(t, "w after SGD", q.w, []float64{-0.049752, 0.899502}, 2e-6)
}

// TestSAMPerturbation checks e against the worked values: SAM e = (0.049752,
// 0.004975) at w = (1, 1), g = (10, 1), rho 0.05; adaptive SAM at w = (0.5,
// 2), g = (5, 2), rho 0.5, eta 0.01: T = (0.51, 2.01), ||Tg|| = 4.760557, e =
// (0.136591, 0.848661), leaning to the large weight; values without T (a
// bias) move as in SAM. Weight decay 0.1 on the first value only: h = g +
// 0.1 w = (10.1, 1), e = 0.05 h/||h||.
func TestSAMPerturbation(t *testing.T) {
	both := []bool{true, true}
	w := []float32{1, 1}
	samPerturb(w, []float32{10, 1}, 0.05, 0.01, 0, false, both, both)
	near(t, "SAM", w, []float64{1.049752, 1.004975}, 1e-6)

	w = []float32{0.5, 2}
	samPerturb(w, []float32{5, 2}, 0.5, 0.01, 0, true, both, both)
	near(t, "ASAM", w, []float64{0.5 + 0.136591, 2 + 0.848661}, 2e-6)

	// Without T on the second value: T = (0.51, 1), Tg = (2.55, 2), ||Tg|| =
	// 3.240756, e = 0.5 (0.51^2*5, 2)/3.240756 = (0.200648, 0.308570).
	w = []float32{0.5, 2}
	samPerturb(w, []float32{5, 2}, 0.5, 0.01, 0, true, both, []bool{true, false})
	near(t, "ASAM, second value unscaled", w, []float64{0.5 + 0.200648, 2 + 0.308570}, 2e-6)

	w = []float32{1, 1}
	n := math.Hypot(10.1, 1)
	samPerturb(w, []float32{10, 1}, 0.05, 0.1, 0.1, false, []bool{true, false}, both)
	near(t, "SAM with decay", w, []float64{1 + 0.05*10.1/n, 1 + 0.05/n}, 1e-6)

	w = []float32{3, 4}
	samPerturb(w, []float32{0, 0}, 0.05, 0.01, 0, false, both, both)
	near(t, "zero gradient", w, []float64{3, 4}, 0)
}

// TestSAMTrains: SAM on the synthetic task still learns and ends elsewhere
// than plain SGD; adaptive SAM too.
func TestSAMTrains(t *testing.T) {
	sets := []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8"}
	plain := runCfg(t, smallConfig(t, "mlp", sets...), t.TempDir(), false)
	for _, extra := range [][]string{{"optim.sam_rho=0.05"}, {"optim.sam_rho=0.5", "optim.sam_adaptive=true"}} {
		s := runCfg(t, smallConfig(t, "mlp", append(sets, extra...)...), t.TempDir(), false)
		if s.TestLoss == plain.TestLoss {
			t.Errorf("%v: the test loss of plain SGD (%v)", extra, s.TestLoss)
		}
		if *s.TestAccuracy < 0.5 {
			t.Errorf("%v: test accuracy %.3f on an easy synthetic task", extra, *s.TestAccuracy)
		}
	}
}
