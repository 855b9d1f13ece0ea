package models

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/optim"
)

// Finite-difference gradient checks in float64. Central differences with step h
// have error O(h^2) plus rounding O(eps/h); with h = 1e-6 and losses of order 1 the
// difference to a correct analytic gradient is below 1e-7, while a wrong formula
// (a missing factor, a wrong sign, a wrong index) is off by far more than the
// tolerance below.
const (
	fdStep   = 1e-6
	fdAbsTol = 1e-6
	fdRelTol = 1e-4
)

// fdCheck compares analytic gradients with central differences on up to
// perTensor entries of every parameter. loss must evaluate the loss at the
// current flat values; grad is the analytic gradient at the unperturbed point.
func fdCheck(t *testing.T, names []string, offsets, sizes []int, flat, grad []float64, loss func() float64, perTensor int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	worst := 0.0
	for i, name := range names {
		idx := make([]int, 0, perTensor)
		if sizes[i] <= perTensor {
			for j := 0; j < sizes[i]; j++ {
				idx = append(idx, j)
			}
		} else {
			for j := 0; j < perTensor; j++ {
				idx = append(idx, rng.IntN(sizes[i]))
			}
		}
		for _, j := range idx {
			k := offsets[i] + j
			orig := flat[k]
			flat[k] = orig + fdStep
			lp := loss()
			flat[k] = orig - fdStep
			lm := loss()
			flat[k] = orig
			num := (lp - lm) / (2 * fdStep)
			diff := math.Abs(num - grad[k])
			if diff > fdAbsTol+fdRelTol*math.Abs(num) {
				t.Errorf("%s[%d]: analytic %.9g, finite difference %.9g", name, j, grad[k], num)
			}
			worst = math.Max(worst, diff)
		}
	}
	t.Logf("largest |analytic - numeric| = %.3g", worst)
}

// checkModel runs the gradient check on a whole model built in float64, after
// prepare (if any) has changed its initial parameters.
func checkModel(t *testing.T, cfg Config, in Input, batch int, perTensor int, prepare ...func(n *Net)) {
	t.Helper()
	n, err := newNet(cfg, in, batch, 0, 3, tensor.Float64, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range prepare {
		f(n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, batch*numel(in.Shape))
	y := make([]int32, batch*in.YLen)
	for i := range x {
		if n.tokens {
			x[i] = float32(rng.IntN(in.Classes))
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	for i := range y {
		y[i] = int32(rng.IntN(in.Classes))
	}
	if _, err := n.Step(x, y); err != nil {
		t.Fatal(err)
	}
	grad := append([]float64(nil), n.grad.([]float64)...)
	var names []string
	var sizes []int
	for _, p := range n.train.b.params {
		names = append(names, p.name)
		sizes = append(sizes, numel(p.shape))
	}
	fdCheck(t, names, n.offsets, sizes, n.flat.([]float64), grad, func() float64 {
		l, err := n.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, perTensor)
}

// checkLayer checks one layer's gradients with respect to its input and its
// parameters: the input is declared as a parameter so that it gets a gradient,
// and the loss is sum(out * r) for a fixed random r, so every output element
// matters with a different weight.
func checkLayer(t *testing.T, cfg Config, inShape []int, layer func(b *builder, x *G.Node) *G.Node) {
	t.Helper()
	checkLayerOn(t, cfg, 0, inShape, layer)
}

// checkLayerOn is checkLayer with the fast ops splitting their work over
// opWorkers goroutines.
func checkLayerOn(t *testing.T, cfg Config, opWorkers int, inShape []int, layer func(b *builder, x *G.Node) *G.Node) {
	t.Helper()
	buildMu.Lock()
	b := newBuilder(withDefaults(cfg), tensor.Float64, true, opWorkers)
	var loss *G.Node
	var r *G.Node
	var rT *tensor.Dense
	func() {
		defer func() {
			if e := recover(); e != nil {
				buildMu.Unlock()
				if be, ok := e.(buildError); ok {
					t.Fatal(be.err)
				}
				panic(e)
			}
		}()
		x := b.param("input", optim.KindLinear, normal(1), inShape...)
		out := layer(b, x)
		r = b.input("r", out.Shape()...)
		rT = tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(out.Shape()...))
		loss = must(G.Sum(must(G.HadamardProd(out, r))))
	}()
	rng := rand.New(rand.NewPCG(5, 6))
	for i, d := 0, rT.Float64s(); i < len(d); i++ {
		d[i] = rng.NormFloat64()
	}
	if err := G.Let(r, rT); err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	flat := make([]float64, b.size())
	offsets, err := b.bind(flat)
	if err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	b.initialise(flat, offsets, 11)
	nodes := make(G.Nodes, len(b.params))
	var names []string
	var sizes []int
	for i, p := range b.params {
		nodes[i] = p.node
		names = append(names, p.name)
		sizes = append(sizes, numel(p.shape))
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(b.g, G.BindDualValues(nodes...))
	buildMu.Unlock()
	for _, op := range b.bns {
		_ = op.Reset()
	}
	grad := make([]float64, len(flat))
	run := func(readGrad bool) float64 {
		defer vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		for i, p := range b.params {
			gv, err := p.node.Grad()
			if err != nil {
				t.Fatal(err)
			}
			d := gv.Data().([]float64)
			if readGrad {
				copy(grad[offsets[i]:], d)
			}
			clear(d)
		}
		return loss.Value().Data().(float64)
	}
	run(true)
	fdCheck(t, names, offsets, sizes, flat, grad, func() float64 { return run(false) }, 40)
}

func TestGradLinear(t *testing.T) {
	checkLayer(t, Config{}, []int{3, 5}, func(b *builder, x *G.Node) *G.Node { return b.linear(x, 5, 4, "fc") })
}

func TestGradReLU(t *testing.T) {
	checkLayer(t, Config{}, []int{4, 6}, func(b *builder, x *G.Node) *G.Node { return b.relu(x) })
}

func TestGradMLP(t *testing.T) {
	checkModel(t, Config{Name: "mlp", Hidden: []int{7, 5}}, Input{Shape: []int{1, 3, 4}, Classes: 4, YLen: 1}, 3, 30)
}

func TestGradBatchNorm(t *testing.T) {
	checkLayer(t, Config{}, []int{4, 3, 2, 3}, func(b *builder, x *G.Node) *G.Node { return b.batchNorm(x, 3, "bn") })
}
