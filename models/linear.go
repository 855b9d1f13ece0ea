package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// linear is x·W + b for x of shape (B, in); W is (in, out), Glorot-uniform
// initialised; b is (out) and starts at zero. On the fast path it is one op
// (ops.Linear) that skips the input's gradient when the input is the graph's.
func (b *builder) linear(x *G.Node, in, out int, name string) *G.Node {
	return b.dense(x, in, out, name, false)
}

// linearReLU is relu(linear(x)), one op on the fast path.
func (b *builder) linearReLU(x *G.Node, in, out int, name string) *G.Node {
	return b.dense(x, in, out, name, true)
}

// dense is linear, followed by a ReLU if relu: Gorgonia's Mul, BroadcastAdd
// and Rectify with model.ops gorgonia, the fused ops.Linear otherwise.
func (b *builder) dense(x *G.Node, in, out int, name string, relu bool) *G.Node {
	w := b.param(name+".w", optim.KindLinear, glorotUniform(in, out), in, out)
	bias := b.param(name+".b", optim.KindBias, zeros, out)
	b.addProductFLOPs(x.Shape()[0], in, out)
	if b.fast() {
		return must(ops.Linear(b.ws, x, w, bias, relu, !b.inputs[x]))
	}
	y := must(G.BroadcastAdd(must(G.Mul(x, w)), bias, nil, []byte{0}))
	if relu {
		y = b.relu(y)
	}
	return y
}

// relu is max(x, 0).
func (b *builder) relu(x *G.Node) *G.Node { return must(G.Rectify(x)) }

// addReLU is relu(x + y), the residual join, fused into one op on the fast path.
func (b *builder) addReLU(x, y *G.Node) *G.Node {
	if b.fast() {
		return must(ops.AddReLU(b.ws, x, y))
	}
	return b.relu(must(G.Add(x, y)))
}

// flatten reshapes (B, ...) to (B, rest), marked as an input if x is one.
func (b *builder) flatten(x *G.Node) *G.Node {
	s := x.Shape()
	return b.reshape(x, s[0], numel(s[1:]))
}
