package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Max-pooling (k×k windows, stride s, no padding) that records where each
// maximum came from, so that the backward op scatters the gradient without
// searching the windows again:
//
//	y  = maxPoolOp(x)
//	dx = maxPoolGradOp(dy)    (reads the argmax the forward op kept)

// poolState is shared by one pooling layer's forward and backward ops.
type poolState struct {
	id        int64
	ws        *Workspace
	k, stride int
	arg       []int32 // per output element: the maximum's offset in its input plane
	y         *tensor.Dense
}

// MaxPool2d builds a k×k max-pool with the given stride over (N, C, H, W).
func MaxPool2d(ws *Workspace, x *G.Node, k, stride int) (*G.Node, error) {
	return G.ApplyOp(&maxPoolOp{plainOp{}, &poolState{id: nextOpID(), ws: ws, k: k, stride: stride}}, x)
}

func (st *poolState) outShape(s tensor.Shape) (tensor.Shape, error) {
	if len(s) != 4 || s[2] < st.k || s[3] < st.k {
		return nil, fmt.Errorf("input %v must be (N, C, H, W) with H, W >= %d", s, st.k)
	}
	return tensor.Shape{s[0], s[1], (s[2]-st.k)/st.stride + 1, (s[3]-st.k)/st.stride + 1}, nil
}

type maxPoolOp struct {
	plainOp
	*poolState
}

func (op *maxPoolOp) Arity() int            { return 1 }
func (op *maxPoolOp) Type() hm.Type         { return fnType(4, 4) }
func (op *maxPoolOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastMaxPool#%d", op.id) }
func (op *maxPoolOp) Hashcode() uint32      { return hashOp(op) }
func (op *maxPoolOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *maxPoolOp) String() string {
	return fmt.Sprintf("MaxPool(k=%d,s=%d)#%d", op.k, op.stride, op.id)
}

func (op *maxPoolOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, ok := ds[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%v: shape %v", op, ds[0])
	}
	out, err := op.outShape(s)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return out, nil
}

func (op *maxPoolOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	s := a[0].Shape()
	os, err := op.outShape(s)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	y := reuse(&op.y, a[0].Dtype(), os)
	if len(op.arg) != os.TotalSize() {
		op.arg = make([]int32, os.TotalSize())
	}
	planes, h, w, oh, ow := s[0]*s[1], s[2], s[3], os[2], os[3]
	xd := a[0].Data() // once: Data allocates an interface value each call
	parallel(planes, op.ws.split(planes), func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			arg := op.arg[p*oh*ow:][:oh*ow]
			switch x := xd.(type) {
			case []float32:
				op.plane32(x[p*h*w:][:h*w], y.Float32s()[p*oh*ow:][:oh*ow], arg, w, oh, ow)
			case []float64:
				op.plane64(x[p*h*w:][:h*w], y.Float64s()[p*oh*ow:][:oh*ow], arg, w, oh, ow)
			}
		}
	})
	return y, nil
}

// The 2×2 stride-2 case takes the maximum with min/max instructions and picks
// the first index holding it arithmetically: a data-dependent branch there
// mispredicts about half the time. It is written per type because Go's generic
// max does not compile to those instructions. On float32 with AVX-512 a row
// takes 16 windows a step (loops_amd64.s); it differs from the Go loop only
// in the sign of a zero maximum, which a ReLU output does not have, and in
// which NaN a window holding NaNs gives (both give NaN, so that it reaches
// the loss).

func (op *maxPoolOp) plane32(x, y []float32, arg []int32, w, oh, ow int) {
	if op.k != 2 || op.stride != 2 {
		poolPlane(x, y, arg, w, oh, ow, op.k, op.stride)
		return
	}
	for i := range oh {
		r0, r1 := x[2*i*w:][:w], x[(2*i+1)*w:][:w]
		yr, ar := y[i*ow:][:ow], arg[i*ow:][:ow]
		if loopsAVX512 && ow > 0 {
			_, _ = r0[2*ow-1], r1[2*ow-1]
			maxPool2RowAVX512(&r0[0], &r1[0], &yr[0], &ar[0], ow, int32(2*i*w), int32(w))
			continue
		}
		for j := range ow {
			v0, v1, v2, v3 := r0[2*j], r0[2*j+1], r1[2*j], r1[2*j+1]
			m := max(max(v0, v1), max(v2, v3))
			yr[j] = m
			ar[j] = int32(2*i*w+2*j) + firstOf4(v0 == m, v1 == m, v2 == m, int32(w))
		}
	}
}

func (op *maxPoolOp) plane64(x, y []float64, arg []int32, w, oh, ow int) {
	if op.k != 2 || op.stride != 2 {
		poolPlane(x, y, arg, w, oh, ow, op.k, op.stride)
		return
	}
	for i := range oh {
		r0, r1 := x[2*i*w:][:w], x[(2*i+1)*w:][:w]
		yr, ar := y[i*ow:][:ow], arg[i*ow:][:ow]
		for j := range ow {
			v0, v1, v2, v3 := r0[2*j], r0[2*j+1], r1[2*j], r1[2*j+1]
			m := max(max(v0, v1), max(v2, v3))
			yr[j] = m
			ar[j] = int32(2*i*w+2*j) + firstOf4(v0 == m, v1 == m, v2 == m, int32(w))
		}
	}
}

// firstOf4 is the offset in a 2×2 window (row length w) of the first of its
// four values, in row-major order, equal to the maximum; e0..e2 say whether the
// first three are.
func firstOf4(e0, e1, e2 bool, w int32) int32 {
	b0, b1, b2 := b2i(e0), b2i(e1), b2i(e2)
	return (1 - b0) * (b1 + (1-b1)*(b2*w+(1-b2)*(w+1)))
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// poolPlane is the general k×k, stride s max-pool of one plane; ties go to the
// first window position in row-major order.
func poolPlane[T elem](x, y []T, arg []int32, w, oh, ow, k, s int) {
	for i := range oh {
		for j := range ow {
			best := (i*s)*w + j*s
			m := x[best]
			for p := range k {
				row := (i*s+p)*w + j*s
				for q, v := range x[row : row+k] {
					if v > m || v != v { // a NaN wins, as with max
						m, best = v, row+q
					}
				}
			}
			y[i*ow+j], arg[i*ow+j] = m, int32(best)
		}
	}
}

func (op *maxPoolOp) SymDiff(inputs G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&maxPoolGradOp{poolState: op.poolState, xShape: inputs[0].Shape().Clone()}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// maxPoolGradOp adds each output gradient to the input position of its maximum.
type maxPoolGradOp struct {
	backwardOp
	*poolState
	xShape tensor.Shape
	dx     *tensor.Dense
}

func (op *maxPoolGradOp) Arity() int            { return 1 }
func (op *maxPoolGradOp) Type() hm.Type         { return fnType(4, 4) }
func (op *maxPoolGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastMaxPoolGrad#%d", op.id) }
func (op *maxPoolGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *maxPoolGradOp) String() string        { return fmt.Sprintf("MaxPoolGrad#%d", op.id) }
func (op *maxPoolGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.xShape.Clone(), nil
}

func (op *maxPoolGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if a[0].Size() != len(op.arg) {
		return nil, fmt.Errorf("%v: gradient %v does not match the forward pass (%d outputs)", op, a[0].Shape(), len(op.arg))
	}
	dx := reuse(&op.dx, a[0].Dtype(), op.xShape)
	planes, hw := op.xShape[0]*op.xShape[1], op.xShape[2]*op.xShape[3]
	ohw := len(op.arg) / planes
	switch dy := a[0].Data().(type) {
	case []float32:
		if op.k == 2 && op.stride == 2 && loopsAVX512 {
			unpool2(op.ws, dx.Float32s(), dy, op.arg, planes, op.xShape[2], op.xShape[3])
			break
		}
		unpool(op.ws, dx.Float32s(), dy, op.arg, planes, hw, ohw)
	case []float64:
		unpool(op.ws, dx.Float64s(), dy, op.arg, planes, hw, ohw)
	}
	return dx, nil
}

// unpool2 is unpool for 2×2 stride-2 windows on float32 with AVX-512: each
// window's four positions written at once, 16 windows a step; the row and
// column left over by an odd height or width stay 0.
func unpool2(ws *Workspace, dx, dy []float32, arg []int32, planes, h, w int) {
	oh, ow := h/2, w/2
	parallel(planes, ws.split(planes), func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			d := dx[p*h*w:][:h*w]
			if h%2 == 1 || w%2 == 1 {
				clear(d)
			}
			for i := range oh {
				o := p*oh*ow + i*ow
				d0, d1 := d[2*i*w:][:2*ow], d[(2*i+1)*w:][:2*ow]
				_, _ = dy[o+ow-1], arg[o+ow-1]
				unpool2RowAVX512(&d0[0], &d1[0], &dy[o], &arg[o], ow, int32(2*i*w), int32(w))
			}
		}
	})
}

func unpool[T elem](ws *Workspace, dx, dy []T, arg []int32, planes, hw, ohw int) {
	parallel(planes, ws.split(planes), func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			d := dx[p*hw:][:hw]
			clear(d)
			for i, g := range dy[p*ohw:][:ohw] {
				d[arg[p*ohw+i]] += g
			}
		}
	})
}

// globalAvgPoolOp averages each plane of (N, C, H, W), giving (N, C). Its
// backward op spreads each gradient evenly over its plane. (Gorgonia's mean
// allocates the (N·C, H·W) gradient every step.)
type globalAvgPoolOp struct {
	plainOp
	id int64
	y  *tensor.Dense
}

// GlobalAvgPool2d builds the per-plane mean of x (N, C, H, W).
func GlobalAvgPool2d(x *G.Node) (*G.Node, error) {
	return G.ApplyOp(&globalAvgPoolOp{id: nextOpID()}, x)
}

func (op *globalAvgPoolOp) Arity() int            { return 1 }
func (op *globalAvgPoolOp) Type() hm.Type         { return fnType(2, 4) }
func (op *globalAvgPoolOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastGlobalAvgPool#%d", op.id) }
func (op *globalAvgPoolOp) Hashcode() uint32      { return hashOp(op) }
func (op *globalAvgPoolOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *globalAvgPoolOp) String() string        { return fmt.Sprintf("GlobalAvgPool#%d", op.id) }

func (op *globalAvgPoolOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, ok := ds[0].(tensor.Shape)
	if !ok || len(s) != 4 {
		return nil, fmt.Errorf("%v: input %v, expected (N, C, H, W)", op, ds[0])
	}
	return tensor.Shape{s[0], s[1]}, nil
}

func (op *globalAvgPoolOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if len(s) != 4 {
		return nil, fmt.Errorf("%v: input %v, expected (N, C, H, W)", op, s)
	}
	y := reuse(&op.y, a[0].Dtype(), tensor.Shape{s[0], s[1]})
	switch x := a[0].Data().(type) {
	case []float32:
		planeMeans(y.Float32s(), x, s[2]*s[3])
	case []float64:
		planeMeans(y.Float64s(), x, s[2]*s[3])
	}
	return y, nil
}

func planeMeans[T elem](y, x []T, hw int) {
	for p := range y {
		y[p] = sum(x[p*hw:][:hw]) / T(hw)
	}
}

func (op *globalAvgPoolOp) SymDiff(inputs G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&globalAvgPoolGradOp{id: op.id, xShape: inputs[0].Shape().Clone()}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// globalAvgPoolGradOp writes dx[n, c, :] = dy[n, c] / (H·W).
type globalAvgPoolGradOp struct {
	backwardOp
	id     int64 // the forward op's
	xShape tensor.Shape
	dx     *tensor.Dense
}

func (op *globalAvgPoolGradOp) Arity() int    { return 1 }
func (op *globalAvgPoolGradOp) Type() hm.Type { return fnType(4, 2) }
func (op *globalAvgPoolGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "fastGlobalAvgPoolGrad#%d", op.id)
}
func (op *globalAvgPoolGradOp) Hashcode() uint32 { return hashOp(op) }
func (op *globalAvgPoolGradOp) String() string   { return fmt.Sprintf("GlobalAvgPoolGrad#%d", op.id) }
func (op *globalAvgPoolGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.xShape.Clone(), nil
}

func (op *globalAvgPoolGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	planes, hw := op.xShape[0]*op.xShape[1], op.xShape[2]*op.xShape[3]
	if a[0].Size() != planes {
		return nil, fmt.Errorf("%v: gradient %v, expected (%d, %d)", op, a[0].Shape(), op.xShape[0], op.xShape[1])
	}
	dx := reuse(&op.dx, a[0].Dtype(), op.xShape)
	switch dy := a[0].Data().(type) {
	case []float32:
		spread(dx.Float32s(), dy, hw)
	case []float64:
		spread(dx.Float64s(), dy, hw)
	}
	return dx, nil
}

func spread[T elem](dx, dy []T, hw int) {
	for p, g := range dy {
		g /= T(hw)
		d := dx[p*hw:][:hw]
		for i := range d {
			d[i] = g
		}
	}
}
