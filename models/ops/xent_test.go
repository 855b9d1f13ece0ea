package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGradSoftmaxCrossEntropy checks the logits' gradient against finite
// differences, with random (not one-hot, some negative) targets: the
// gradient's general form p·Σy - y has to hold too.
func TestGradSoftmaxCrossEntropy(t *testing.T) {
	for _, s := range [][]int{{4, 5}, {1, 3}} {
		gradCheck(t, [][]int{s, s}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
			return SoftmaxCrossEntropy(ws, in[0], in[1])
		})
	}
}

// xentRun evaluates the loss op and its gradient on the given logits and
// targets (rows of classes) in float32 or float64, with workers goroutines.
func xentRun[T float32 | float64](t *testing.T, workers, rows, classes int, z, y []T) (float64, []T) {
	t.Helper()
	dt := tensor.Float64
	if _, ok := any(z).([]float32); ok {
		dt = tensor.Float32
	}
	g := G.NewGraph()
	zn := G.NewMatrix(g, dt, G.WithShape(rows, classes), G.WithName("z"))
	yn := G.NewMatrix(g, dt, G.WithShape(rows, classes), G.WithName("y"))
	for _, p := range []struct {
		n *G.Node
		v []T
	}{{zn, z}, {yn, y}} {
		if err := G.Let(p.n, tensor.New(tensor.WithShape(rows, classes), tensor.WithBacking(slices.Clone(p.v)))); err != nil {
			t.Fatal(err)
		}
	}
	loss, err := SoftmaxCrossEntropy(NewWorkspace(workers), zn, yn)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := G.Grad(loss, zn)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	l, err := scalarOf(loss.Value())
	if err != nil {
		t.Fatal(err)
	}
	return l, slices.Clone(grads[0].Value().Data().([]T))
}

// TestSoftmaxCrossEntropyValues checks values worked by hand, with logits far
// beyond exp's range (exp(1000) overflows even float64): row 0, logits
// (0, ln 3), label 0: softmax (1/4, 3/4), loss ln 4; row 1, logits
// (1000, 1001), label 1: softmax (1/(1 + e), 1/(1 + e⁻¹)), loss ln(1 + e⁻¹); row 2, logits (-1000, 1000),
// label 0: loss 2000 (the softmax of the label underflows to 0, its log does
// not). The mean over 3 rows; gradient (softmax - onehot)/3.
func TestSoftmaxCrossEntropyValues(t *testing.T) {
	z := []float64{0, math.Log(3), 1000, 1001, -1000, 1000}
	y := []float64{1, 0, 0, 1, 1, 0}
	e := math.Exp(-1)
	wantLoss := (math.Log(4) + math.Log(1+e) + 2000) / 3
	wantGrad := []float64{(0.25 - 1) / 3, 0.75 / 3, 1 / (1 + math.E) / 3, (1/(1+e) - 1) / 3, -1.0 / 3, 1.0 / 3}
	for _, workers := range []int{1, 2} {
		loss, grad := xentRun(t, workers, 3, 2, z, y)
		if math.Abs(loss-wantLoss) > 1e-12*wantLoss {
			t.Errorf("float64 loss %.17g, expected %.17g", loss, wantLoss)
		}
		for i, w := range wantGrad {
			if math.Abs(grad[i]-w) > 1e-15 {
				t.Errorf("float64 gradient [%d] = %.17g, expected %.17g", i, grad[i], w)
			}
		}
		z32, y32 := make([]float32, len(z)), make([]float32, len(y))
		for i := range z {
			z32[i], y32[i] = float32(z[i]), float32(y[i])
		}
		loss32, grad32 := xentRun(t, workers, 3, 2, z32, y32)
		// float32(ln 3) is off by 1e-8: the first row's loss moves by less.
		if math.Abs(loss32-wantLoss) > 1e-6*wantLoss {
			t.Errorf("float32 loss %.9g, expected %.9g", loss32, wantLoss)
		}
		for i, w := range wantGrad {
			if math.Abs(float64(grad32[i])-w) > 1e-7 {
				t.Errorf("float32 gradient [%d] = %.9g, expected %.9g", i, grad32[i], w)
			}
		}
	}
}

// TestSoftmaxCrossEntropyWorkers: on enough rows to be split over the
// workers, the loss and gradient are bit for bit those of one worker.
func TestSoftmaxCrossEntropyWorkers(t *testing.T) {
	const rows, classes = 700, 65
	rng := rand.New(rand.NewPCG(7, 8))
	z, y := make([]float32, rows*classes), make([]float32, rows*classes)
	for r := range rows {
		for c := range classes {
			z[r*classes+c] = float32(3 * rng.NormFloat64())
		}
		y[r*classes+rng.IntN(classes)] = 1
	}
	st := &xentState{ws: NewWorkspace(3), rows: rows, classes: classes}
	if st.split() < 2 {
		t.Fatal("the rows are not split over the workers")
	}
	wantLoss, wantGrad := xentRun(t, 1, rows, classes, z, y)
	for _, workers := range []int{2, 3} {
		loss, grad := xentRun(t, workers, rows, classes, z, y)
		if loss != wantLoss || !slices.Equal(grad, wantGrad) {
			t.Errorf("%d workers: loss %v, expected %v, or the gradient differs", workers, loss, wantLoss)
		}
	}
}
