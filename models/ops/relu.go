package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Fused element-wise ops around ReLU, branch-free:
//
//	y = biasOp(x, b)        x + b[channel], then max(·, 0) if relu; x is (N, C, ...)
//	y = addReluOp(a, b)     max(a + b, 0), the residual join
//
// Backward: d = reluGradOp(y, dy) = dy where y > 0 (the gradient of x, or of
// both a and b), and db = biasGradOp(d), d summed over all axes but the channel.

// channels splits a shape (N, C, ...) into N, C and the size of the rest.
func channels(s tensor.Shape) (n, c, inner int) {
	inner = 1
	for _, d := range s[2:] {
		inner *= d
	}
	return s[0], s[1], inner
}

// biasOp adds a per-channel bias, with an optional ReLU.
type biasOp struct {
	plainOp
	id     int64
	ws     *Workspace
	dims   int
	relu   bool
	groups int // per-group bias gradients (Workspace.SetGroups)
	y      *tensor.Dense
}

// BiasAct builds x + b (b of shape (C), broadcast over every axis of x but the
// second), followed by a ReLU if relu.
func BiasAct(ws *Workspace, x, b *G.Node, relu bool) (*G.Node, error) {
	op := &biasOp{id: nextOpID(), ws: ws, dims: x.Dims(), relu: relu, groups: ws.Groups()}
	if s := x.Shape(); len(s) < 2 || s[0]%op.groups != 0 {
		return nil, fmt.Errorf("%v: input %v does not split into %d groups", op, s, op.groups)
	}
	return G.ApplyOp(op, x, b)
}

func (op *biasOp) Arity() int            { return 2 }
func (op *biasOp) Type() hm.Type         { return fnType(op.dims, op.dims, 1) }
func (op *biasOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastBias(relu=%v)#%d", op.relu, op.id) }
func (op *biasOp) Hashcode() uint32      { return hashOp(op) }
func (op *biasOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *biasOp) String() string {
	if op.relu {
		return fmt.Sprintf("BiasReLU#%d", op.id)
	}
	return fmt.Sprintf("Bias#%d", op.id)
}

func (op *biasOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	xs, ok1 := ds[0].(tensor.Shape)
	bs, ok2 := ds[1].(tensor.Shape)
	if !ok1 || !ok2 || len(xs) < 2 || bs.TotalSize() != xs[1] {
		return nil, fmt.Errorf("%v: input %v and bias %v do not fit", op, ds[0], ds[1])
	}
	return xs.Clone(), nil
}

func (op *biasOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if len(s) < 2 || a[1].Size() != s[1] {
		return nil, fmt.Errorf("%v: input %v and bias %v do not fit", op, s, a[1].Shape())
	}
	y := reuse(&op.y, a[0].Dtype(), s)
	switch x := a[0].Data().(type) {
	case []float32:
		addBias(op.ws, y.Float32s(), x, a[1].Float32s(), s, op.relu)
	case []float64:
		addBias(op.ws, y.Float64s(), x, a[1].Float64s(), s, op.relu)
	}
	return y, nil
}

func addBias[T elem](ws *Workspace, y, x, b []T, s tensor.Shape, relu bool) {
	n, c, inner := channels(s)
	if inner == 1 { // (N, C): one bias vector per row
		for r := range n {
			xr, yr := x[r*c:][:c], y[r*c:][:c]
			if relu {
				addRelu(yr, xr, b)
				continue
			}
			for i, v := range xr {
				yr[i] = v + b[i]
			}
		}
		return
	}
	parallel(n, ws.split(n), func(_, lo, hi int) {
		for r := lo * c; r < hi*c; r++ {
			affine(y[r*inner:][:inner], x[r*inner:][:inner], 1, b[r%c], relu)
		}
	})
}

func (op *biasOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d := grad
	if op.relu {
		var err error
		if d, err = G.ApplyOp(&reluGradOp{id: op.id, ws: op.ws, dims: op.dims}, output, grad); err != nil {
			return nil, err
		}
	}
	db, err := G.ApplyOp(&biasGradOp{id: op.id, ws: op.ws, dims: op.dims, groups: op.groups, bShape: inputs[1].Shape().Clone()}, d)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d, db}, nil
}

// addReluOp is max(a + b, 0) for two tensors of the same shape.
type addReluOp struct {
	plainOp
	id   int64
	ws   *Workspace
	dims int
	y    *tensor.Dense
}

// AddReLU builds max(a + b, 0).
func AddReLU(ws *Workspace, a, b *G.Node) (*G.Node, error) {
	return G.ApplyOp(&addReluOp{id: nextOpID(), ws: ws, dims: a.Dims()}, a, b)
}

func (op *addReluOp) Arity() int            { return 2 }
func (op *addReluOp) Type() hm.Type         { return fnType(op.dims, op.dims, op.dims) }
func (op *addReluOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastAddReLU#%d", op.id) }
func (op *addReluOp) Hashcode() uint32      { return hashOp(op) }
func (op *addReluOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *addReluOp) String() string        { return fmt.Sprintf("AddReLU#%d", op.id) }

func (op *addReluOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	as, ok1 := ds[0].(tensor.Shape)
	bs, ok2 := ds[1].(tensor.Shape)
	if !ok1 || !ok2 || !as.Eq(bs) {
		return nil, fmt.Errorf("%v: shapes %v and %v differ", op, ds[0], ds[1])
	}
	return as.Clone(), nil
}

func (op *addReluOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if !a[0].Shape().Eq(a[1].Shape()) {
		return nil, fmt.Errorf("%v: shapes %v and %v differ", op, a[0].Shape(), a[1].Shape())
	}
	y := reuse(&op.y, a[0].Dtype(), a[0].Shape())
	switch x := a[0].Data().(type) {
	case []float32:
		op.ws.chunked(len(x), func(lo, hi int) { addRelu(y.Float32s()[lo:hi], x[lo:hi], a[1].Float32s()[lo:hi]) })
	case []float64:
		op.ws.chunked(len(x), func(lo, hi int) { addRelu(y.Float64s()[lo:hi], x[lo:hi], a[1].Float64s()[lo:hi]) })
	}
	return y, nil
}

func (op *addReluOp) SymDiff(_ G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&reluGradOp{id: op.id, ws: op.ws, dims: op.dims}, output, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d, d}, nil
}

// chunked runs f over [0, n) split among the workers, for element-wise work
// large enough to share.
func (ws *Workspace) chunked(n int, f func(lo, hi int)) {
	parallel(n, ws.split(n/16384+1), func(_, lo, hi int) { f(lo, hi) })
}

// reluGradOp is dy where the ReLU output y is positive, else 0.
type reluGradOp struct {
	backwardOp
	id   int64 // the forward op's
	ws   *Workspace
	dims int
	d    *tensor.Dense
}

func (op *reluGradOp) Arity() int            { return 2 }
func (op *reluGradOp) Type() hm.Type         { return fnType(op.dims, op.dims, op.dims) }
func (op *reluGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastReLUGrad#%d", op.id) }
func (op *reluGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *reluGradOp) String() string        { return fmt.Sprintf("ReLUGrad#%d", op.id) }
func (op *reluGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, ok := ds[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%v: shape %v", op, ds[0])
	}
	return s.Clone(), nil
}

func (op *reluGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if a[0].Size() != a[1].Size() {
		return nil, fmt.Errorf("%v: output %v and gradient %v differ", op, a[0].Shape(), a[1].Shape())
	}
	d := reuse(&op.d, a[0].Dtype(), a[0].Shape())
	switch y := a[0].Data().(type) {
	case []float32:
		op.ws.chunked(len(y), func(lo, hi int) { reluGrad(d.Float32s()[lo:hi], a[1].Float32s()[lo:hi], y[lo:hi]) })
	case []float64:
		op.ws.chunked(len(y), func(lo, hi int) { reluGrad(d.Float64s()[lo:hi], a[1].Float64s()[lo:hi], y[lo:hi]) })
	}
	return d, nil
}

// biasGradOp sums a gradient (N, C, ...) over every axis but the channel;
// with groups, over each group of N/groups samples into its own slice.
type biasGradOp struct {
	backwardOp
	id     int64 // the forward op's
	ws     *Workspace
	dims   int
	groups int
	bShape tensor.Shape
	db     *tensor.Dense
	dbG    [][]float32
}

// WriteGroupsInto makes the op write each group's bias gradient into dsts
// (see GroupedOutput).
func (op *biasGradOp) WriteGroupsInto(dsts [][]float32) bool {
	if !groupDsts(dsts, op.groups, op.bShape) || !writeInto(&op.db, dsts[0], op.bShape) {
		return false
	}
	op.dbG = dsts
	return true
}

func (op *biasGradOp) Arity() int            { return 1 }
func (op *biasGradOp) Type() hm.Type         { return fnType(op.bShape.Dims(), op.dims) }
func (op *biasGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastBiasGrad#%d", op.id) }
func (op *biasGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *biasGradOp) String() string        { return fmt.Sprintf("BiasGrad#%d", op.id) }
func (op *biasGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.bShape.Clone(), nil
}

func (op *biasGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if len(s) < 2 || s[1] != op.bShape.TotalSize() {
		return nil, fmt.Errorf("%v: gradient %v does not fit bias %v", op, s, op.bShape)
	}
	db := reuse(&op.db, a[0].Dtype(), op.bShape)
	if op.groups > 1 {
		d, ok := a[0].Data().([]float32)
		if !ok || len(op.dbG) != op.groups {
			return nil, errNoGroupDsts(op, op.groups)
		}
		if s[0]%op.groups != 0 {
			return nil, fmt.Errorf("%v: gradient %v does not split into %d groups", op, s, op.groups)
		}
		gs := s.Clone()
		gs[0] /= op.groups
		per := gs.TotalSize()
		for g, dst := range op.dbG {
			channelSums(op.ws, dst, d[g*per:][:per], gs)
		}
		return db, nil
	}
	switch d := a[0].Data().(type) {
	case []float32:
		channelSums(op.ws, db.Float32s(), d, s)
	case []float64:
		channelSums(op.ws, db.Float64s(), d, s)
	}
	return db, nil
}

// channelSums writes out[c] = the sum of d (N, C, ...) over all axes but C,
// each channel in a fixed order.
func channelSums[T elem](ws *Workspace, out, d []T, s tensor.Shape) {
	n, c, inner := channels(s)
	if inner == 1 {
		clear(out)
		for r := range n {
			for i, v := range d[r*c:][:c] {
				out[i] += v
			}
		}
		return
	}
	parallel(c, ws.split(c), func(_, lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			var acc float64
			for r := range n {
				acc += float64(sum(d[(r*c+ch)*inner:][:inner]))
			}
			out[ch] = T(acc)
		}
	})
}

// sum adds up p with four accumulators (independent chains pipeline better),
// or 16 in AVX-512 assembly on float32 (loops_amd64.s).
func sum[T elem](p []T) T {
	if p32, ok := any(p).([]float32); ok && loopsAVX512 && len(p) > 0 {
		return T(sumAVX512(&p32[0], len(p32)))
	}
	var a0, a1, a2, a3 T
	i := 0
	for ; i+4 <= len(p); i += 4 {
		a0 += p[i]
		a1 += p[i+1]
		a2 += p[i+2]
		a3 += p[i+3]
	}
	for ; i < len(p); i++ {
		a0 += p[i]
	}
	return (a0 + a1) + (a2 + a3)
}
