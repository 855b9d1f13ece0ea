package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Softmax cross-entropy as one op, logits z and targets y of shape (R, C):
//
//	loss = xentOp(z, y)                 -(1/R) Σ_r Σ_c y[r,c]·log softmax(z[r])[c]
//	dz   = xentGradOp(z, y, loss, g)    g/R · (softmax(z[r])·Σ_c y[r,c] - y[r])
//
// For one-hot rows (the models' labels) the gradient is the textbook
// (softmax - onehot)/R; the general form keeps it exact for any targets.
// Gorgonia's version (LogSoftMax, HadamardProd, Sum, Mean, Neg and their
// backward nodes) allocates about ten tensors of the logits' size per step.
//
// Each row is computed in float64 whatever the element type: log Σ exp(z - max)
// (subtracting the row's maximum keeps every exp in (0, 1], so nothing
// overflows), which rounds once to float32 at the end. The forward pass keeps
// the softmax for the backward one. Rows are split over the workers; each
// row's loss goes to its own slot and the slots are summed in row order, so
// the loss does not depend on the worker count.

// xentState is shared by the loss's two ops.
type xentState struct {
	id            int64
	ws            *Workspace
	rows, classes int
	// groups (Workspace.SetGroups): the backward pass is that of the sum of
	// the groups' mean losses, so each group's parameter gradients are those
	// of its own mean loss; the output is still the mean over all rows.
	groups int

	p     *tensor.Dense // softmax of the logits (R, C)
	rowL  []float64     // each row's loss
	lossF *G.F32        // the output, reused
	lossD *G.F64
	dz    *tensor.Dense
}

// SoftmaxCrossEntropy builds the mean over the rows of the cross-entropy
// between softmax(logits) and y, both (R, C): y holds the target
// distributions (one-hot labels). Only the logits get a gradient.
func SoftmaxCrossEntropy(ws *Workspace, logits, y *G.Node) (*G.Node, error) {
	s := logits.Shape()
	if len(s) != 2 || s[0] < 1 || s[1] < 1 {
		return nil, fmt.Errorf("softmax cross-entropy: logits %v, expected (rows, classes)", s)
	}
	st := &xentState{id: nextOpID(), ws: ws, rows: s[0], classes: s[1], groups: ws.Groups()}
	if err := st.check(s, y.Shape()); err != nil {
		return nil, err
	}
	if st.rows%st.groups != 0 {
		return nil, fmt.Errorf("%v: %d rows do not split into %d groups", st.name("SoftmaxXent"), st.rows, st.groups)
	}
	return G.ApplyOp(&xentOp{plainOp{}, st}, logits, y)
}

func (st *xentState) check(zs, ys tensor.Shape) error {
	want := tensor.Shape{st.rows, st.classes}
	if !zs.Eq(want) || !ys.Eq(want) {
		return fmt.Errorf("%v: logits %v and targets %v, expected %v", st.name("SoftmaxXent"), zs, ys, want)
	}
	return nil
}

func (st *xentState) name(kind string) string {
	return fmt.Sprintf("%s(%dx%d)#%d", kind, st.rows, st.classes, st.id)
}

// xentMinWork is the fewest values a worker takes: below it, starting
// a goroutine costs more than the exps it would share.
const xentMinWork = 1 << 14

func (st *xentState) split() int {
	return st.ws.split(st.rows * st.classes / xentMinWork)
}

// scalarType is the type of a scalar of the ops' element type.
var scalarType = hm.TypeVariable('a')

type xentOp struct {
	plainOp
	*xentState
}

func (op *xentOp) Arity() int { return 2 }
func (op *xentOp) Type() hm.Type {
	return hm.NewFnType(tensorType(2), tensorType(2), scalarType)
}
func (op *xentOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastSoftmaxXent#%d", op.id) }
func (op *xentOp) Hashcode() uint32      { return hashOp(op) }
func (op *xentOp) DiffWRT(int) []bool    { return []bool{true, false} }
func (op *xentOp) String() string        { return op.name("SoftmaxXent") }

func (op *xentOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	zs, ok1 := ds[0].(tensor.Shape)
	ys, ok2 := ds[1].(tensor.Shape)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%v: inputs %v and %v have no shape", op, ds[0], ds[1])
	}
	if err := op.check(zs, ys); err != nil {
		return nil, err
	}
	return tensor.ScalarShape(), nil
}

func (op *xentOp) Do(vals ...G.Value) (G.Value, error) {
	a, err := denseArgs(op, vals)
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape()); err != nil {
		return nil, err
	}
	p := reuse(&op.p, a[0].Dtype(), a[0].Shape())
	if len(op.rowL) != op.rows {
		op.rowL = make([]float64, op.rows)
	}
	switch z := a[0].Data().(type) {
	case []float32:
		xentForward(op.xentState, p.Float32s(), z, a[1].Float32s())
	case []float64:
		xentForward(op.xentState, p.Float64s(), z, a[1].Float64s())
	}
	var total float64
	for _, l := range op.rowL {
		total += l
	}
	loss := total / float64(op.rows)
	if a[0].Dtype() == tensor.Float32 {
		if op.lossF == nil {
			op.lossF = G.NewF32(0)
		}
		*op.lossF = G.F32(loss)
		return op.lossF, nil
	}
	if op.lossD == nil {
		op.lossD = G.NewF64(0)
	}
	*op.lossD = G.F64(loss)
	return op.lossD, nil
}

// xentForward writes the softmax of z into p and each row's loss into the
// state's slots.
func xentForward[T elem](st *xentState, p, z, y []T) {
	c := st.classes
	parallel(st.rows, st.split(), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			st.rowL[r] = xentRow(p[r*c:][:c], z[r*c:][:c], y[r*c:][:c])
		}
	})
}

// xentRow writes one row's softmax into p and returns its cross-entropy
// -Σ_c y[c]·(z[c] - max - log Σ exp(z - max)).
func xentRow[T elem](p, z, y []T) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = max(m, float64(v))
	}
	var s float64
	for c, v := range z {
		e := math.Exp(float64(v) - m)
		p[c] = T(e)
		s += e
	}
	ls := math.Log(s)
	var loss float64
	for c, v := range z {
		p[c] = T(float64(p[c]) / s)
		if t := float64(y[c]); t != 0 {
			loss -= t * (float64(v) - m - ls)
		}
	}
	return loss
}

func (op *xentOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	dz, err := G.ApplyOp(&xentGradOp{backwardOp{}, op.xentState}, inputs[0], inputs[1], output, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dz, nil}, nil
}

// xentGradOp is the gradient of the logits, from the softmax the forward op
// kept. Its inputs are the logits, the targets, the loss (which orders it
// after the forward op) and the loss's gradient.
type xentGradOp struct {
	backwardOp
	*xentState
}

func (op *xentGradOp) Arity() int { return 4 }
func (op *xentGradOp) Type() hm.Type {
	return hm.NewFnType(tensorType(2), tensorType(2), scalarType, scalarType, tensorType(2))
}
func (op *xentGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "fastSoftmaxXentGrad#%d", op.id) }
func (op *xentGradOp) Hashcode() uint32      { return hashOp(op) }
func (op *xentGradOp) String() string        { return op.name("SoftmaxXentGrad") }
func (op *xentGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.rows, op.classes}, nil
}

func (op *xentGradOp) Do(vals ...G.Value) (G.Value, error) {
	if len(vals) != 4 {
		return nil, fmt.Errorf("%v: %d inputs, expected 4", op, len(vals))
	}
	a, err := denseArgs(op, vals[:2])
	if err != nil {
		return nil, err
	}
	if err := op.check(a[0].Shape(), a[1].Shape()); err != nil {
		return nil, err
	}
	g, err := scalarOf(vals[3])
	if err != nil {
		return nil, fmt.Errorf("%v: loss gradient: %w", op, err)
	}
	dt := a[0].Dtype()
	if op.p == nil || op.p.Dtype() != dt {
		return nil, fmt.Errorf("%v: backward pass before the forward pass", op)
	}
	dz := reuse(&op.dz, dt, tensor.Shape{op.rows, op.classes})
	scale := g / float64(op.rows/op.groups)
	switch p := op.p.Data().(type) {
	case []float32:
		xentBackward(op.xentState, dz.Float32s(), p, a[1].Float32s(), scale)
	case []float64:
		xentBackward(op.xentState, dz.Float64s(), p, a[1].Float64s(), scale)
	}
	return dz, nil
}

// xentBackward writes the logits' gradient d from the softmax p.
func xentBackward[T elem](st *xentState, d, p, y []T, scale float64) {
	c := st.classes
	parallel(st.rows, st.split(), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xentGradRow(d[r*c:][:c], p[r*c:][:c], y[r*c:][:c], scale)
		}
	})
}

// xentGradRow writes d = scale·(p·Σy - y) for one row.
func xentGradRow[T elem](d, p, y []T, scale float64) {
	var sy float64
	for _, v := range y {
		sy += float64(v)
	}
	for c, v := range p {
		d[c] = T(scale * (float64(v)*sy - float64(y[c])))
	}
}

// GroupLosses writes the mean loss of each group of rows (Workspace.SetGroups)
// of the last run of loss, a node built by SoftmaxCrossEntropy, into out.
func GroupLosses(loss *G.Node, out []float64) error {
	op, ok := loss.Op().(*xentOp)
	if !ok {
		return fmt.Errorf("group losses: %v is not a softmax cross-entropy", loss)
	}
	if len(out) != op.groups || len(op.rowL) != op.rows {
		return fmt.Errorf("%v: %d groups, %d losses asked for, or not run yet", op, op.groups, len(out))
	}
	rg := op.rows / op.groups
	for g := range out {
		var t float64
		for _, l := range op.rowL[g*rg:][:rg] {
			t += l
		}
		out[g] = t / float64(rg)
	}
	return nil
}

// scalarOf reads a scalar value (a Gorgonia scalar or a one-element tensor).
func scalarOf(v G.Value) (float64, error) {
	switch x := v.Data().(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case []float32:
		if len(x) == 1 {
			return float64(x[0]), nil
		}
	case []float64:
		if len(x) == 1 {
			return x[0], nil
		}
	}
	return 0, fmt.Errorf("expected a scalar, got %v", v.Shape())
}
