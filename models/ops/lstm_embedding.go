package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The embedding product x·E as a sparse product: the forward op lists the
// nonzeros of each row of x (N, V), so a one-hot row costs one row copy of E
// (V, D) instead of a V-long dot product per output value, and the backward
// op adds each output row's gradient into the table rows it was read from.
// The result is x·E for any x, one-hot or not.
//
//	y  = embedOp(x, E)
//	dE = embedTableGradOp(dy)      (reads the nonzeros the forward op listed)
//	dx = embedDataGradOp(E, dy)    dy·Eᵀ, not built for the graph's input
type embedState struct {
	id     int64
	ws     *Workspace
	needDX bool
	// The nonzeros of x in row order: row r has columns col[start[r]:start[r+1]]
	// with values val[...].
	start []int32
	col   []int32
	val   []float64
	y     *tensor.Dense
	dE    *tensor.Dense
	dx    *tensor.Dense
	// Per-group table gradients (Workspace.SetGroups): groups of N/groups
	// rows, each group's dE into its own slice.
	groups int
	dEG    [][]float32
	// One group's dE as embedTableGrad takes it (a slice of these arrays,
	// so that a step allocates nothing for it).
	one32 [1][]float32
	one64 [1][]float64
}

// Embedding builds x·E for x (N, V) and E (V, D); needDX is false when x
// is an input that needs no gradient.
func Embedding(ws *Workspace, x, e *G.Node, needDX bool) (*G.Node, error) {
	xs, es := x.Shape(), e.Shape()
	if len(xs) != 2 || len(es) != 2 || xs[1] != es[0] {
		return nil, fmt.Errorf("embedding: input %v and table %v do not fit", xs, es)
	}
	st := &embedState{id: nextOpID(), ws: ws, needDX: needDX, groups: ws.Groups()}
	if xs[0]%st.groups != 0 {
		return nil, fmt.Errorf("embedding: %d rows do not split into %d groups", xs[0], st.groups)
	}
	return G.ApplyOp(&embedOp{plainOp{}, st}, x, e)
}

func (st *embedState) name(kind string) string { return fmt.Sprintf("%s#%d", kind, st.id) }

type embedOp struct {
	plainOp
	*embedState
}

func (op *embedOp) Arity() int            { return 2 }
func (op *embedOp) Type() hm.Type         { return fnType(2, 2, 2) }
func (op *embedOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastEmbedding#%d", op.id) }
func (op *embedOp) Hashcode() uint32      { return hashOp(op) }
func (op *embedOp) DiffWRT(int) []bool    { return []bool{op.needDX, true} }
func (op *embedOp) String() string        { return op.name("Embedding") }

func (op *embedOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	xs, ok1 := ds[0].(tensor.Shape)
	es, ok2 := ds[1].(tensor.Shape)
	if !ok1 || !ok2 || len(xs) != 2 || len(es) != 2 || xs[1] != es[0] {
		return nil, fmt.Errorf("%v: input %v and table %v do not fit", op, ds[0], ds[1])
	}
	return tensor.Shape{xs[0], es[1]}, nil
}

func (op *embedOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	xs, es := a[0].Shape(), a[1].Shape()
	if len(xs) != 2 || len(es) != 2 || xs[1] != es[0] {
		return nil, fmt.Errorf("%v: input %v and table %v do not fit", op, xs, es)
	}
	y := reuse(&op.y, a[0].Dtype(), tensor.Shape{xs[0], es[1]})
	switch x := a[0].Data().(type) {
	case []float32:
		embedIndex(op.embedState, x, xs[0], xs[1])
		embedForward(op.embedState, a[1].Float32s(), y.Float32s(), es[1])
	case []float64:
		embedIndex(op.embedState, x, xs[0], xs[1])
		embedForward(op.embedState, a[1].Float64s(), y.Float64s(), es[1])
	}
	return y, nil
}

// embedIndex lists the nonzeros of x (n rows of v), reusing the lists' memory.
func embedIndex[T elem](st *embedState, x []T, n, v int) {
	st.start = append(st.start[:0], 0)
	st.col, st.val = st.col[:0], st.val[:0]
	for r := range n {
		for c, w := range x[r*v : (r+1)*v] {
			if w != 0 {
				st.col = append(st.col, int32(c))
				st.val = append(st.val, float64(w))
			}
		}
		st.start = append(st.start, int32(len(st.col)))
	}
}

// embedForward writes each row of y as the sum of its nonzeros' table rows:
// a copy for a one-hot row, as in the dense product (the zeros add nothing).
func embedForward[T elem](st *embedState, e, y []T, d int) {
	n := len(st.start) - 1
	parallel(n, st.ws.split(n/64+1), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			yr := y[r*d:][:d]
			a, b := st.start[r], st.start[r+1]
			if b-a == 1 && st.val[a] == 1 {
				copy(yr, e[int(st.col[a])*d:][:d])
				continue
			}
			clear(yr)
			for k := a; k < b; k++ {
				axpy(yr, e[int(st.col[k])*d:][:d], T(st.val[k]))
			}
		}
	})
}

// axpy adds a·src to dst.
func axpy[T elem](dst, src []T, a T) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += a * v
	}
}

func (op *embedOp) SymDiff(inputs G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	x, e := inputs[0], inputs[1]
	var dx *G.Node
	if op.needDX {
		var err error
		if dx, err = G.ApplyOp(&embedDataGradOp{backwardOp{}, op.embedState, x.Shape().Clone()}, e, grad); err != nil {
			return nil, err
		}
	}
	de, err := G.ApplyOp(&embedTableGradOp{backwardOp{}, op.embedState, e.Shape().Clone()}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, de}, nil
}

// embedTableGradOp computes dE = xᵀ·dy from the listed nonzeros.
type embedTableGradOp struct {
	backwardOp
	*embedState
	eShape tensor.Shape
}

func (op *embedTableGradOp) Arity() int    { return 1 }
func (op *embedTableGradOp) Type() hm.Type { return fnType(2, 2) }
func (op *embedTableGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "fastEmbeddingTableGrad#%d", op.id)
}
func (op *embedTableGradOp) Hashcode() uint32 { return hashOp(op) }
func (op *embedTableGradOp) String() string   { return op.name("EmbeddingTableGrad") }
func (op *embedTableGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.eShape.Clone(), nil
}

func (op *embedTableGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	n, d := len(op.start)-1, op.eShape[1]
	if n < 0 || a[0].Size() != n*d {
		return nil, fmt.Errorf("%v: output gradient %v, expected (%d, %d)", op, a[0].Shape(), n, d)
	}
	de := reuse(&op.dE, a[0].Dtype(), op.eShape)
	if op.groups > 1 {
		dy, ok := a[0].Data().([]float32)
		if !ok || len(op.dEG) != op.groups {
			return nil, errNoGroupDsts(op, op.groups)
		}
		if n%op.groups != 0 {
			return nil, fmt.Errorf("%v: %d rows do not split into %d groups", op, n, op.groups)
		}
		embedTableGrad(op.embedState, dy, op.dEG, d)
		return de, nil
	}
	switch dy := a[0].Data().(type) {
	case []float32:
		op.one32[0] = de.Float32s()
		embedTableGrad(op.embedState, dy, op.one32[:], d)
	case []float64:
		op.one64[0] = de.Float64s()
		embedTableGrad(op.embedState, dy, op.one64[:], d)
	}
	return de, nil
}

// WriteGroupsInto makes the op write each group's table gradient into dsts
// (see GroupedOutput).
func (op *embedTableGradOp) WriteGroupsInto(dsts [][]float32) bool {
	if !groupDsts(dsts, op.groups, op.eShape) || !writeInto(&op.dE, dsts[0], op.eShape) {
		return false
	}
	op.dEG = dsts
	return true
}

// embedTableGrad adds the rows of dy into the table rows they were read from,
// in row order; workers split the columns, so the order of every sum is fixed.
// With groups (len(des) > 1) the rows are that many groups laid end to end,
// each added into its own des[g].
func embedTableGrad[T elem](st *embedState, dy []T, des [][]T, d int) {
	for _, de := range des {
		clear(de)
	}
	n := len(st.start) - 1
	ng := n / len(des)
	parallel(d, st.ws.split(min(d/16, n*d/8192+1)), func(_, lo, hi int) {
		for r := range n {
			de := des[r/ng]
			g := dy[r*d+lo : r*d+hi]
			for k := st.start[r]; k < st.start[r+1]; k++ {
				row := de[int(st.col[k])*d+lo : int(st.col[k])*d+hi]
				if v := T(st.val[k]); v == 1 {
					addTo(row, g)
				} else {
					axpy(row, g, v)
				}
			}
		}
	})
}

// embedDataGradOp computes dx = dy·Eᵀ.
type embedDataGradOp struct {
	backwardOp
	*embedState
	xShape tensor.Shape
}

func (op *embedDataGradOp) Arity() int            { return 2 }
func (op *embedDataGradOp) Type() hm.Type         { return fnType(2, 2, 2) }
func (op *embedDataGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastEmbeddingDataGrad#%d", op.id) }
func (op *embedDataGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *embedDataGradOp) String() string        { return op.name("EmbeddingDataGrad") }
func (op *embedDataGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.xShape.Clone(), nil
}

func (op *embedDataGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	n, v := op.xShape[0], op.xShape[1]
	es := a[0].Shape()
	if len(es) != 2 || es[0] != v || a[1].Size() != n*es[1] {
		return nil, fmt.Errorf("%v: table %v and output gradient %v do not fit input %v", op, es, a[1].Shape(), op.xShape)
	}
	d := es[1]
	dx := reuse(&op.dx, a[0].Dtype(), op.xShape)
	switch e := a[0].Data().(type) {
	case []float32:
		gemm(false, true, n, v, d, a[1].Float32s(), d, e, d, 0, dx.Float32s(), v)
	case []float64:
		gemm(false, true, n, v, d, a[1].Float64s(), d, e, d, 0, dx.Float64s(), v)
	}
	return dx, nil
}
