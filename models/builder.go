package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// buildMu serialises graph construction: building graphs, G.Grad and
// NewTapeMachine race on Gorgonia's global counters (GORGONIA.md).
var buildMu sync.Mutex

// paramSpec is one learnable tensor declared while a graph is built; its value is
// bound to a view of the flat buffer once the whole graph is known.
type paramSpec struct {
	name    string
	shape   []int
	kind    optim.Kind
	noDecay bool
	init    initFn
	node    *G.Node
}

// initFn fills a parameter's initial values (float64, converted by the caller).
type initFn func(rng *rand.Rand, v []float64)

// builder collects parameters and BatchNorm ops while a model function adds layers
// to a graph. Layer helpers panic with buildError on Gorgonia errors; build
// recovers them, which keeps model code readable.
type builder struct {
	g        *G.ExprGraph
	dt       tensor.Dtype
	cfg      Config
	training bool // training graph (BatchNorm in batch-statistics mode)
	params   []*paramSpec
	names    map[string]bool
	inputs   map[*G.Node]bool // nodes declared by input: no gradient needed
	bns      []normOp
	bnNames  []string
	ws       *ops.Workspace // scratch shared by the graph's fast ops
	flops    int64          // forward FLOPs of the products added so far (addProductFLOPs)
}

type buildError struct{ err error }

// newBuilder starts a graph whose fast ops split their work over opWorkers
// goroutines (< 1: runtime.GOMAXPROCS(0)).
func newBuilder(cfg Config, dt tensor.Dtype, training bool, opWorkers int) *builder {
	return &builder{g: G.NewGraph(), dt: dt, cfg: cfg, training: training,
		names: map[string]bool{}, inputs: map[*G.Node]bool{}, ws: ops.NewWorkspace(opWorkers)}
}

// must unwraps a Gorgonia result inside a model function.
func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(buildError{err})
	}
	return n
}

func (b *builder) fail(format string, args ...any) {
	panic(buildError{fmt.Errorf(format, args...)})
}

// param declares a learnable tensor. Names must be unique within a model.
func (b *builder) param(name string, kind optim.Kind, init initFn, shape ...int) *G.Node {
	if b.names[name] {
		b.fail("models: duplicate parameter name %q", name)
	}
	b.names[name] = true
	n := G.NewTensor(b.g, b.dt, len(shape), G.WithShape(shape...), G.WithName(name))
	b.params = append(b.params, &paramSpec{
		name: name, shape: append([]int(nil), shape...), kind: kind,
		noDecay: kind == optim.KindBias || kind == optim.KindNorm,
		init:    init, node: n,
	})
	return n
}

// input declares a non-learnable input node.
func (b *builder) input(name string, shape ...int) *G.Node {
	n := G.NewTensor(b.g, b.dt, len(shape), G.WithShape(shape...), G.WithName(name))
	b.inputs[n] = true
	return n
}

// fast says whether layers use the fast ops (ops_*.go) rather than Gorgonia's.
func (b *builder) fast() bool { return b.cfg.Ops != OpsGorgonia }

// numel is the product of a shape.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bind allocates the flat parameter buffer (float32 or float64 by the builder's
// dtype), points every parameter node at its view, and returns the buffer
// ([]float32 or []float64) with each parameter's offset.
func (b *builder) bind(flat any) ([]int, error) {
	offsets := make([]int, len(b.params))
	off := 0
	for i, p := range b.params {
		n := numel(p.shape)
		offsets[i] = off
		var t *tensor.Dense
		switch f := flat.(type) {
		case []float32:
			t = tensor.New(tensor.WithShape(p.shape...), tensor.WithBacking(f[off:off+n:off+n]))
		case []float64:
			t = tensor.New(tensor.WithShape(p.shape...), tensor.WithBacking(f[off:off+n:off+n]))
		default:
			return nil, fmt.Errorf("models: unsupported flat buffer %T", flat)
		}
		if err := G.Let(p.node, t); err != nil {
			return nil, fmt.Errorf("models: binding %s: %w", p.name, err)
		}
		off += n
	}
	return offsets, nil
}

// size is the total number of parameter values.
func (b *builder) size() int {
	n := 0
	for _, p := range b.params {
		n += numel(p.shape)
	}
	return n
}

// initialise fills the flat buffer from each parameter's init function with one
// seeded generator, in declaration order, so a seed fixes the model exactly.
func (b *builder) initialise(flat any, offsets []int, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6772616477697265)) // "gradwire"
	for i, p := range b.params {
		n := numel(p.shape)
		v := make([]float64, n)
		if p.init != nil {
			p.init(rng, v)
		}
		switch f := flat.(type) {
		case []float32:
			for j, x := range v {
				f[offsets[i]+j] = float32(x)
			}
		case []float64:
			copy(f[offsets[i]:], v)
		}
	}
}

// Initialisers. fan-in/fan-out follow PyTorch's conventions for each layer type.

func zeros(*rand.Rand, []float64) {}

func constant(c float64) initFn {
	return func(_ *rand.Rand, v []float64) {
		for i := range v {
			v[i] = c
		}
	}
}

// heNormal is He (Kaiming) normal init for layers followed by ReLU: std sqrt(2/fanIn).
func heNormal(fanIn int) initFn {
	std := math.Sqrt(2 / float64(fanIn))
	return func(rng *rand.Rand, v []float64) {
		for i := range v {
			v[i] = rng.NormFloat64() * std
		}
	}
}

// glorotUniform is Glorot (Xavier) uniform init: U(-a, a), a = sqrt(6/(fanIn+fanOut)).
func glorotUniform(fanIn, fanOut int) initFn {
	a := math.Sqrt(6 / float64(fanIn+fanOut))
	return uniform(a)
}

func uniform(a float64) initFn {
	return func(rng *rand.Rand, v []float64) {
		for i := range v {
			v[i] = (2*rng.Float64() - 1) * a
		}
	}
}

func normal(std float64) initFn {
	return func(rng *rand.Rand, v []float64) {
		for i := range v {
			v[i] = rng.NormFloat64() * std
		}
	}
}
