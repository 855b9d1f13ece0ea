package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Convolution as im2col plus one GEMM per sample: the (K, C·k·k) weight matrix
// times the sample's (C·k·k, OH·OW) column matrix is the sample's NCHW output,
// so no transpose follows. Backward: dx = col2im(Wᵀ·dy) per sample, and
// dW = Σ dy·colᵀ over the batch.
//
//	y  = convOp(x, w)
//	dx = convDataGradOp(w, dy)    (not built for the graph's input image)
//	dw = convFilterGradOp(x, dy)

// convGeom is one convolution's sizes: a square k×k kernel with the same
// stride and zero padding on both axes.
type convGeom struct {
	n, c, h, w     int // input
	k, stride, pad int
	oc, oh, ow     int // output
}

func (g *convGeom) ckk() int { return g.c * g.k * g.k }
func (g *convGeom) ohw() int { return g.oh * g.ow }

// pointwise convolutions (1×1, stride 1, no padding) read the input as their
// column matrix.
func (g *convGeom) pointwise() bool { return g.k == 1 && g.stride == 1 && g.pad == 0 }

// same is a stride-1 convolution whose output keeps the input's size (3×3
// padding 1, 5×5 padding 2): each block of its column matrix is the input plane
// shifted by a constant, copied flat in one go.
func (g *convGeom) same() bool {
	return g.stride == 1 && g.k > 1 && 2*g.pad == g.k-1 && g.h >= g.k && g.w >= g.k
}

// span is the range [lo, hi) of output positions o (of out) whose input
// position o·stride - pad + off lies inside [0, in).
func (g *convGeom) span(off, in, out int) (lo, hi int) {
	d := off - g.pad
	if g.stride == 1 { // no divisions on the common path
		return min(max(0, -d), max(0, min(in-d, out))), max(0, min(in-d, out))
	}
	if d < 0 {
		lo = (-d + g.stride - 1) / g.stride
	}
	if in-1-d >= 0 {
		hi = min((in-1-d)/g.stride+1, out)
	}
	return min(lo, hi), hi
}

// im2col writes the column matrix (C·k·k, OH·OW) of one sample x (C, H, W).
func im2col[T elem](g *convGeom, x, col []T) {
	if g.same() {
		im2colSame(g, x, col)
		return
	}
	ohw, hw := g.ohw(), g.h*g.w
	for c := range g.c {
		plane := x[c*hw : (c+1)*hw]
		for ki := range g.k {
			ylo, yhi := g.span(ki, g.h, g.oh)
			for kj := range g.k {
				xlo, xhi := g.span(kj, g.w, g.ow)
				d := kj - g.pad
				dst := col[((c*g.k+ki)*g.k+kj)*ohw:][:ohw]
				if g.stride == 2 && yhi > ylo && xhi > xlo {
					clear(dst)
					gatherStride2(dst[ylo*g.ow+xlo:], g.ow, plane[(ylo*2+ki-g.pad)*g.w+xlo*2+d:], 2*g.w, yhi-ylo, xhi-xlo)
					continue
				}
				clear(dst[:ylo*g.ow])
				clear(dst[yhi*g.ow:])
				for oy := ylo; oy < yhi; oy++ {
					src := plane[(oy*g.stride+ki-g.pad)*g.w:][:g.w]
					row := dst[oy*g.ow:][:g.ow]
					for i := range row[:xlo] {
						row[i] = 0
					}
					for i := xhi; i < len(row); i++ {
						row[i] = 0
					}
					if g.stride == 1 {
						copy(row[xlo:xhi], src[xlo+d:xhi+d])
						continue
					}
					for ox := xlo; ox < xhi; ox++ {
						row[ox] = src[ox*g.stride+d]
					}
				}
			}
		}
	}
}

// gatherStride2 writes dst[r·ldd + i] = src[r·lds + 2i] for r < rows,
// i < cols: a stride-2 im2col's rows, one call a block rather than a Go
// loop a row (the Go compiler does not vectorise strided loads).
func gatherStride2[T elem](dst []T, ldd int, src []T, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+cols-1]
	_ = src[(rows-1)*lds+2*(cols-1)]
	if d32, ok := any(dst).([]float32); ok && loopsAsm() {
		asmLoop(gatherStride2AVX512, gatherStride2AVX2)(&d32[0], ldd, &any(src).([]float32)[0], lds, rows, cols)
		return
	}
	for r := range rows {
		d, s := dst[r*ldd:][:cols], src[r*lds:]
		for i := range d {
			d[i] = s[2*i]
		}
	}
}

// scatterAddStride2 adds src[r·lds + i] to dst[r·ldd + 2i] for r < rows,
// i < cols: gatherStride2's adjoint, for col2im.
func scatterAddStride2[T elem](dst []T, ldd int, src []T, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+2*(cols-1)]
	_ = src[(rows-1)*lds+cols-1]
	if d32, ok := any(dst).([]float32); ok && loopsAVX512 {
		scatterAddStride2AVX512(&d32[0], ldd, &any(src).([]float32)[0], lds, rows, cols)
		return
	}
	for r := range rows {
		d, s := dst[r*ldd:], src[r*lds:][:cols]
		for i, v := range s {
			d[2*i] += v
		}
	}
}

// col2im is the adjoint of im2col: dx (C, H, W) = the sum of each column entry
// into the input position it was read from.
func col2im[T elem](g *convGeom, col, dx []T) {
	clear(dx)
	if g.same() {
		col2imSame(g, col, dx)
		return
	}
	ohw, hw := g.ohw(), g.h*g.w
	for c := range g.c {
		plane := dx[c*hw : (c+1)*hw]
		for ki := range g.k {
			ylo, yhi := g.span(ki, g.h, g.oh)
			for kj := range g.k {
				xlo, xhi := g.span(kj, g.w, g.ow)
				d := kj - g.pad
				src := col[((c*g.k+ki)*g.k+kj)*ohw:][:ohw]
				if g.stride == 2 && yhi > ylo && xhi > xlo {
					scatterAddStride2(plane[(ylo*2+ki-g.pad)*g.w+xlo*2+d:], 2*g.w, src[ylo*g.ow+xlo:], g.ow, yhi-ylo, xhi-xlo)
					continue
				}
				for oy := ylo; oy < yhi; oy++ {
					dst := plane[(oy*g.stride+ki-g.pad)*g.w:][:g.w]
					row := src[oy*g.ow:][:g.ow]
					if g.stride == 1 {
						dst, row = dst[xlo+d:xhi+d], row[xlo:xhi]
						for i, v := range row {
							dst[i] += v
						}
						continue
					}
					for ox := xlo; ox < xhi; ox++ {
						dst[ox*g.stride+d] += row[ox]
					}
				}
			}
		}
	}
}

// sameBlock locates block (ki, kj) of a "same" convolution: output position o
// reads input position o+shift; rows [ylo, yhi) and columns [xlo, xhi) are
// inside the image, and [a, b) is the flat range that one copy can move.
func (g *convGeom) sameBlock(ki, kj int) (shift, ylo, yhi, xlo, xhi, a, b int) {
	hw := g.h * g.w
	shift = (ki-g.pad)*g.w + kj - g.pad
	ylo, yhi = g.span(ki, g.h, g.h)
	xlo, xhi = g.span(kj, g.w, g.w)
	a, b = max(ylo*g.w, -shift), min(yhi*g.w, hw-shift)
	return shift, ylo, yhi, xlo, xhi, a, max(a, b)
}

// clearColumns zeroes columns [0, lo) and [hi, w) of the rows of m: a pad's
// width, one or two values per row, so plain stores beat calls to clear.
func clearColumns[T elem](m []T, w, lo, hi int) {
	if lo == 0 && hi == w {
		return
	}
	if lo == 1 && hi == w { // 3×3 "same": one column on one side
		for o := 0; o < len(m); o += w {
			m[o] = 0
		}
		return
	}
	if lo == 0 && hi == w-1 {
		for o := w - 1; o < len(m); o += w {
			m[o] = 0
		}
		return
	}
	for o := 0; o+w <= len(m); o += w {
		row := m[o : o+w]
		for i := range row[:lo] {
			row[i] = 0
		}
		for i := hi; i < w; i++ {
			row[i] = 0
		}
	}
}

func im2colSame[T elem](g *convGeom, x, col []T) {
	hw := g.h * g.w
	for c := range g.c {
		plane := x[c*hw : (c+1)*hw]
		for ki := range g.k {
			for kj := range g.k {
				dst := col[((c*g.k+ki)*g.k+kj)*hw:][:hw]
				shift, ylo, yhi, xlo, xhi, a, b := g.sameBlock(ki, kj)
				clear(dst[:a])
				copy(dst[a:b], plane[a+shift:b+shift])
				clear(dst[b:])
				// The flat copy wrapped the rows' ends around: clear the columns
				// that fall outside the image.
				clearColumns(dst[ylo*g.w:yhi*g.w], g.w, xlo, xhi)
			}
		}
	}
}

// col2imSame clears the out-of-image columns of each block (col is scratch),
// then adds the block to the plane in one flat axpy.
func col2imSame[T elem](g *convGeom, col, dx []T) {
	hw := g.h * g.w
	for c := range g.c {
		plane := dx[c*hw : (c+1)*hw]
		for ki := range g.k {
			for kj := range g.k {
				src := col[((c*g.k+ki)*g.k+kj)*hw:][:hw]
				shift, ylo, yhi, xlo, xhi, a, b := g.sameBlock(ki, kj)
				clearColumns(src[ylo*g.w:yhi*g.w], g.w, xlo, xhi)
				addTo(plane[a+shift:b+shift], src[a:b])
			}
		}
	}
}

// useShifted reports whether g runs as shifted GEMMs (conv_shifted.go): a
// stride-1 convolution, unless its products go to OpenBLAS (the openblas
// build on a CPU without an assembly kernel), where im2col's one GEMM per
// sample stays: the shifted form's many small products would each pay a cgo
// call.
func useShifted(g *convGeom) bool { return shiftedConvs && g.shiftable() && !externalFloat32() }

// shiftedConvs lets tests run stride-1 convolutions through im2col too.
var shiftedConvs = true

// convForward computes y = conv(x, w) sample by sample.
func convForward[T elem](g *convGeom, ws *Workspace, x, w, y []T) {
	if useShifted(g) {
		p := newShiftPlan[T](g, shiftForward)
		shiftedConv(&p, ws, x, w, false, y)
		return
	}
	ckk, ohw := g.ckk(), g.ohw()
	in, out := g.c*g.h*g.w, g.oc*ohw
	nw := ws.split(g.n)
	var cols []T
	if !g.pointwise() {
		cols = scratch[T](ws, nw*ckk*ohw)
	}
	parallel(g.n, nw, func(wk, lo, hi int) {
		for s := lo; s < hi; s++ {
			col := x[s*in:][:in]
			if cols != nil {
				col = cols[wk*ckk*ohw:][:ckk*ohw]
				im2col(g, x[s*in:][:in], col)
			}
			gemm(false, false, g.oc, ohw, ckk, w, ckk, col, ohw, 0, y[s*out:][:out], ohw)
		}
	})
}

// convDataGrad computes dx = col2im(Wᵀ·dy) sample by sample.
func convDataGrad[T elem](g *convGeom, ws *Workspace, w, dy, dx []T) {
	if gt, ok := g.dataGradGeom(); ok && useShifted(g) {
		p := newShiftPlan[T](&gt, shiftForward)
		shiftedConv(&p, ws, dy, w, true, dx)
		return
	}
	ckk, ohw := g.ckk(), g.ohw()
	in, out := g.c*g.h*g.w, g.oc*ohw
	nw := ws.split(g.n)
	var cols []T
	if !g.pointwise() {
		cols = scratch[T](ws, nw*ckk*ohw)
	}
	parallel(g.n, nw, func(wk, lo, hi int) {
		for s := lo; s < hi; s++ {
			if cols == nil {
				gemm(true, false, ckk, ohw, g.oc, w, ckk, dy[s*out:][:out], ohw, 0, dx[s*in:][:in], ohw)
				continue
			}
			col := cols[wk*ckk*ohw:][:ckk*ohw]
			gemm(true, false, ckk, ohw, g.oc, w, ckk, dy[s*out:][:out], ohw, 0, col, ohw)
			col2im(g, col, dx[s*in:][:in])
		}
	})
}

// reduceChunks is how many partial sums a reduction over the batch is split
// into. It is fixed, not the worker count, so that the result does not depend
// on the number of workers: each chunk sums its samples in order, and the chunks are
// added in order.
const reduceChunks = 16

// groupChunks cuts a reduction over n samples in k groups (laid end to end,
// n/k each) into chunks: cg per group of ng samples, about reduceChunks in
// all; one group gets min(reduceChunks, n) as without groups.
func groupChunks(n, k int) (ng, cg int) {
	ng = n / k
	return ng, min(max(1, reduceChunks/k), ng)
}

// chunkSpan is chunk ch's samples [lo, hi), for groups of ng samples cut into
// cg chunks each: no chunk spans two groups.
func chunkSpan(ch, ng, cg int) (lo, hi int) {
	gi, c := ch/cg, ch%cg
	return gi*ng + c*ng/cg, gi*ng + (c+1)*ng/cg
}

// convFilterGrad computes dw = Σ_s dy_s·col_sᵀ into dws[0], or with groups
// (len(dws) > 1, the samples that many groups laid end to end) each group's
// sum into its own dws[g].
func convFilterGrad[T elem](g *convGeom, ws *Workspace, x, dy []T, dws [][]T) {
	if useShifted(g) {
		p := newShiftPlan[T](g, shiftFilterGrad)
		shiftedFilterGrad(&p, ws, x, dy, dws)
		return
	}
	ckk, ohw := g.ckk(), g.ohw()
	in, out, nwt := g.c*g.h*g.w, g.oc*ohw, g.oc*ckk
	ng, cg := groupChunks(g.n, len(dws))
	chunks := cg * len(dws)
	nw := ws.split(chunks)
	colSize := 0
	if !g.pointwise() {
		colSize = ckk * ohw
	}
	// Transposed (filterGradTransposed): dWᵀ = col·dyᵀ, dyᵀ per sample.
	trans := filterGradTransposed(g.oc)
	dyTSize := 0
	if trans {
		dyTSize = ohw * g.oc
	}
	per := colSize + dyTSize
	buf := scratch[T](ws, (chunks+1)*nwt+nw*per)
	parts, sum, bufs := buf[:chunks*nwt], buf[chunks*nwt:][:nwt], buf[(chunks+1)*nwt:]
	parallel(chunks, nw, func(wk, lo, hi int) {
		col, dyT := bufs[wk*per:][:colSize], bufs[wk*per+colSize:][:dyTSize]
		for ch := lo; ch < hi; ch++ {
			acc := parts[ch*nwt:][:nwt]
			s0, s1 := chunkSpan(ch, ng, cg)
			for s := s0; s < s1; s++ {
				xs := x[s*in:][:in]
				if colSize > 0 {
					im2col(g, xs, col)
					xs = col
				}
				beta := T(1)
				if s == s0 {
					beta = 0
				}
				if trans {
					transposeInto(dyT, g.oc, dy[s*out:][:out], ohw, g.oc, ohw)
					gemm(false, false, ckk, g.oc, ohw, xs, ohw, dyT, g.oc, beta, acc, g.oc)
					continue
				}
				gemm(false, true, g.oc, ckk, ohw, dy[s*out:][:out], ohw, xs, ohw, beta, acc, ckk)
			}
		}
	})
	for gi, dw := range dws {
		gp := parts[gi*cg*nwt:]
		if !trans {
			sumParts(ws, dw, gp, cg)
			continue
		}
		sumParts(ws, sum, gp, cg)
		transposeInto(dw, ckk, sum, g.oc, ckk, g.oc)
	}
}

// sumParts writes dst = the sum of the chunks consecutive len(dst)-long parts,
// added in order; workers split the element range.
func sumParts[T elem](ws *Workspace, dst, parts []T, chunks int) {
	n := len(dst)
	parallel(n, ws.split(n/4096+1), func(_, lo, hi int) {
		d := dst[lo:hi]
		copy(d, parts[lo:hi])
		for ch := 1; ch < chunks; ch++ {
			addTo(d, parts[ch*n+lo:ch*n+hi])
		}
	})
}

// convState is shared by one convolution's forward and backward ops.
type convState struct {
	id             int64
	k, stride, pad int
	needDX         bool // false for the graph's input image
	ws             *Workspace
	groups         int // per-group filter gradients (Workspace.SetGroups)
	y, dx, dw      *tensor.Dense
	dwG            [][]float32 // with groups: each group's filter gradient
}

// Conv2d builds y = conv(x, w) for x (N, C, H, W) and w (K, C, k, k). needDX
// is false when x is an input that needs no gradient.
func Conv2d(ws *Workspace, x, w *G.Node, stride, pad int, needDX bool) (*G.Node, error) {
	st := &convState{id: nextOpID(), k: w.Shape()[2], stride: stride, pad: pad, needDX: needDX, ws: ws, groups: ws.Groups()}
	if n := x.Shape()[0]; n%st.groups != 0 {
		return nil, fmt.Errorf("%v: %d samples do not split into %d groups", st.name("Conv2d"), n, st.groups)
	}
	return G.ApplyOp(&convOp{plainOp{}, st}, x, w)
}

// geom checks the input and weight shapes and derives the sizes.
func (st *convState) geom(xs, ws tensor.Shape) (convGeom, error) {
	if len(xs) != 4 || len(ws) != 4 {
		return convGeom{}, fmt.Errorf("input %v and weights %v must be 4-D", xs, ws)
	}
	if xs[1] != ws[1] || ws[2] != st.k || ws[3] != st.k {
		return convGeom{}, fmt.Errorf("weights %v do not fit input %v and kernel %d", ws, xs, st.k)
	}
	g := convGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], k: st.k, stride: st.stride, pad: st.pad, oc: ws[0]}
	g.oh = (g.h+2*g.pad-g.k)/g.stride + 1
	g.ow = (g.w+2*g.pad-g.k)/g.stride + 1
	if g.h+2*g.pad < g.k || g.w+2*g.pad < g.k {
		return convGeom{}, fmt.Errorf("input %v is smaller than kernel %d with padding %d", xs, g.k, g.pad)
	}
	return g, nil
}

type convOp struct {
	plainOp
	*convState
}

func (op *convOp) Arity() int            { return 2 }
func (op *convOp) Type() hm.Type         { return fnType(4, 4, 4) }
func (op *convOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastConv2d#%d", op.id) }
func (op *convOp) Hashcode() uint32      { return hashOp(op) }
func (op *convOp) DiffWRT(int) []bool    { return []bool{op.needDX, true} }
func (op *convOp) String() string        { return op.name("Conv2d") }
func (st *convState) name(kind string) string {
	return fmt.Sprintf("%s(k=%d,s=%d,p=%d)#%d", kind, st.k, st.stride, st.pad, st.id)
}

func (op *convOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	xs, ok1 := ds[0].(tensor.Shape)
	ws, ok2 := ds[1].(tensor.Shape)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%v: shapes %v, %v", op, ds[0], ds[1])
	}
	g, err := op.geom(xs, ws)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return tensor.Shape{g.n, g.oc, g.oh, g.ow}, nil
}

func (op *convOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	g, err := op.geom(a[0].Shape(), a[1].Shape())
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	y := reuse(&op.y, a[0].Dtype(), tensor.Shape{g.n, g.oc, g.oh, g.ow})
	switch x := a[0].Data().(type) {
	case []float32:
		convForward(&g, op.ws, x, a[1].Float32s(), y.Float32s())
	case []float64:
		convForward(&g, op.ws, x, a[1].Float64s(), y.Float64s())
	}
	return y, nil
}

func (op *convOp) SymDiff(inputs G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	x, w := inputs[0], inputs[1]
	var dx *G.Node
	if op.needDX {
		var err error
		if dx, err = G.ApplyOp(&convDataGradOp{backwardOp{}, op.convState, x.Shape().Clone()}, w, grad); err != nil {
			return nil, err
		}
	}
	dw, err := G.ApplyOp(&convFilterGradOp{backwardOp{}, op.convState, w.Shape().Clone()}, x, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw}, nil
}

// convDataGradOp computes dx from (w, dy).
type convDataGradOp struct {
	backwardOp
	*convState
	xShape tensor.Shape
}

func (op *convDataGradOp) Arity() int            { return 2 }
func (op *convDataGradOp) Type() hm.Type         { return fnType(4, 4, 4) }
func (op *convDataGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastConv2dDataGrad#%d", op.id) }
func (op *convDataGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *convDataGradOp) String() string        { return op.name("Conv2dDataGrad") }
func (op *convDataGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.xShape.Clone(), nil
}

func (op *convDataGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	g, err := op.geom(op.xShape, a[0].Shape())
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	if want := (tensor.Shape{g.n, g.oc, g.oh, g.ow}); !a[1].Shape().Eq(want) {
		return nil, fmt.Errorf("%v: output gradient %v, expected %v", op, a[1].Shape(), want)
	}
	dx := reuse(&op.dx, a[0].Dtype(), op.xShape)
	switch w := a[0].Data().(type) {
	case []float32:
		convDataGrad(&g, op.ws, w, a[1].Float32s(), dx.Float32s())
	case []float64:
		convDataGrad(&g, op.ws, w, a[1].Float64s(), dx.Float64s())
	}
	return dx, nil
}

// convFilterGradOp computes dw from (x, dy).
type convFilterGradOp struct {
	backwardOp
	*convState
	wShape tensor.Shape
}

func (op *convFilterGradOp) Arity() int            { return 2 }
func (op *convFilterGradOp) Type() hm.Type         { return fnType(4, 4, 4) }
func (op *convFilterGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastConv2dFilterGrad#%d", op.id) }
func (op *convFilterGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *convFilterGradOp) String() string        { return op.name("Conv2dFilterGrad") }
func (op *convFilterGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.wShape.Clone(), nil
}

func (op *convFilterGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	g, err := op.geom(a[0].Shape(), op.wShape)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	if want := (tensor.Shape{g.n, g.oc, g.oh, g.ow}); !a[1].Shape().Eq(want) {
		return nil, fmt.Errorf("%v: output gradient %v, expected %v", op, a[1].Shape(), want)
	}
	dw := reuse(&op.dw, a[0].Dtype(), op.wShape)
	if op.groups > 1 {
		x, ok := a[0].Data().([]float32)
		if !ok || len(op.dwG) != op.groups {
			return nil, errNoGroupDsts(op, op.groups)
		}
		if g.n%op.groups != 0 {
			return nil, fmt.Errorf("%v: %d samples do not split into %d groups", op, g.n, op.groups)
		}
		convFilterGrad(&g, op.ws, x, a[1].Float32s(), op.dwG)
		return dw, nil
	}
	switch x := a[0].Data().(type) {
	case []float32:
		convFilterGrad(&g, op.ws, x, a[1].Float32s(), [][]float32{dw.Float32s()})
	case []float64:
		convFilterGrad(&g, op.ws, x, a[1].Float64s(), [][]float64{dw.Float64s()})
	}
	return dw, nil
}

// WriteGroupsInto makes the op write each group's filter gradient into dsts
// (see GroupedOutput).
func (op *convFilterGradOp) WriteGroupsInto(dsts [][]float32) bool {
	if !groupDsts(dsts, op.groups, op.wShape) || !writeInto(&op.dw, dsts[0], op.wShape) {
		return false
	}
	op.dwG = dsts
	return true
}
