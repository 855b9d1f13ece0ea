package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A fully connected layer as one op, x of shape (B, in), W (in, out), b (out):
//
//	y  = linearOp(x, W, b)             x·W + b, then max(·, 0) if relu
//	db = linearBackOp(x, W, y, dy)     dz = dy where y > 0 (relu) or dy; keeps dW, dx
//	dW = linearGradOp{W}(db), dx = linearGradOp{x}(db)
//
// with dW = xᵀ·dz, db = the column sums of dz and dx = dz·Wᵀ (only when x
// needs a gradient: not for the graph's input). Gorgonia's version is Mul,
// then a Reshape, Repeat and Add for the bias and a `>=` and a Hadamard
// product for the ReLU, each allocating its output and most running on one
// goroutine; here every buffer is reused and each product is split over the
// workspace's goroutines.
//
// Each product is cut into column blocks fixed by its shape alone
// (linearBlocks): each block is one GEMM call with the same operands whatever
// the number of workers, and a GEMM's element depends only on its row of
// op(A), its column of op(B) and the inner size, so results do not depend on
// the worker count. The bias gradient sums each column over the rows in order.

// linearState is shared by one layer's ops.
type linearState struct {
	id            int64
	ws            *Workspace
	rows, in, out int
	relu, needDX  bool
	groups        int // per-group parameter gradients (Workspace.SetGroups)

	y, dz, dw, db, dx *tensor.Dense
	dwG, dbG          [][]float32 // with groups: each group's dW and db
	// One group's dW and db as the backward pass takes them (slices of
	// these arrays, so that a step allocates nothing for them).
	one32 [2][]float32
	one64 [2][]float64
}

// Linear builds x·W + b for x (B, in), w (in, out) and b (out), followed by a
// ReLU if relu. needDX is false when x needs no gradient (the graph's input).
func Linear(ws *Workspace, x, w, b *G.Node, relu, needDX bool) (*G.Node, error) {
	xs, wsh := x.Shape(), w.Shape()
	if len(xs) != 2 || len(wsh) != 2 {
		return nil, fmt.Errorf("linear: input %v and weights %v, expected (B, in) and (in, out)", xs, wsh)
	}
	st := &linearState{id: nextOpID(), ws: ws, rows: xs[0], in: wsh[0], out: wsh[1], relu: relu, needDX: needDX, groups: ws.Groups()}
	if err := st.check(xs, wsh, b.Shape()); err != nil {
		return nil, err
	}
	if st.rows%st.groups != 0 {
		return nil, fmt.Errorf("%v: %d rows do not split into %d groups", st.name("Linear"), st.rows, st.groups)
	}
	return G.ApplyOp(&linearOp{plainOp{}, st}, x, w, b)
}

func (st *linearState) check(xs, wsh, bs tensor.Shape) error {
	if !xs.Eq(tensor.Shape{st.rows, st.in}) || !wsh.Eq(tensor.Shape{st.in, st.out}) || bs.TotalSize() != st.out {
		return fmt.Errorf("%v: input %v, weights %v, bias %v; expected (%d, %d), (%d, %d), (%d)",
			st.name("Linear"), xs, wsh, bs, st.rows, st.in, st.in, st.out, st.out)
	}
	return nil
}

func (st *linearState) name(kind string) string {
	return fmt.Sprintf("%s(%dx%d->%d,relu=%v)#%d", kind, st.rows, st.in, st.out, st.relu, st.id)
}

// linearBlockCols is the narrowest column block of a product, and
// linearBlockWork the fewest multiply-adds worth a block (a goroutine's start
// and the operands' trip through the cache cost about as much as a few tens
// of thousands of multiply-adds); linearMaxBlocks bounds the blocks, and
// linearMaxBlocksBLAS with an external BLAS (OpenBLAS), which packs both
// operands on every call: there 16 blocks made the mlp step 15% slower than
// 4 (2.35 against 2.05 ms), with gonum's the count made no difference.
const (
	linearBlockCols     = 32 // the AVX-512 kernel's panel width, twice the AVX2 one's
	linearBlockWork     = 1 << 16
	linearMaxBlocks     = 16
	linearMaxBlocksBLAS = 4
	// linearMinElems is the fewest values of an element-wise pass worth a
	// goroutine.
	linearMinElems = 1 << 14
)

// linearBlocks is how many column blocks a product with n columns and
// perCol multiply-adds per column is cut into: a function of the shape only.
func linearBlocks(n, perCol int) int {
	most := linearMaxBlocks
	if externalFloat32() {
		most = linearMaxBlocksBLAS
	}
	return max(1, min(n/linearBlockCols, n*perCol/linearBlockWork, most))
}

// linearBlock is block i of p over n columns: [lo, hi), lo a multiple of
// linearBlockCols (blocks are at least that wide, so none is empty).
func linearBlock(i, p, n int) (lo, hi int) {
	lo = i * n / p &^ (linearBlockCols - 1)
	hi = n
	if i+1 < p {
		hi = (i + 1) * n / p &^ (linearBlockCols - 1)
	}
	return lo, hi
}

// blocks runs f on each of p blocks of [0, n), spread over the workers.
func (st *linearState) blocks(p, n int, f func(lo, hi int)) {
	parallel(p, st.ws.split(p), func(_, b0, b1 int) {
		for i := b0; i < b1; i++ {
			f(linearBlock(i, p, n))
		}
	})
}

type linearOp struct {
	plainOp
	*linearState
}

func (op *linearOp) Arity() int            { return 3 }
func (op *linearOp) Type() hm.Type         { return fnType(2, 2, 2, 1) }
func (op *linearOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastLinear#%d", op.id) }
func (op *linearOp) Hashcode() uint32      { return hashOp(op) }
func (op *linearOp) DiffWRT(int) []bool    { return []bool{op.needDX, true, true} }
func (op *linearOp) String() string        { return op.name("Linear") }

func (op *linearOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	var s [3]tensor.Shape
	for i := range s {
		var ok bool
		if s[i], ok = ds[i].(tensor.Shape); !ok {
			return nil, fmt.Errorf("%v: input %d has no shape: %v", op, i, ds[i])
		}
	}
	if err := op.check(s[0], s[1], s[2]); err != nil {
		return nil, err
	}
	return tensor.Shape{op.rows, op.out}, nil
}

func (op *linearOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape(), a[2].Shape()); err != nil {
		return nil, err
	}
	y := reuse(&op.y, a[0].Dtype(), tensor.Shape{op.rows, op.out})
	switch x := a[0].Data().(type) {
	case []float32:
		linearForward(op.linearState, y.Float32s(), x, a[1].Float32s(), a[2].Float32s())
	case []float64:
		linearForward(op.linearState, y.Float64s(), x, a[1].Float64s(), a[2].Float64s())
	}
	return y, nil
}

// linearForward writes y = x·W + b (ReLU'd if relu), block of columns by
// block: each block's bias and ReLU run while its rows are in the cache.
func linearForward[T elem](st *linearState, y, x, w, b []T) {
	st.blocks(linearBlocks(st.out, st.rows*st.in), st.out, func(lo, hi int) {
		gemm(false, false, st.rows, hi-lo, st.in, x, st.in, w[lo:], st.out, 0, y[lo:], st.out)
		biasRows(y[lo:], st.out, st.rows, b[lo:hi], st.relu)
	})
}

// biasRows adds b to the first len(b) values of each of rows rows of y (row
// stride ld), then applies a ReLU if relu: one loop over a block, the type
// switched once (per-row calls cost as much as the arithmetic).
func biasRows[T elem](y []T, ld, rows int, b []T, relu bool) {
	switch yy := any(y).(type) {
	case []float32:
		bb := any(b).([]float32)
		for r := range rows {
			yr := yy[r*ld:][:len(bb)]
			if relu {
				for j, v := range bb {
					yr[j] = relu32(yr[j] + v)
				}
			} else {
				for j, v := range bb {
					yr[j] += v
				}
			}
		}
	case []float64:
		bb := any(b).([]float64)
		for r := range rows {
			yr := yy[r*ld:][:len(bb)]
			if relu {
				for j, v := range bb {
					yr[j] = relu64(yr[j] + v)
				}
			} else {
				for j, v := range bb {
					yr[j] += v
				}
			}
		}
	}
}

func (op *linearOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	// The output is an input of the backward op so that the ReLU mask is read
	// before anything could overwrite it, and the op runs after the forward one.
	db, err := G.ApplyOp(&linearBackOp{backwardOp{}, op.linearState}, inputs[0], inputs[1], output, grad)
	if err != nil {
		return nil, err
	}
	var dx *G.Node
	if op.needDX {
		if dx, err = G.ApplyOp(&linearGradOp{backwardOp{}, op.linearState, 0}, db); err != nil {
			return nil, err
		}
	}
	dw, err := G.ApplyOp(&linearGradOp{backwardOp{}, op.linearState, 1}, db)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw, db}, nil
}

// linearBackOp computes all of the layer's gradients and returns the bias
// gradient; it leaves dW and dx in the state for linearGradOp.
type linearBackOp struct {
	backwardOp
	*linearState
}

func (op *linearBackOp) Arity() int            { return 4 }
func (op *linearBackOp) Type() hm.Type         { return fnType(1, 2, 2, 2, 2) }
func (op *linearBackOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastLinearBack#%d", op.id) }
func (op *linearBackOp) Hashcode() uint32      { return hashOp(op) }
func (op *linearBackOp) String() string        { return op.name("LinearBack") }
func (op *linearBackOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.out}, nil
}

// WriteInto makes the op write the bias gradient into backing (see OutputInto).
func (op *linearBackOp) WriteInto(backing any) bool {
	return op.groups < 2 && writeInto(&op.db, backing, tensor.Shape{op.out})
}

// WriteGroupsInto makes the op write each group's bias gradient into dsts
// (see GroupedOutput).
func (op *linearBackOp) WriteGroupsInto(dsts [][]float32) bool {
	if !groupDsts(dsts, op.groups, tensor.Shape{op.out}) || !writeInto(&op.db, dsts[0], tensor.Shape{op.out}) {
		return false
	}
	op.dbG = dsts
	return true
}

func (op *linearBackOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape(), tensor.Shape{op.out}); err != nil {
		return nil, err
	}
	for i, what := range [...]string{2: "output", 3: "output gradient"} {
		if i >= 2 && a[i].Size() != op.rows*op.out {
			return nil, fmt.Errorf("%v: %s %v, expected (%d, %d)", op, what, a[i].Shape(), op.rows, op.out)
		}
	}
	dt := a[0].Dtype()
	var dx *tensor.Dense
	if op.needDX {
		dx = reuse(&op.dx, dt, tensor.Shape{op.rows, op.in})
	}
	dw := reuse(&op.dw, dt, tensor.Shape{op.in, op.out})
	db := reuse(&op.db, dt, tensor.Shape{op.out})
	dz := a[3]
	if op.relu {
		dz = reuse(&op.dz, dt, tensor.Shape{op.rows, op.out})
	}
	if op.groups > 1 {
		x, ok := a[0].Data().([]float32)
		if !ok || len(op.dwG) != op.groups || len(op.dbG) != op.groups {
			return nil, errNoGroupDsts(op, op.groups)
		}
		var dxs []float32
		if dx != nil {
			dxs = dx.Float32s()
		}
		linearBackward(op.linearState, x, a[1].Float32s(), a[2].Float32s(), a[3].Float32s(), dz.Float32s(), op.dwG, op.dbG, dxs)
		return db, nil
	}
	switch x := a[0].Data().(type) {
	case []float32:
		var dxs []float32
		if dx != nil {
			dxs = dx.Float32s()
		}
		op.one32 = [2][]float32{dw.Float32s(), db.Float32s()}
		linearBackward(op.linearState, x, a[1].Float32s(), a[2].Float32s(), a[3].Float32s(), dz.Float32s(), op.one32[:1], op.one32[1:], dxs)
	case []float64:
		var dxs []float64
		if dx != nil {
			dxs = dx.Float64s()
		}
		op.one64 = [2][]float64{dw.Float64s(), db.Float64s()}
		linearBackward(op.linearState, x, a[1].Float64s(), a[2].Float64s(), a[3].Float64s(), dz.Float64s(), op.one64[:1], op.one64[1:], dxs)
	}
	return db, nil
}

// linearBackward computes dz (dy masked by the ReLU; dz is dy without one)
// and db, then dW = xᵀ·dz block of W's columns by block, then dx = dz·Wᵀ
// block of x's columns by block (dx nil: not needed). With groups (len(dws)
// > 1) the rows are len(dws) groups laid end to end, and group g's dW and db
// (its rows' sums, as if it were the whole batch) go to dws[g] and dbs[g].
//
// dz and db are computed over wide ranges of columns, one per worker (each
// column's sum runs over the rows in order whatever the range): over the
// GEMMs' narrow blocks, reading dy and y a few cache lines per row at a
// stride of a whole row defeated the hardware prefetcher, and the pass took
// several times as long at batch 256.
func linearBackward[T elem](st *linearState, x, w, y, dy, dz []T, dws, dbs [][]T, dx []T) {
	rg := st.rows / len(dws)
	parallel(st.out, st.ws.split(st.rows*st.out/linearMinElems+1), func(_, lo, hi int) {
		for g, db := range dbs {
			o := g*rg*st.out + lo
			maskSums(dz[o:], dy[o:], y[o:], st.out, rg, db[lo:hi], st.relu)
		}
	})
	st.blocks(linearBlocks(st.out, st.rows*st.in), st.out, func(lo, hi int) {
		for g, dw := range dws {
			gemm(true, false, st.in, hi-lo, rg, x[g*rg*st.in:], st.in, dz[g*rg*st.out+lo:], st.out, 0, dw[lo:], st.out)
		}
	})
	if dx == nil {
		return
	}
	st.blocks(linearBlocks(st.in, st.rows*st.out), st.in, func(lo, hi int) {
		gemm(false, true, st.rows, hi-lo, st.out, dz, st.out, w[lo*st.out:], st.out, 0, dx[lo:], st.in)
	})
}

// maskSums writes, for len(db) columns of rows rows (row stride ld), dz = dy
// where y > 0 if relu (dz is dy otherwise, and only read) and db = the sums
// of dz's columns, each over the rows in order.
func maskSums[T elem](dz, dy, y []T, ld, rows int, db []T, relu bool) {
	clear(db)
	switch d := any(db).(type) {
	case []float32:
		zz, gg, yy := any(dz).([]float32), any(dy).([]float32), any(y).([]float32)
		for r := range rows {
			zr := zz[r*ld:][:len(d)]
			if relu {
				gr, yr := gg[r*ld:][:len(d)], yy[r*ld:][:len(d)]
				for j := range d {
					v := pass32(gr[j], yr[j])
					zr[j] = v
					d[j] += v
				}
			} else {
				for j, v := range zr {
					d[j] += v
				}
			}
		}
	case []float64:
		zz, gg, yy := any(dz).([]float64), any(dy).([]float64), any(y).([]float64)
		for r := range rows {
			zr := zz[r*ld:][:len(d)]
			if relu {
				gr, yr := gg[r*ld:][:len(d)], yy[r*ld:][:len(d)]
				for j := range d {
					v := pass64(gr[j], yr[j])
					zr[j] = v
					d[j] += v
				}
			} else {
				for j, v := range zr {
					d[j] += v
				}
			}
		}
	}
}

// linearGradOp hands out one gradient that linearBackOp left in the state:
// of x (0) or W (1). Its input, the bias gradient, orders it after the
// backward op.
type linearGradOp struct {
	backwardOp
	*linearState
	which int
}

var linearGradNames = [2]string{"X", "W"}

func (op *linearGradOp) Arity() int    { return 1 }
func (op *linearGradOp) Type() hm.Type { return fnType(2, 1) }
func (op *linearGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "fastLinearGrad%s#%d", linearGradNames[op.which], op.id)
}
func (op *linearGradOp) Hashcode() uint32 { return hashOp(op) }
func (op *linearGradOp) String() string   { return op.name("LinearGrad" + linearGradNames[op.which]) }

func (op *linearGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.which == 0 {
		return tensor.Shape{op.rows, op.in}, nil
	}
	return tensor.Shape{op.in, op.out}, nil
}

// WriteInto makes the weight gradient's op write into backing (see
// OutputInto); the input gradient's op refuses.
func (op *linearGradOp) WriteInto(backing any) bool {
	if op.which != 1 || op.groups > 1 {
		return false
	}
	return writeInto(&op.dw, backing, tensor.Shape{op.in, op.out})
}

// WriteGroupsInto makes the weight gradient's op write each group's into
// dsts (see GroupedOutput); the input gradient's op refuses.
func (op *linearGradOp) WriteGroupsInto(dsts [][]float32) bool {
	shape := tensor.Shape{op.in, op.out}
	if op.which != 1 || !groupDsts(dsts, op.groups, shape) || !writeInto(&op.dw, dsts[0], shape) {
		return false
	}
	op.dwG = dsts
	return true
}

func (op *linearGradOp) Do(vals ...G.Value) (G.Value, error) {
	if len(vals) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, expected 1", op, len(vals))
	}
	p := [2]**tensor.Dense{&op.dx, &op.dw}[op.which]
	if *p == nil {
		return nil, fmt.Errorf("%v: gradient not computed", op)
	}
	// A Reshape downstream may have reshaped the tensor in place last step.
	shape, _ := op.InferShape()
	return reuse(p, (*p).Dtype(), shape), nil
}
