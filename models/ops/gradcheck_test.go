package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Finite-difference gradient checks of each op on its own, in float64: the
// loss is sum(out * r) for a fixed random r, so that every output element
// counts with its own weight. Central differences with step h = 1e-6 are
// within about 1e-7 of a correct gradient on losses of order 1; a wrong
// formula (a missing factor, a wrong sign or index) is off by far more than
// the tolerance.
const (
	fdStep   = 1e-6
	fdAbsTol = 1e-6
	fdRelTol = 1e-4
)

// gradCheck builds build's op over inputs of the given shapes (random normal
// values), on one and on three workers, and checks the gradient of every
// input the op differentiates against central differences.
func gradCheck(t *testing.T, shapes [][]int, build func(ws *Workspace, in []*G.Node) (*G.Node, error)) {
	t.Helper()
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) {
			gradCheckOn(t, NewWorkspace(workers), shapes, build)
		})
	}
}

func gradCheckOn(t *testing.T, ws *Workspace, shapes [][]int, build func(ws *Workspace, in []*G.Node) (*G.Node, error)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	g := G.NewGraph()
	in := make([]*G.Node, len(shapes))
	vals := make([][]float64, len(shapes))
	for i, s := range shapes {
		in[i] = G.NewTensor(g, tensor.Float64, len(s), G.WithShape(s...), G.WithName(fmt.Sprintf("in%d", i)))
		vals[i] = make([]float64, numel(s))
		for j := range vals[i] {
			vals[i][j] = rng.NormFloat64()
		}
		if err := G.Let(in[i], tensor.New(tensor.WithShape(s...), tensor.WithBacking(vals[i]))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := build(ws, in)
	if err != nil {
		t.Fatal(err)
	}
	loss := out // a scalar op (a loss) is checked as it is
	if !out.IsScalar() {
		rv := make([]float64, out.Shape().TotalSize())
		for j := range rv {
			rv[j] = rng.NormFloat64()
		}
		r := G.NewTensor(g, tensor.Float64, out.Dims(), G.WithShape(out.Shape()...), G.WithName("r"))
		if err := G.Let(r, tensor.New(tensor.WithShape(out.Shape()...), tensor.WithBacking(rv))); err != nil {
			t.Fatal(err)
		}
		if loss, err = G.Sum(G.Must(G.HadamardProd(out, r))); err != nil {
			t.Fatal(err)
		}
	}
	// Only the inputs the op differentiates get a gradient.
	var wrt G.Nodes
	var which []int
	op, ok := out.Op().(G.SDOp)
	if !ok {
		t.Fatalf("%v is not differentiable", out.Op())
	}
	for i, d := range op.DiffWRT(len(in)) {
		if d {
			wrt, which = append(wrt, in[i]), append(which, i)
		}
	}
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer vm.Close()
	run := func() float64 {
		defer vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return loss.Value().Data().(float64)
	}
	run()
	grads := make([][]float64, len(wrt))
	for k, n := range wrt {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads[k] = append([]float64(nil), gv.Data().([]float64)...)
	}
	worst := 0.0
	for k, i := range which {
		v := vals[i]
		for j := range v {
			orig := v[j]
			v[j] = orig + fdStep
			lp := run()
			v[j] = orig - fdStep
			lm := run()
			v[j] = orig
			num := (lp - lm) / (2 * fdStep)
			diff := math.Abs(num - grads[k][j])
			if diff > fdAbsTol+fdRelTol*math.Abs(num) {
				t.Errorf("input %d [%d]: analytic %.9g, finite difference %.9g", i, j, grads[k][j], num)
			}
			worst = max(worst, diff)
		}
	}
	if len(which) == 0 {
		t.Fatal("the op differentiates no input")
	}
	t.Logf("largest |analytic - numeric| = %.3g", worst)
}

func TestGradConv2d(t *testing.T) {
	for _, c := range []struct {
		x           []int
		k, kk       int
		stride, pad int
	}{
		{[]int{2, 3, 5, 5}, 4, 3, 1, 1},
		{[]int{2, 2, 6, 5}, 3, 3, 2, 0},
		{[]int{3, 2, 4, 4}, 2, 1, 2, 0},
		// The shifted GEMMs' three unrollings (conv_shifted.go): depth C per
		// tap from 16 channels, rows (c, kj) from C·k = 64, and 5×5 padding 0.
		{[]int{2, 16, 4, 3}, 3, 3, 1, 1},
		{[]int{1, 13, 5, 4}, 2, 5, 1, 2},
		{[]int{2, 2, 6, 5}, 3, 5, 1, 0},
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			gradCheck(t, [][]int{c.x, {c.k, c.x[1], c.kk, c.kk}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
				return Conv2d(ws, in[0], in[1], c.stride, c.pad, true)
			})
		})
	}
}

func TestGradLSTM(t *testing.T) {
	const b, steps, inW, h = 5, 3, 4, 3
	for _, last := range []bool{false, true} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			gradCheck(t, [][]int{{b, steps, inW}, {inW, 4 * h}, {h, 4 * h}, {4 * h}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
				return LSTM(ws, in[0], in[1], in[2], in[3], last, true)
			})
		})
	}
}

func TestGradBatchNorm(t *testing.T) {
	for _, relu := range []bool{false, true} {
		t.Run(fmt.Sprintf("relu=%v", relu), func(t *testing.T) {
			gradCheck(t, [][]int{{3, 2, 2, 3}, {2}, {2}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
				y, _, err := BatchNorm(ws, in[0], in[1], in[2], relu, true, 0.1, 1e-5)
				return y, err
			})
		})
	}
}

func TestGradMaxPool2d(t *testing.T) {
	for _, c := range poolCases {
		t.Run(fmt.Sprintf("in%v_k%d_s%d", c.shape, c.k, c.stride), func(t *testing.T) {
			gradCheck(t, [][]int{c.shape}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
				return MaxPool2d(ws, in[0], c.k, c.stride)
			})
		})
	}
}

func TestGradGlobalAvgPool2d(t *testing.T) {
	gradCheck(t, [][]int{{2, 3, 2, 3}}, func(_ *Workspace, in []*G.Node) (*G.Node, error) {
		return GlobalAvgPool2d(in[0])
	})
}

func TestGradEmbedding(t *testing.T) {
	// x·E holds for any x, so a dense random x checks both gradients.
	gradCheck(t, [][]int{{4, 5}, {5, 3}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
		return Embedding(ws, in[0], in[1], true)
	})
}

func TestGradBiasAct(t *testing.T) {
	for _, x := range [][]int{{2, 3, 2, 2}, {4, 3}} {
		for _, relu := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v_relu=%v", x, relu), func(t *testing.T) {
				gradCheck(t, [][]int{x, {3}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
					return BiasAct(ws, in[0], in[1], relu)
				})
			})
		}
	}
}

func TestGradAddReLU(t *testing.T) {
	gradCheck(t, [][]int{{2, 3, 4}, {2, 3, 4}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
		return AddReLU(ws, in[0], in[1])
	})
}
