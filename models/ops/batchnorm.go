package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Fused BatchNorm with an optional ReLU, per channel of (N, C, ...):
//
//	y      = BatchNormOp(x, gamma, beta)                     one statistics pass, one normalising pass
//	sums   = bnSumsOp(x, y, dy, gamma)                (2, C): Σ g, Σ g·x̂ with g = dy (masked by y > 0 with ReLU)
//	dx     = bnDataGradOp(x, y, dy, gamma, sums)
//	dbeta  = bnRowOp{0}(sums), dgamma = bnRowOp{1}(sums)
//
// Training mode normalises with the batch mean and biased variance and updates
// the running statistics with PyTorch's rule (momentum, unbiased variance);
// evaluation mode normalises with the running statistics. The batch mean and
// 1/std stay in the shared state for the backward ops.

// bnState is shared by one BatchNorm layer's ops.
type bnState struct {
	id              int64
	ws              *Workspace
	relu            bool
	momentum, eps   float64
	training        bool
	dims, pdims     int       // ranks of the input and of gamma and beta
	mean, invstd    []float64 // of the last training batch, per channel
	runMean, runVar *tensor.Dense
	y               *tensor.Dense
	// dx is the input gradient, which bnSumsOp computes channel by channel
	// right after the channel's sums, while the channel's x, y and dy are
	// still in the cache (a second pass over them from memory took a third
	// of the backward pass); bnDataGradOp returns it.
	dx *tensor.Dense
}

// BatchNorm builds the fused BatchNorm (+ ReLU) of x (N, C, ...) with scale
// gamma and shift beta of C values each (any shape); the returned op manages
// the running statistics, which start at mean 0 and variance 1.
func BatchNorm(ws *Workspace, x, gamma, beta *G.Node, relu, training bool, momentum, eps float64) (*G.Node, *BatchNormOp, error) {
	s := x.Shape()
	if len(s) < 2 || gamma.Shape().TotalSize() != s[1] || !gamma.Shape().Eq(beta.Shape()) {
		return nil, nil, fmt.Errorf("batch norm: input %v, scale %v and shift %v do not fit", s, gamma.Shape(), beta.Shape())
	}
	dt, err := dtypeOf(x)
	if err != nil {
		return nil, nil, err
	}
	c := s[1]
	op := &BatchNormOp{plainOp{}, &bnState{
		id: nextOpID(), ws: ws, relu: relu, momentum: momentum, eps: eps, training: training,
		dims: len(s), pdims: gamma.Dims(),
		mean: make([]float64, c), invstd: make([]float64, c),
		runMean: tensor.New(tensor.Of(dt), tensor.WithShape(c)),
		runVar:  tensor.New(tensor.Of(dt), tensor.WithShape(c)),
	}}
	if err := op.Reset(); err != nil {
		return nil, nil, err
	}
	y, err := G.ApplyOp(op, x, gamma, beta)
	return y, op, err
}

func dtypeOf(n *G.Node) (tensor.Dtype, error) {
	if dt := n.Dtype(); dt == tensor.Float32 || dt == tensor.Float64 {
		return dt, nil
	}
	return tensor.Dtype{}, fmt.Errorf("%v: unsupported dtype %v", n, n.Dtype())
}

// Stats returns the running mean and variance; they alias the op's state.
func (st *bnState) Stats() (mean, variance tensor.Tensor) { return st.runMean, st.runVar }

// SetStats copies running statistics into the op.
func (st *bnState) SetStats(mean, variance tensor.Tensor) error {
	for _, p := range [2][2]tensor.Tensor{{st.runMean, mean}, {st.runVar, variance}} {
		dst, src := p[0], p[1]
		if src.Dtype() != dst.Dtype() || src.Shape().TotalSize() != dst.Shape().TotalSize() {
			return fmt.Errorf("batch norm: statistics %v %v, expected %v %v", src.Dtype(), src.Shape(), dst.Dtype(), dst.Shape())
		}
		switch d := dst.Data().(type) {
		case []float32:
			copy(d, src.Data().([]float32))
		case []float64:
			copy(d, src.Data().([]float64))
		}
	}
	return nil
}

// SetTraining switches between batch statistics (true) and running statistics.
// Unlike Gorgonia's op it keeps the running statistics.
func (st *bnState) SetTraining(training bool) error {
	st.training = training
	return nil
}

// Reset sets the running mean to 0 and the running variance to 1.
func (st *bnState) Reset() error {
	st.runMean.Zero()
	switch v := st.runVar.Data().(type) {
	case []float32:
		for i := range v {
			v[i] = 1
		}
	case []float64:
		for i := range v {
			v[i] = 1
		}
	}
	return nil
}

// BatchNormOp is the forward op of a fused BatchNorm layer; through it the
// model manages the layer's running statistics.
type BatchNormOp struct {
	plainOp
	*bnState
}

func (op *BatchNormOp) Arity() int            { return 3 }
func (op *BatchNormOp) Type() hm.Type         { return fnType(op.dims, op.dims, op.pdims, op.pdims) }
func (op *BatchNormOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastBatchNorm#%d", op.id) }
func (op *BatchNormOp) Hashcode() uint32      { return hashOp(op) }
func (op *BatchNormOp) DiffWRT(int) []bool    { return []bool{true, true, true} }
func (op *BatchNormOp) String() string        { return op.name("BatchNorm") }
func (st *bnState) name(kind string) string {
	if st.relu {
		kind += "ReLU"
	}
	return fmt.Sprintf("%s#%d", kind, st.id)
}

func (op *BatchNormOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, ok := ds[0].(tensor.Shape)
	if !ok || len(s) < 2 || s[1] != len(op.mean) {
		return nil, fmt.Errorf("%v: input %v, expected %d channels", op, ds[0], len(op.mean))
	}
	return s.Clone(), nil
}

func (op *BatchNormOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if len(s) < 2 || s[1] != len(op.mean) || a[1].Size() != s[1] || a[2].Size() != s[1] {
		return nil, fmt.Errorf("%v: input %v, scale %v, shift %v", op, s, a[1].Shape(), a[2].Shape())
	}
	if a[0].Dtype() != op.runMean.Dtype() {
		return nil, fmt.Errorf("%v: input is %v, running statistics %v", op, a[0].Dtype(), op.runMean.Dtype())
	}
	y := reuse(&op.y, a[0].Dtype(), s)
	switch x := a[0].Data().(type) {
	case []float32:
		bnForward(op.bnState, x, a[1].Float32s(), a[2].Float32s(), y.Float32s(), op.runMean.Float32s(), op.runVar.Float32s(), s)
	case []float64:
		bnForward(op.bnState, x, a[1].Float64s(), a[2].Float64s(), y.Float64s(), op.runMean.Float64s(), op.runVar.Float64s(), s)
	}
	return y, nil
}

// bnForward normalises each channel. In training it first takes the channel's
// sum and sum of squares in one pass, shifted by the channel's first value so
// that a large mean does not cancel the variance away.
func bnForward[T elem](st *bnState, x, gamma, beta, y, runMean, runVar []T, s tensor.Shape) {
	n, c, inner := channels(s)
	m := float64(n * inner)
	parallel(c, st.ws.split(c), func(_, lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			var mean, invstd float64
			if st.training {
				k := x[ch*inner]
				var s1, s2 float64
				for r := range n {
					a, b := shiftedSums(x[(r*c+ch)*inner:][:inner], k)
					s1 += float64(a)
					s2 += float64(b)
				}
				d := s1 / m
				v := max(s2/m-d*d, 0)
				mean, invstd = float64(k)+d, 1/math.Sqrt(v+st.eps)
				st.mean[ch], st.invstd[ch] = mean, invstd
				unbiased := v
				if m > 1 {
					unbiased = v * m / (m - 1)
				}
				runMean[ch] = T((1-st.momentum)*float64(runMean[ch]) + st.momentum*mean)
				runVar[ch] = T((1-st.momentum)*float64(runVar[ch]) + st.momentum*unbiased)
			} else {
				mean, invstd = float64(runMean[ch]), 1/math.Sqrt(float64(runVar[ch])+st.eps)
			}
			scale := float64(gamma[ch]) * invstd
			shift := float64(beta[ch]) - mean*scale
			for r := range n {
				o := (r*c + ch) * inner
				affine(y[o:o+inner], x[o:o+inner], T(scale), T(shift), st.relu)
			}
		}
	})
}

// shiftedSums returns Σ(p-k) and Σ(p-k)².
func shiftedSums[T elem](p []T, k T) (T, T) {
	if p32, ok := any(p).([]float32); ok && loopsAsm() && len(p) > 0 {
		a, b := asmLoop(bnShiftedSumsAVX512, bnShiftedSumsAVX2)(&p32[0], len(p32), float32(k))
		return T(a), T(b)
	}
	var a0, a1, a2, a3, q0, q1, q2, q3 T
	i := 0
	for ; i+4 <= len(p); i += 4 {
		d0, d1, d2, d3 := p[i]-k, p[i+1]-k, p[i+2]-k, p[i+3]-k
		a0 += d0
		a1 += d1
		a2 += d2
		a3 += d3
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	for ; i < len(p); i++ {
		d := p[i] - k
		a0 += d
		q0 += d * d
	}
	return (a0 + a1) + (a2 + a3), (q0 + q1) + (q2 + q3)
}

func (op *BatchNormOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	x, gamma, beta := inputs[0], inputs[1], inputs[2]
	sums, err := G.ApplyOp(&bnSumsOp{st: op.bnState}, x, output, grad, gamma)
	if err != nil {
		return nil, err
	}
	dx, err := G.ApplyOp(&bnDataGradOp{st: op.bnState}, x, output, grad, gamma, sums)
	if err != nil {
		return nil, err
	}
	dgamma, err := G.ApplyOp(&bnRowOp{st: op.bnState, row: 1, shape: gamma.Shape().Clone()}, sums)
	if err != nil {
		return nil, err
	}
	dbeta, err := G.ApplyOp(&bnRowOp{st: op.bnState, row: 0, shape: beta.Shape().Clone()}, sums)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dgamma, dbeta}, nil
}

// checkTraining rejects backward passes of an op in evaluation mode: the
// gradients below are those of batch statistics.
func (st *bnState) checkTraining(op fmt.Stringer) error {
	if !st.training {
		return fmt.Errorf("%v: backward pass in evaluation mode is not supported", op)
	}
	return nil
}

// bnSumsOp computes, per channel, Σ g and Σ g·x̂ (x̂ the normalised input, g the
// output gradient masked by the ReLU): the gradients of beta and gamma, and
// the two means the input gradient subtracts.
type bnSumsOp struct {
	backwardOp
	st   *bnState
	sums *tensor.Dense
}

func (op *bnSumsOp) Arity() int { return 4 }
func (op *bnSumsOp) Type() hm.Type {
	d := op.st.dims
	return fnType(2, d, d, d, op.st.pdims)
}
func (op *bnSumsOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastBatchNormSums#%d", op.st.id) }
func (op *bnSumsOp) Hashcode() uint32      { return hashOp(op) }
func (op *bnSumsOp) String() string        { return op.st.name("BatchNormSums") }
func (op *bnSumsOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{2, len(op.st.mean)}, nil
}

func (op *bnSumsOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.st.checkTraining(op); err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if a[1].Size() != s.TotalSize() || a[2].Size() != s.TotalSize() || a[3].Size() != s[1] {
		return nil, fmt.Errorf("%v: input %v, output %v, gradient %v, scale %v", op, s, a[1].Shape(), a[2].Shape(), a[3].Shape())
	}
	out := reuse(&op.sums, a[0].Dtype(), tensor.Shape{2, s[1]})
	dx := reuse(&op.st.dx, a[0].Dtype(), s)
	switch x := a[0].Data().(type) {
	case []float32:
		bnSums(op.st, x, a[1].Float32s(), a[2].Float32s(), a[3].Float32s(), out.Float32s(), dx.Float32s(), s)
	case []float64:
		bnSums(op.st, x, a[1].Float64s(), a[2].Float64s(), a[3].Float64s(), out.Float64s(), dx.Float64s(), s)
	}
	return out, nil
}

// bnSums writes each channel's sums to out and then its input gradient to
// dx: dx = gamma/std · (g - m1 - (x - mean)·m2), m1 = Σ g / m and
// m2 = Σ g·x̂ / m / std.
func bnSums[T elem](st *bnState, x, y, dy, gamma, out, dx []T, s tensor.Shape) {
	n, c, inner := channels(s)
	m := float64(n * inner)
	parallel(c, st.ws.split(c), func(_, lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			mean := T(st.mean[ch])
			var s1, s2 float64
			for r := range n {
				o := (r*c + ch) * inner
				a, b := gradDots(x[o:o+inner], y[o:o+inner], dy[o:o+inner], mean, st.relu)
				s1 += float64(a)
				s2 += float64(b)
			}
			inv := st.invstd[ch]
			out[ch] = T(s1)
			out[c+ch] = T(s2 * inv)
			scale := T(float64(gamma[ch]) * inv)
			m1 := T(float64(out[ch]) / m)
			m2 := T(float64(out[c+ch]) / m * inv)
			for r := range n {
				o := (r*c + ch) * inner
				bnGradPlane(dx[o:o+inner], x[o:o+inner], y[o:o+inner], dy[o:o+inner], mean, scale, m1, m2, st.relu)
			}
		}
	})
}

// gradDots returns Σ g and Σ g·(x - mean), g = dy (where y > 0 with relu).
func gradDots[T elem](x, y, dy []T, mean T, relu bool) (T, T) {
	if x32, ok := any(x).([]float32); ok && loopsAsm() && len(x) > 0 {
		y32, dy32 := any(y).([]float32)[:len(x)], any(dy).([]float32)[:len(x)]
		a, b := asmLoop(bnGradDotsAVX512, bnGradDotsAVX2)(&x32[0], &y32[0], &dy32[0], len(x32), float32(mean), relu)
		return T(a), T(b)
	}
	if !relu {
		var a0, a1, b0, b1 T
		dy = dy[:len(x)]
		i := 0
		for ; i+2 <= len(x); i += 2 {
			a0 += dy[i]
			a1 += dy[i+1]
			b0 += dy[i] * (x[i] - mean)
			b1 += dy[i+1] * (x[i+1] - mean)
		}
		for ; i < len(x); i++ {
			a0 += dy[i]
			b0 += dy[i] * (x[i] - mean)
		}
		return a0 + a1, b0 + b1
	}
	switch xx := any(x).(type) {
	case []float32:
		a, b := gradDots32(xx, any(y).([]float32), any(dy).([]float32), float32(mean))
		return T(a), T(b)
	default:
		a, b := gradDots64(any(x).([]float64), any(y).([]float64), any(dy).([]float64), float64(mean))
		return T(a), T(b)
	}
}

func gradDots32(x, y, dy []float32, mean float32) (float32, float32) {
	var a0, a1, b0, b1 float32
	y, dy = y[:len(x)], dy[:len(x)]
	i := 0
	for ; i+2 <= len(x); i += 2 {
		g0, g1 := pass32(dy[i], y[i]), pass32(dy[i+1], y[i+1])
		a0 += g0
		a1 += g1
		b0 += g0 * (x[i] - mean)
		b1 += g1 * (x[i+1] - mean)
	}
	for ; i < len(x); i++ {
		g := pass32(dy[i], y[i])
		a0 += g
		b0 += g * (x[i] - mean)
	}
	return a0 + a1, b0 + b1
}

func gradDots64(x, y, dy []float64, mean float64) (float64, float64) {
	var a0, a1, b0, b1 float64
	y, dy = y[:len(x)], dy[:len(x)]
	i := 0
	for ; i+2 <= len(x); i += 2 {
		g0, g1 := pass64(dy[i], y[i]), pass64(dy[i+1], y[i+1])
		a0 += g0
		a1 += g1
		b0 += g0 * (x[i] - mean)
		b1 += g1 * (x[i+1] - mean)
	}
	for ; i < len(x); i++ {
		g := pass64(dy[i], y[i])
		a0 += g
		b0 += g * (x[i] - mean)
	}
	return a0 + a1, b0 + b1
}

// bnDataGradOp returns dx = gamma/std · (g - mean(g) - x̂·mean(g·x̂)), which
// bnSumsOp, its input, computed along with the sums (bnState.dx).
type bnDataGradOp struct {
	backwardOp
	st *bnState
}

func (op *bnDataGradOp) Arity() int { return 5 }
func (op *bnDataGradOp) Type() hm.Type {
	d := op.st.dims
	return fnType(d, d, d, d, op.st.pdims, 2)
}
func (op *bnDataGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastBatchNormDataGrad#%d", op.st.id) }
func (op *bnDataGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *bnDataGradOp) String() string        { return op.st.name("BatchNormDataGrad") }
func (op *bnDataGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	s, ok := ds[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%v: shape %v", op, ds[0])
	}
	return s.Clone(), nil
}

func (op *bnDataGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.st.checkTraining(op); err != nil {
		return nil, err
	}
	s := a[0].Shape()
	if a[1].Size() != s.TotalSize() || a[2].Size() != s.TotalSize() || a[3].Size() != s[1] || a[4].Size() != 2*s[1] {
		return nil, fmt.Errorf("%v: input %v, output %v, gradient %v, scale %v, sums %v",
			op, s, a[1].Shape(), a[2].Shape(), a[3].Shape(), a[4].Shape())
	}
	dx := op.st.dx
	if dx == nil || dx.Dtype() != a[0].Dtype() || dx.DataSize() != s.TotalSize() {
		return nil, fmt.Errorf("%v: the sums op computed no input gradient of %v %v", op, a[0].Dtype(), s)
	}
	return reuse(&op.st.dx, a[0].Dtype(), s), nil
}

func bnGradPlane[T elem](dx, x, y, dy []T, mean, scale, m1, m2 T, relu bool) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	if x32, ok := any(x).([]float32); ok && loopsAsm() && len(x) > 0 {
		dx32, y32, dy32 := any(dx).([]float32), any(y).([]float32)[:len(x)], any(dy).([]float32)
		asmLoop(bnGradPlaneAVX512, bnGradPlaneAVX2)(&dx32[0], &x32[0], &y32[0], &dy32[0], len(x32), float32(mean), float32(scale), float32(m1), float32(m2), relu)
		return
	}
	if !relu {
		for i, v := range x {
			dx[i] = scale * (dy[i] - m1 - (v-mean)*m2)
		}
		return
	}
	switch d := any(dx).(type) {
	case []float32:
		xx, yy, gg := any(x).([]float32), any(y).([]float32), any(dy).([]float32)
		mean, scale, m1, m2 := float32(mean), float32(scale), float32(m1), float32(m2)
		yy, gg = yy[:len(xx)], gg[:len(xx)]
		for i, v := range xx {
			d[i] = scale * (pass32(gg[i], yy[i]) - m1 - (v-mean)*m2)
		}
	case []float64:
		xx, yy, gg := any(x).([]float64), any(y).([]float64), any(dy).([]float64)
		mean, scale, m1, m2 := float64(mean), float64(scale), float64(m1), float64(m2)
		yy, gg = yy[:len(xx)], gg[:len(xx)]
		for i, v := range xx {
			d[i] = scale * (pass64(gg[i], yy[i]) - m1 - (v-mean)*m2)
		}
	}
}

// bnRowOp returns one row of the (2, C) sums, shaped like the parameter it is
// the gradient of: row 0 for beta, row 1 for gamma.
type bnRowOp struct {
	backwardOp
	st    *bnState
	row   int
	shape tensor.Shape
	out   *tensor.Dense
}

func (op *bnRowOp) Arity() int                                     { return 1 }
func (op *bnRowOp) Type() hm.Type                                  { return fnType(op.shape.Dims(), 2) }
func (op *bnRowOp) WriteHash(h hash.Hash)                          { fmt.Fprintf(h, "fastBatchNormRow%d#%d", op.row, op.st.id) }
func (op *bnRowOp) Hashcode() uint32                               { return hashOp(op) }
func (op *bnRowOp) String() string                                 { return op.st.name(fmt.Sprintf("BatchNormRow%d", op.row)) }
func (op *bnRowOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.shape.Clone(), nil }

func (op *bnRowOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	c := op.shape.TotalSize()
	if a[0].Size() != 2*c {
		return nil, fmt.Errorf("%v: sums %v, expected (2, %d)", op, a[0].Shape(), c)
	}
	out := reuse(&op.out, a[0].Dtype(), op.shape)
	switch s := a[0].Data().(type) {
	case []float32:
		copy(out.Float32s(), s[op.row*c:(op.row+1)*c])
	case []float64:
		copy(out.Float64s(), s[op.row*c:(op.row+1)*c])
	}
	return out, nil
}
