// Package ops holds the fast Gorgonia ops of the models: convolution, LSTM,
// embedding, BatchNorm, pooling, bias and ReLU, fully connected layers and
// the softmax cross-entropy loss, each with explicit backward ops. They run on float32 (training) and float64 (gradient checks), split
// their work over a fixed number of goroutines, and reuse their buffers from
// step to step.
package ops

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/chewxy/hm"
	"github.com/gradwire/gradwire/internal/par"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Shared plumbing of the fast ops: Gorgonia ops written for the models. Each forward op has explicit backward ops built by
// SymDiff; the ops of one layer share a state struct that owns their output and
// scratch buffers. The TapeMachine keeps no value across Reset and never frees
// CPU values into a pool, so an op can return the same tensor every step: a
// training step then allocates almost nothing.

// elem is the element type of a fast op: float32 for training, float64 for
// gradient checks.
type elem interface{ float32 | float64 }

// split is how many workers an op uses for n independent pieces of work.
func (ws *Workspace) split(n int) int { return max(1, min(ws.workers, n)) }

// parallel splits [0, n) into w contiguous ranges (w from split) and runs
// f(worker, lo, hi) on each, the first on the calling goroutine, the others on
// the process's helper goroutines (par.Default).
func parallel(n, w int, f func(wk, lo, hi int)) { par.Default().Run(n, w, f) }

// opIDs numbers op instances: Gorgonia merges nodes whose ops hash alike, so
// every stateful op writes its instance id into its hash.
var opIDs atomic.Int64

func nextOpID() int64 { return opIDs.Add(1) }

func hashOp(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// tensorType is a tensor of the given rank with the op's element type.
func tensorType(dims int) hm.Type { return G.TensorType{Dims: dims, Of: hm.TypeVariable('a')} }

// fnType is the type of an op taking tensors of the given ranks and returning
// one of rank out.
func fnType(out int, in ...int) hm.Type {
	ts := make([]hm.Type, 0, len(in)+1)
	for _, d := range in {
		ts = append(ts, tensorType(d))
	}
	return hm.NewFnType(append(ts, tensorType(out))...)
}

// plainOp gives an op the answers every fast op shares: it returns a value,
// not a pointer into its input; it calls no external code (CallsExtern true
// would make Gorgonia allocate before every call); it overwrites no input.
type plainOp struct{}

func (plainOp) ReturnsPtr() bool     { return false }
func (plainOp) CallsExtern() bool    { return false }
func (plainOp) OverwritesInput() int { return -1 }

// backwardOp is plainOp for the ops that compute gradients: the graph never
// differentiates through them (no second derivatives).
type backwardOp struct{ plainOp }

func (backwardOp) DiffWRT(inputs int) []bool { return make([]bool, inputs) }

func (backwardOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, errors.New("ops: second derivatives of the fast ops' gradients are not implemented")
}

// dense returns the tensor behind a value, contiguous.
func dense(v G.Value) (*tensor.Dense, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("expected a dense tensor, got %T", v)
	}
	if d.IsView() {
		d = d.Materialize().(*tensor.Dense)
	}
	return d, nil
}

// denseArgs converts all op inputs with dense, checking that they share a dtype.
func denseArgs(op fmt.Stringer, vals []G.Value) ([]*tensor.Dense, error) {
	out := make([]*tensor.Dense, len(vals))
	for i, v := range vals {
		d, err := dense(v)
		if err != nil {
			return nil, fmt.Errorf("%v: input %d: %w", op, i, err)
		}
		if i > 0 && d.Dtype() != out[0].Dtype() {
			return nil, fmt.Errorf("%v: input %d is %v, input 0 is %v", op, i, d.Dtype(), out[0].Dtype())
		}
		out[i] = d
	}
	if dt := out[0].Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("%v: unsupported dtype %v", op, dt)
	}
	return out, nil
}

// reuse returns *p reshaped to shape, or a new tensor when *p has another
// dtype or size. Ops return the same tensor every step; a Reshape node
// downstream may have changed its shape in place after its last use.
func reuse(p **tensor.Dense, dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	t := *p
	if t == nil || t.Dtype() != dt || t.DataSize() != shape.TotalSize() {
		t = tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...), tensor.WithEngine(fastEngine{}))
		*p = t
		return t
	}
	if !t.Shape().Eq(shape) {
		if err := t.Reshape(shape...); err != nil {
			t = tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...), tensor.WithEngine(fastEngine{}))
			*p = t
		}
	}
	return t
}

// OutputInto is implemented by the ops that can write their output into a
// buffer of the caller's: a parameter's gradient straight into the model's
// flat gradient buffer, which saves copying it there after every step.
type OutputInto interface {
	// WriteInto makes the op's output a tensor over backing ([]float32 or
	// []float64 of the output's size) from the next run on, and reports
	// whether it does. The op overwrites backing whenever it runs and
	// never reads it. A run in the other dtype uses a tensor of its own.
	WriteInto(backing any) bool
}

// GroupedOutput is implemented by the ops that compute a parameter's
// gradient and can compute it per group of rows (Workspace.SetGroups).
type GroupedOutput interface {
	// WriteGroupsInto makes the op write group i's gradient into dsts[i],
	// each of the gradient's size, from the next run on; the op's output is
	// then a tensor over dsts[0]. It reports whether it does: the op must
	// have been built with as many groups as dsts has slices.
	WriteGroupsInto(dsts [][]float32) bool
}

// groupDsts checks dsts for an op built with groups groups whose gradient
// has shape: one slice of the gradient's size per group.
func groupDsts(dsts [][]float32, groups int, shape tensor.Shape) bool {
	if groups < 2 || len(dsts) != groups {
		return false
	}
	for _, d := range dsts {
		if len(d) != shape.TotalSize() {
			return false
		}
	}
	return true
}

// errNoGroupDsts is the error of a grouped op run before WriteGroupsInto.
func errNoGroupDsts(op fmt.Stringer, groups int) error {
	return fmt.Errorf("%v: built for %d groups, but no per-group gradient buffers were given (WriteGroupsInto), or the gradient is not float32", op, groups)
}

// writeInto points *p at a tensor of the given shape over backing, when
// backing is a float32 or float64 slice of that size.
func writeInto(p **tensor.Dense, backing any, shape tensor.Shape) bool {
	n := shape.TotalSize()
	switch b := backing.(type) {
	case []float32:
		if len(b) != n {
			return false
		}
	case []float64:
		if len(b) != n {
			return false
		}
	default:
		return false
	}
	*p = tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(backing), tensor.WithEngine(fastEngine{}))
	return true
}

// Workspace is what the fast ops of one graph share: the number of goroutines
// each op splits its work (samples or channels) over, and scratch memory. A
// TapeMachine runs one op at a time, so ops of the same graph never use the
// scratch at once; nothing in it outlives a Do call. Results do not depend on
// workers: every reduction runs in an order fixed by the shapes alone.
type Workspace struct {
	workers int
	groups  int // see SetGroups; 0 and 1 both mean one group
	f32     []float32
	f64     []float64
}

// SetGroups makes the ops built on the workspace from now on compute, for a
// batch of k groups of equal size laid end to end (k workers' batches), one
// parameter gradient per group instead of one for the batch: each group's
// gradient of the mean loss over its own rows, written where GroupedOutput
// says. Only the float32 fast ops with parameters, and the loss, take groups.
func (ws *Workspace) SetGroups(k int) { ws.groups = k }

// Groups is the number of groups set by SetGroups (at least 1).
func (ws *Workspace) Groups() int { return max(1, ws.groups) }

// NewWorkspace returns a workspace whose ops use workers goroutines each;
// workers < 1 means runtime.GOMAXPROCS(0).
func NewWorkspace(workers int) *Workspace {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	return &Workspace{workers: workers}
}

// Workers is the number of goroutines each op of the workspace uses.
func (ws *Workspace) Workers() int { return ws.workers }

// scratch returns n values of the workspace (contents undefined), growing it
// when needed.
func scratch[T elem](ws *Workspace, n int) []T {
	var p *[]T
	switch any(T(0)).(type) {
	case float32:
		p = any(&ws.f32).(*[]T)
	default:
		p = any(&ws.f64).(*[]T)
	}
	if cap(*p) < n {
		*p = make([]T, n)
	}
	return (*p)[:n]
}

// Branch-free ReLU kernels. A data-dependent branch on the sign mispredicts
// about half the time on activations (~5 ns per element, against under 1 ns).
// The float32 and float64 versions are written out: Go's generic max is not
// compiled to min/max instructions.

// relu32 clears a float with the sign bit set (negative values and -0) to +0.
// A NaN, of either sign, passes as max(v, 0) would pass it, so that a
// diverged value reaches the loss (the branch is never taken in training).
func relu32(v float32) float32 {
	if v != v {
		return v
	}
	b := math.Float32bits(v)
	return math.Float32frombits(b &^ uint32(int32(b)>>31))
}

func relu64(v float64) float64 {
	if v != v {
		return v
	}
	b := math.Float64bits(v)
	return math.Float64frombits(b &^ uint64(int64(b)>>63))
}

// pass32 is d where y, a ReLU output (+0 or positive), is positive, else 0.
func pass32(d, y float32) float32 {
	m := uint32(-int32(math.Float32bits(y)) >> 31)
	return math.Float32frombits(math.Float32bits(d) & m)
}

func pass64(d, y float64) float64 {
	m := uint64(-int64(math.Float64bits(y)) >> 63)
	return math.Float64frombits(math.Float64bits(d) & m)
}

// loopsAsm reports whether the float32 loops that have assembly versions
// run them (AVX-512, or AVX2 without it); asmLoop picks the version.
func loopsAsm() bool { return loopsAVX512 || loopsAVX2 }

func asmLoop[F any](avx512, avx2 F) F {
	if loopsAVX512 {
		return avx512
	}
	return avx2
}

// affine writes y = x*a + b, with a ReLU if relu.
func affine[T elem](y, x []T, a, b T, relu bool) {
	y = y[:len(x)]
	if x32, ok := any(x).([]float32); ok && loopsAsm() && len(x) > 0 {
		asmLoop(bnAffineAVX512, bnAffineAVX2)(&any(y).([]float32)[0], &x32[0], len(x32), float32(a), float32(b), relu)
		return
	}
	if !relu {
		for i, v := range x {
			y[i] = v*a + b
		}
		return
	}
	switch yy := any(y).(type) {
	case []float32:
		xx, a, b := any(x).([]float32), float32(a), float32(b)
		for i, v := range xx {
			yy[i] = relu32(v*a + b)
		}
	case []float64:
		xx, a, b := any(x).([]float64), float64(a), float64(b)
		for i, v := range xx {
			yy[i] = relu64(v*a + b)
		}
	}
}

// addRelu writes y = max(a + b, 0).
func addRelu[T elem](y, a, b []T) {
	if a32, ok := any(a).([]float32); ok && loopsAsm() && len(a) > 0 {
		y32, b32 := any(y).([]float32)[:len(a)], any(b).([]float32)[:len(a)]
		asmLoop(reluAddAVX512, reluAddAVX2)(&y32[0], &a32[0], &b32[0], len(a32))
		return
	}
	switch yy := any(y).(type) {
	case []float32:
		aa, bb := any(a).([]float32), any(b).([]float32)
		yy, bb = yy[:len(aa)], bb[:len(aa)]
		for i, v := range aa {
			yy[i] = relu32(v + bb[i])
		}
	case []float64:
		aa, bb := any(a).([]float64), any(b).([]float64)
		yy, bb = yy[:len(aa)], bb[:len(aa)]
		for i, v := range aa {
			yy[i] = relu64(v + bb[i])
		}
	}
}

// reluGrad writes d = dy where the ReLU output y is positive, else 0.
func reluGrad[T elem](d, dy, y []T) {
	if y32, ok := any(y).([]float32); ok && loopsAsm() && len(y) > 0 {
		d32, dy32 := any(d).([]float32)[:len(y)], any(dy).([]float32)[:len(y)]
		asmLoop(reluGradAVX512, reluGradAVX2)(&d32[0], &dy32[0], &y32[0], len(y32))
		return
	}
	switch dd := any(d).(type) {
	case []float32:
		gg, yy := any(dy).([]float32), any(y).([]float32)
		dd, gg = dd[:len(yy)], gg[:len(yy)]
		for i, v := range yy {
			dd[i] = pass32(gg[i], v)
		}
	case []float64:
		gg, yy := any(dy).([]float64), any(y).([]float64)
		dd, gg = dd[:len(yy)], gg[:len(yy)]
		for i, v := range yy {
			dd[i] = pass64(gg[i], v)
		}
	}
}
