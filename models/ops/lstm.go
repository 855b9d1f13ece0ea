package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A whole LSTM layer as one op over the sequence, x of shape (B, T, in):
//
//	y    = lstmOp(x, Wx, Wh, b)                 every step's h (B, T, H), or the last one (B, H)
//	db   = lstmBackOp(x, Wx, Wh, y, dy)          backpropagation through time; keeps dx, dWx, dWh
//	dx   = lstmGradOp{x}(db), dWx = lstmGradOp{Wx}(db), dWh = lstmGradOp{Wh}(db)
//
// Forward: one GEMM x·Wx for all steps, then per step one GEMM h·Wh for the
// four gates at once and a fused pass for the activations and the cell. The
// activated gates, the cells and tanh of the cells stay in the shared state;
// the backward op overwrites the gates with the gradients of their
// pre-activations (dA), from which dx = dA·Wxᵀ, dWx = xᵀ·dA, dWh = Σ h_{t-1}ᵀ·dA_t
// and db = Σ dA are GEMMs and sums over all steps at once.
//
// The batch is cut into lstmChunks(B) chunks of sequences, fixed by B alone.
// Each chunk runs its recurrence on its own (the sequences are independent),
// so workers take whole chunks with no synchronisation per step, and every
// GEMM has the same operands whatever the worker count: results do not depend
// on the number of workers. The weight gradients are summed per chunk, then over the
// chunks in order.

// LSTMMaxChunks bounds the chunks the batch is cut into: enough to keep a few
// workers busy, few enough that the per-step GEMMs keep several rows each.
const LSTMMaxChunks = 4

func lstmChunks(batch int) int { return max(1, min(batch, LSTMMaxChunks)) }

// lstmDims are one layer's sizes.
type lstmDims struct{ b, t, in, h int }

// chunk is the range [b0, b1) of the sequences of chunk ch; their rows (row
// b*T+t for step t of sequence b) are [b0*T, b1*T).
func (d lstmDims) chunk(ch, chunks int) (b0, b1 int) {
	return ch * d.b / chunks, (ch + 1) * d.b / chunks
}

// lstmState is shared by one LSTM layer's ops.
type lstmState struct {
	id     int64
	dims   lstmDims
	last   bool // the output is the last step's h only
	needDX bool // false when x needs no gradient (the graph's input)
	ws     *Workspace

	gates *tensor.Dense // (B, T, 4H): activated i, f, g, o; then dA in backward
	cells *tensor.Dense // (B, T, H)
	tanhc *tensor.Dense // (B, T, H): tanh of the cells
	hs    *tensor.Dense // (B, T, H): the output when !last
	y     *tensor.Dense // (B, H): the output when last

	dx, dwx, dwh, db *tensor.Dense
	// Per-group weight gradients (Workspace.SetGroups): groups of B/groups
	// sequences, each group's dWx, dWh and db into its own slices.
	groups          int
	dwxG, dwhG, dbG [][]float32
}

// LSTM builds the fused LSTM of x (B, T, in) with weights wx (in, 4H),
// wh (H, 4H) and bias (4H). It returns every step's hidden state (B, T, H), or
// only the last one (B, H) if last. needDX is false when x is an input that
// needs no gradient.
func LSTM(ws *Workspace, x, wx, wh, bias *G.Node, last, needDX bool) (*G.Node, error) {
	xs, hs := x.Shape(), wh.Shape()
	if len(xs) != 3 || len(hs) != 2 {
		return nil, fmt.Errorf("lstm: input %v, expected (B, T, in)", xs)
	}
	d := lstmDims{b: xs[0], t: xs[1], in: xs[2], h: hs[0]}
	st := &lstmState{id: nextOpID(), dims: d, last: last, needDX: needDX, ws: ws, groups: ws.Groups()}
	if err := st.check(xs, wx.Shape(), hs, bias.Shape()); err != nil {
		return nil, err
	}
	if d.b%st.groups != 0 {
		return nil, fmt.Errorf("%v: %d sequences do not split into %d groups", st.name("LSTM"), d.b, st.groups)
	}
	return G.ApplyOp(&lstmOp{plainOp{}, st}, x, wx, wh, bias)
}

func (st *lstmState) check(xs, wxs, whs, bs tensor.Shape) error {
	d := st.dims
	if !xs.Eq(tensor.Shape{d.b, d.t, d.in}) || !wxs.Eq(tensor.Shape{d.in, 4 * d.h}) ||
		!whs.Eq(tensor.Shape{d.h, 4 * d.h}) || bs.TotalSize() != 4*d.h {
		return fmt.Errorf("%v: input %v, Wx %v, Wh %v, bias %v; expected (%d, %d, %d), (%d, %d), (%d, %d), (%d)",
			st.name("LSTM"), xs, wxs, whs, bs, d.b, d.t, d.in, d.in, 4*d.h, d.h, 4*d.h, 4*d.h)
	}
	return nil
}

func (st *lstmState) outShape() tensor.Shape {
	if st.last {
		return tensor.Shape{st.dims.b, st.dims.h}
	}
	return tensor.Shape{st.dims.b, st.dims.t, st.dims.h}
}

func (st *lstmState) name(kind string) string {
	d := st.dims
	return fmt.Sprintf("%s(%dx%dx%d->%d,last=%v)#%d", kind, d.b, d.t, d.in, d.h, st.last, st.id)
}

type lstmOp struct {
	plainOp
	*lstmState
}

func (op *lstmOp) Arity() int            { return 4 }
func (op *lstmOp) Type() hm.Type         { return fnType(len(op.outShape()), 3, 2, 2, 1) }
func (op *lstmOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastLSTM#%d", op.id) }
func (op *lstmOp) Hashcode() uint32      { return hashOp(op) }
func (op *lstmOp) DiffWRT(int) []bool    { return []bool{op.needDX, true, true, true} }
func (op *lstmOp) String() string        { return op.name("LSTM") }

func (op *lstmOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	var s [4]tensor.Shape
	for i := range s {
		var ok bool
		if s[i], ok = ds[i].(tensor.Shape); !ok {
			return nil, fmt.Errorf("%v: input %d has no shape: %v", op, i, ds[i])
		}
	}
	if err := op.check(s[0], s[1], s[2], s[3]); err != nil {
		return nil, err
	}
	return op.outShape(), nil
}

func (op *lstmOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape(), a[2].Shape(), a[3].Shape()); err != nil {
		return nil, err
	}
	d, dt := op.dims, a[0].Dtype()
	gates := reuse(&op.gates, dt, tensor.Shape{d.b, d.t, 4 * d.h})
	cells := reuse(&op.cells, dt, tensor.Shape{d.b, d.t, d.h})
	tanhc := reuse(&op.tanhc, dt, tensor.Shape{d.b, d.t, d.h})
	hs := reuse(&op.hs, dt, tensor.Shape{d.b, d.t, d.h})
	out := hs
	if op.last {
		out = reuse(&op.y, dt, tensor.Shape{d.b, d.h})
	}
	switch x := a[0].Data().(type) {
	case []float32:
		lstmForward(op.ws, d, x, a[1].Float32s(), a[2].Float32s(), a[3].Float32s(),
			gates.Float32s(), cells.Float32s(), tanhc.Float32s(), hs.Float32s())
		if op.last {
			lastSteps(d, hs.Float32s(), out.Float32s())
		}
	case []float64:
		lstmForward(op.ws, d, x, a[1].Float64s(), a[2].Float64s(), a[3].Float64s(),
			gates.Float64s(), cells.Float64s(), tanhc.Float64s(), hs.Float64s())
		if op.last {
			lastSteps(d, hs.Float64s(), out.Float64s())
		}
	}
	return out, nil
}

// lastSteps copies the last step's row of every sequence of hs into y.
func lastSteps[T elem](d lstmDims, hs, y []T) {
	for b := range d.b {
		copy(y[b*d.h:][:d.h], hs[(b*d.t+d.t-1)*d.h:][:d.h])
	}
}

func lstmForward[T elem](ws *Workspace, d lstmDims, x, wx, wh, bias, gates, cells, tanhc, hs []T) {
	chunks := lstmChunks(d.b)
	g4 := 4 * d.h
	// On gonum's GEMM, x·Wx and h·Wh are products with the transposed
	// weights (rows of x times rows of Wxᵀ), which it runs as dot products:
	// 1.4-2x faster on these shapes than its untransposed kernel, which runs
	// as short axpys.
	wxOp, whOp, ldx, ldh := wx, wh, g4, g4
	if nativeGEMM {
		wt := scratch[T](ws, g4*(d.in+d.h))
		wxOp, whOp, ldx, ldh = wt[:g4*d.in], wt[g4*d.in:], d.in, d.h
		transposeTo(wxOp, d.in, wx, g4, d.in, g4)
		transposeTo(whOp, d.h, wh, g4, d.h, g4)
	}
	parallel(chunks, ws.split(chunks), func(_, lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			b0, b1 := d.chunk(ch, chunks)
			r0, nb := b0*d.t, b1-b0
			// The input's contribution to every step of the chunk at once.
			gemm(false, nativeGEMM, nb*d.t, g4, d.in, x[r0*d.in:], d.in, wxOp, ldx, 0, gates[r0*g4:], g4)
			for t := range d.t {
				if t > 0 { // h_{t-1}·Wh for the chunk's rows of step t (h_{-1} = 0)
					gemm(false, nativeGEMM, nb, g4, d.h, hs[(r0+t-1)*d.h:], d.t*d.h, whOp, ldh, 1, gates[(r0+t)*g4:], d.t*g4)
				}
				for b := b0; b < b1; b++ {
					r := b*d.t + t
					var cp []T
					if t > 0 {
						cp = cells[(r-1)*d.h:][:d.h]
					}
					lstmCell(gates[r*g4:][:g4], bias, cp, cells[r*d.h:][:d.h], tanhc[r*d.h:][:d.h], hs[r*d.h:][:d.h])
				}
			}
		}
	})
}

// transposeTo writes the transpose of the rows×cols matrix src (row stride
// lds) into dst (row stride ldd). It fills dst four rows at a time along
// tiles of src's rows, reading four adjacent values of each: walking src row
// by row instead writes 32 or more dst rows a power-of-two stride apart, which
// share a few cache sets and evict each other (5-8 ns per value against 0.6).
func transposeTo[T elem](dst []T, ldd int, src []T, lds int, rows, cols int) {
	const tile = 32
	for j0 := 0; j0 < cols; j0 += tile {
		j1 := min(j0+tile, cols)
		for i0 := 0; i0 < rows; i0 += tile {
			i1 := min(i0+tile, rows)
			j := j0
			for ; j+4 <= j1; j += 4 {
				d0 := dst[j*ldd+i0 : j*ldd+i1]
				d1 := dst[(j+1)*ldd+i0:][:len(d0)]
				d2 := dst[(j+2)*ldd+i0:][:len(d0)]
				d3 := dst[(j+3)*ldd+i0:][:len(d0)]
				for k := range d0 {
					v := src[(i0+k)*lds+j:][:4]
					d0[k], d1[k], d2[k], d3[k] = v[0], v[1], v[2], v[3]
				}
			}
			for ; j < j1; j++ {
				d := dst[j*ldd+i0 : j*ldd+i1]
				for k := range d {
					d[k] = src[(i0+k)*lds+j]
				}
			}
		}
	}
}

// lstmCell turns one row of pre-activations a (bias not yet added) into the
// activated gates, in place, and writes the cell c, tanh(c) and h; cp is the
// previous cell, nil at the first step (c = 0 before it, so the forget gate
// has nothing to act on and is stored as 0, which zeroes its gradient).
func lstmCell[T elem](a, bias, cp, c, tc, h []T) {
	switch aa := any(a).(type) {
	case []float32:
		lstmCell32(aa, any(bias).([]float32), any(cp).([]float32), any(c).([]float32), any(tc).([]float32), any(h).([]float32))
	case []float64:
		lstmCell64(aa, any(bias).([]float64), any(cp).([]float64), any(c).([]float64), any(tc).([]float64), any(h).([]float64))
	}
}

func lstmCell64(a, bias, cp, c, tc, h []float64) {
	n := len(c)
	ai, af, ag, ao := a[:n], a[n:2*n], a[2*n:3*n], a[3*n:4*n]
	bi, bf, bg, bo := bias[:n], bias[n:2*n], bias[2*n:3*n], bias[3*n:4*n]
	tc, h = tc[:n], h[:n]
	for j := range c {
		i := sigmoid64(ai[j] + bi[j])
		g := math.Tanh(ag[j] + bg[j])
		o := sigmoid64(ao[j] + bo[j])
		v := i * g
		f := 0.0
		if cp != nil {
			f = sigmoid64(af[j] + bf[j])
			v += f * cp[j]
		}
		ai[j], af[j], ag[j], ao[j] = i, f, g, o
		t := math.Tanh(v)
		c[j], tc[j], h[j] = v, t, o*t
	}
}

func lstmCell32(a, bias, cp, c, tc, h []float32) {
	n := len(c)
	ai, af, ag, ao := a[:n], a[n:2*n], a[2*n:3*n], a[3*n:4*n]
	bi, bf, bg, bo := bias[:n], bias[n:2*n], bias[2*n:3*n], bias[3*n:4*n]
	tc, h = tc[:n], h[:n]
	for j := range c {
		i := sigmoid32(ai[j] + bi[j])
		g := tanh32(ag[j] + bg[j])
		o := sigmoid32(ao[j] + bo[j])
		v := i * g
		var f float32
		if cp != nil {
			f = sigmoid32(af[j] + bf[j])
			v += f * cp[j]
		}
		ai[j], af[j], ag[j], ao[j] = i, f, g, o
		t := tanh32(v)
		c[j], tc[j], h[j] = v, t, o*t
	}
}

func sigmoid64(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

func sigmoid32(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) }

func tanh32(v float32) float32 { return float32(math.Tanh(float64(v))) }

func (op *lstmOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	x, wx, wh := inputs[0], inputs[1], inputs[2]
	// The output is an input of the backward op so that no in-place op
	// overwrites it before: with !last it is the hidden states the op reads.
	db, err := G.ApplyOp(&lstmBackOp{backwardOp{}, op.lstmState}, x, wx, wh, output, grad)
	if err != nil {
		return nil, err
	}
	var dx *G.Node
	if op.needDX {
		if dx, err = G.ApplyOp(&lstmGradOp{backwardOp{}, op.lstmState, 0}, db); err != nil {
			return nil, err
		}
	}
	dwx, err := G.ApplyOp(&lstmGradOp{backwardOp{}, op.lstmState, 1}, db)
	if err != nil {
		return nil, err
	}
	dwh, err := G.ApplyOp(&lstmGradOp{backwardOp{}, op.lstmState, 2}, db)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dwx, dwh, db}, nil
}

// lstmBackOp runs backpropagation through time for the whole layer and
// returns the bias gradient; it leaves dx, dWx and dWh in the state for
// lstmGradOp.
type lstmBackOp struct {
	backwardOp
	*lstmState
}

func (op *lstmBackOp) Arity() int { return 5 }
func (op *lstmBackOp) Type() hm.Type {
	o := len(op.outShape())
	return fnType(1, 3, 2, 2, o, o)
}
func (op *lstmBackOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastLSTMBack#%d", op.id) }
func (op *lstmBackOp) Hashcode() uint32      { return hashOp(op) }
func (op *lstmBackOp) String() string        { return op.name("LSTMBack") }
func (op *lstmBackOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{4 * op.dims.h}, nil
}

func (op *lstmBackOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape(), a[2].Shape(), tensor.Shape{4 * op.dims.h}); err != nil {
		return nil, err
	}
	if want := op.outShape(); a[4].Size() != want.TotalSize() {
		return nil, fmt.Errorf("%v: output gradient %v, expected %v", op, a[4].Shape(), want)
	}
	d, dt := op.dims, a[0].Dtype()
	if op.gates == nil || op.gates.Dtype() != dt {
		return nil, fmt.Errorf("%v: backward pass before the forward pass", op)
	}
	var dx *tensor.Dense
	if op.needDX {
		dx = reuse(&op.dx, dt, tensor.Shape{d.b, d.t, d.in})
	}
	dwx := reuse(&op.dwx, dt, tensor.Shape{d.in, 4 * d.h})
	dwh := reuse(&op.dwh, dt, tensor.Shape{d.h, 4 * d.h})
	db := reuse(&op.db, dt, tensor.Shape{4 * d.h})
	if op.groups > 1 {
		x, ok := a[0].Data().([]float32)
		if !ok || len(op.dwxG) != op.groups || len(op.dwhG) != op.groups || len(op.dbG) != op.groups {
			return nil, errNoGroupDsts(op, op.groups)
		}
		var dxs []float32
		if dx != nil {
			dxs = dx.Float32s()
		}
		lstmBackward(op.lstmState, x, a[1].Float32s(), a[2].Float32s(), a[4].Float32s(),
			op.gates.Float32s(), op.cells.Float32s(), op.tanhc.Float32s(), op.hs.Float32s(),
			dxs, lstmGroupGrads[float32]{op.dwxG, op.dwhG, op.dbG})
		return db, nil
	}
	switch x := a[0].Data().(type) {
	case []float32:
		var dxs []float32
		if dx != nil {
			dxs = dx.Float32s()
		}
		lstmBackward(op.lstmState, x, a[1].Float32s(), a[2].Float32s(), a[4].Float32s(),
			op.gates.Float32s(), op.cells.Float32s(), op.tanhc.Float32s(), op.hs.Float32s(),
			dxs, lstmGroupGrads[float32]{[][]float32{dwx.Float32s()}, [][]float32{dwh.Float32s()}, [][]float32{db.Float32s()}})
	case []float64:
		var dxs []float64
		if dx != nil {
			dxs = dx.Float64s()
		}
		lstmBackward(op.lstmState, x, a[1].Float64s(), a[2].Float64s(), a[4].Float64s(),
			op.gates.Float64s(), op.cells.Float64s(), op.tanhc.Float64s(), op.hs.Float64s(),
			dxs, lstmGroupGrads[float64]{[][]float64{dwx.Float64s()}, [][]float64{dwh.Float64s()}, [][]float64{db.Float64s()}})
	}
	return db, nil
}

// WriteGroupsInto makes the op write each group's bias gradient into dsts
// (see GroupedOutput).
func (op *lstmBackOp) WriteGroupsInto(dsts [][]float32) bool {
	shape := tensor.Shape{4 * op.dims.h}
	if !groupDsts(dsts, op.groups, shape) || !writeInto(&op.db, dsts[0], shape) {
		return false
	}
	op.dbG = dsts
	return true
}

// lstmGroupGrads are where the weight and bias gradients go: one slice per
// group of sequences (one group without Workspace.SetGroups).
type lstmGroupGrads[T elem] struct{ wx, wh, b [][]T }

// lstmBackward computes dA chunk by chunk, backwards in time, then each
// chunk's dx rows and its parts of dWx, dWh and db; the parts are summed over
// the chunks in order, per group of sequences (no chunk spans two groups).
// dx is nil when not needed.
func lstmBackward[T elem](st *lstmState, x, wx, wh, dy, gates, cells, tanhc, hs, dx []T, out lstmGroupGrads[T]) {
	d := st.dims
	k := len(out.wx)
	// One group: lstmChunks(B) chunks, as the forward pass cuts the batch.
	ng, cg := d.b/k, min(max(1, LSTMMaxChunks/k), d.b/k)
	chunks := k * cg
	nw := st.ws.split(chunks)
	g4 := 4 * d.h
	nwx, nwh := d.in*g4, d.h*g4
	nb := (ng + cg - 1) / cg // the largest chunk
	// The chunks' parts of dWx, of dWh and of db, each chunk after chunk as
	// sumParts reads them; each chunk's carried dh and dc; on gonum's GEMM,
	// each worker's transposed operands of the weight gradients.
	trans := 0
	if nativeGEMM {
		// Rounded to 64 bytes: gonum's dot product sums in an order that
		// depends on its operand's alignment, so a chunk's buffers must sit
		// at the same alignment whichever worker takes it.
		trans = ((g4+d.in+d.h)*nb*d.t + 15) &^ 15
	}
	buf := scratch[T](st.ws, chunks*(nwx+nwh+g4+2*nb*d.h)+nw*trans)
	pwx, buf := buf[:chunks*nwx], buf[chunks*nwx:]
	pwh, buf := buf[:chunks*nwh], buf[chunks*nwh:]
	pb, buf := buf[:chunks*g4], buf[chunks*g4:]
	carry, tbuf := buf[:chunks*2*nb*d.h], buf[chunks*2*nb*d.h:]
	parallel(chunks, nw, func(wk, lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			b0, b1 := chunkSpan(ch, ng, cg)
			c := carry[ch*2*nb*d.h:][:2*nb*d.h]
			lstmBackwardChunk(st, b0, b1, x, wx, wh, dy, gates, cells, tanhc, hs, dx, c[:nb*d.h], c[nb*d.h:])
			pw := lstmParts[T]{pwx[ch*nwx:][:nwx], pwh[ch*nwh:][:nwh], pb[ch*g4:][:g4]}
			lstmWeightGrads(d, b0, b1, x, gates, hs, pw, tbuf[wk*trans:][:trans])
		}
	})
	for gi := range k {
		sumParts(st.ws, out.wx[gi], pwx[gi*cg*nwx:], cg)
		sumParts(st.ws, out.wh[gi], pwh[gi*cg*nwh:], cg)
		sumParts(st.ws, out.b[gi], pb[gi*cg*g4:], cg)
	}
}

// lstmParts are one chunk's parts of the weight and bias gradients.
type lstmParts[T elem] struct{ wx, wh, b []T }

func lstmBackwardChunk[T elem](st *lstmState, b0, b1 int, x, wx, wh, dy, gates, cells, tanhc, hs, dx, dh, dc []T) {
	d := st.dims
	g4 := 4 * d.h
	r0, nb := b0*d.t, b1-b0
	dh, dc = dh[:nb*d.h], dc[:nb*d.h]
	clear(dh)
	clear(dc)
	for t := d.t - 1; t >= 0; t-- {
		for b := b0; b < b1; b++ {
			r, k := b*d.t+t, b-b0
			dhv := dh[k*d.h:][:d.h]
			switch {
			case !st.last:
				addTo(dhv, dy[r*d.h:][:d.h])
			case t == d.t-1:
				addTo(dhv, dy[b*d.h:][:d.h])
			}
			var cp []T
			if t > 0 {
				cp = cells[(r-1)*d.h:][:d.h]
			}
			lstmCellGrad(gates[r*g4:][:g4], cp, tanhc[r*d.h:][:d.h], dhv, dc[k*d.h:][:d.h])
		}
		if t > 0 { // dh_{t-1} = dA_t·Whᵀ
			gemm(false, true, nb, d.h, g4, gates[(r0+t)*g4:], d.t*g4, wh, g4, 0, dh, d.h)
		}
	}
	if dx != nil {
		gemm(false, true, nb*d.t, d.in, g4, gates[r0*g4:], g4, wx, g4, 0, dx[r0*d.in:], d.in)
	}
}

// lstmWeightGrads computes one chunk's parts of dWx = xᵀ·dA, dWh = Σ_t
// h_{t-1}ᵀ·dA_t and db = Σ dA, dA being the chunk's rows of gates. On gonum's
// GEMM it first transposes x, the previous hidden states and dA into tb, so
// that the products run as dot products (see lstmForward).
func lstmWeightGrads[T elem](d lstmDims, b0, b1 int, x, gates, hs []T, p lstmParts[T], tb []T) {
	g4 := 4 * d.h
	r0, rows := b0*d.t, (b1-b0)*d.t
	dA := gates[r0*g4:][:rows*g4]
	if nativeGEMM {
		dAT, xT, hT := tb[:g4*rows], tb[g4*rows:][:d.in*rows], tb[(g4+d.in)*rows:][:d.h*rows]
		transposeTo(dAT, rows, dA, g4, rows, g4)
		transposeTo(xT, rows, x[r0*d.in:], d.in, rows, d.in)
		// Column r of hT is h_{t-1} for row r = (b, t): row r-1 of hs, and 0
		// at each sequence's first step.
		transposeTo(hT[1:], rows, hs[r0*d.h:], d.h, rows-1, d.h)
		for r := 0; r < rows; r += d.t {
			for i := range d.h {
				hT[i*rows+r] = 0
			}
		}
		gemm(false, true, d.in, g4, rows, xT, rows, dAT, rows, 0, p.wx, g4)
		gemm(false, true, d.h, g4, rows, hT, rows, dAT, rows, 0, p.wh, g4)
	} else {
		gemm(true, false, d.in, g4, rows, x[r0*d.in:], d.in, dA, g4, 0, p.wx, g4)
		if d.t == 1 {
			clear(p.wh)
		}
		for b := b0; b < b1 && d.t > 1; b++ { // over steps 1..T-1 of each sequence
			beta := T(1)
			if b == b0 {
				beta = 0
			}
			gemm(true, false, d.h, g4, d.t-1, hs[b*d.t*d.h:], d.h, gates[(b*d.t+1)*g4:], g4, beta, p.wh, g4)
		}
	}
	copy(p.b, dA[:g4])
	for r := 1; r < rows; r++ {
		addTo(p.b, dA[r*g4:][:g4])
	}
}

// lstmCellGrad turns one row of activated gates a into the gradients of
// their pre-activations, in place, given dh (the gradient of h at this step,
// from the output and the next step) and dc (the gradient of this step's cell
// from the next step, dc_{t+1}·f_{t+1}), which it replaces with dc·f for the
// previous step. cp is the previous cell, nil at the first step.
func lstmCellGrad[T elem](a, cp, tc, dh, dc []T) {
	n := len(dc)
	ai, af, ag, ao := a[:n], a[n:2*n], a[2*n:3*n], a[3*n:4*n]
	tc, dh = tc[:n], dh[:n]
	for j := range dc {
		i, f, g, o, t := ai[j], af[j], ag[j], ao[j], tc[j]
		dcv := dc[j] + dh[j]*o*(1-t*t)
		var df T
		if cp != nil {
			df = dcv * cp[j]
		}
		ai[j] = dcv * g * i * (1 - i)
		af[j] = df * f * (1 - f)
		ag[j] = dcv * i * (1 - g*g)
		ao[j] = dh[j] * t * o * (1 - o)
		dc[j] = dcv * f
	}
}

// lstmGradOp hands out one gradient that lstmBackOp left in the state: of x
// (0), Wx (1) or Wh (2). Its input, the bias gradient, orders it after the
// backward op.
type lstmGradOp struct {
	backwardOp
	*lstmState
	which int
}

var lstmGradNames = [3]string{"X", "Wx", "Wh"}

func (op *lstmGradOp) Arity() int { return 1 }
func (op *lstmGradOp) Type() hm.Type {
	if op.which == 0 {
		return fnType(3, 1)
	}
	return fnType(2, 1)
}
func (op *lstmGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "fastLSTMGrad%s#%d", lstmGradNames[op.which], op.id)
}
func (op *lstmGradOp) Hashcode() uint32 { return hashOp(op) }
func (op *lstmGradOp) String() string   { return op.name("LSTMGrad" + lstmGradNames[op.which]) }

func (op *lstmGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	d := op.dims
	switch op.which {
	case 0:
		return tensor.Shape{d.b, d.t, d.in}, nil
	case 1:
		return tensor.Shape{d.in, 4 * d.h}, nil
	}
	return tensor.Shape{d.h, 4 * d.h}, nil
}

func (op *lstmGradOp) Do(vals ...G.Value) (G.Value, error) {
	if len(vals) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, expected 1", op, len(vals))
	}
	p := [3]**tensor.Dense{&op.dx, &op.dwx, &op.dwh}[op.which]
	if *p == nil {
		return nil, fmt.Errorf("%v: gradient not computed", op)
	}
	// A Reshape downstream may have reshaped the tensor in place last step.
	shape, _ := op.InferShape()
	return reuse(p, (*p).Dtype(), shape), nil
}

// WriteGroupsInto makes a weight gradient's op write each group's into dsts
// (see GroupedOutput); the input gradient's op refuses.
func (op *lstmGradOp) WriteGroupsInto(dsts [][]float32) bool {
	if op.which == 0 {
		return false
	}
	shape, _ := op.InferShape()
	p, g := &op.dwx, &op.dwxG
	if op.which == 2 {
		p, g = &op.dwh, &op.dwhG
	}
	if !groupDsts(dsts, op.groups, shape) || !writeInto(p, dsts[0], shape) {
		return false
	}
	*g = dsts
	return true
}
