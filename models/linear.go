package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// linear is x·W + b for x of shape (B, in); W is (in, out), Glorot-uniform
// initialised; b is (out) and starts at zero. It uses Gorgonia's ops whatever
// model.ops says: a fast bias op made no measurable difference to the MLP.
func (b *builder) linear(x *G.Node, in, out int, name string) *G.Node {
	w := b.param(name+".w", optim.KindLinear, glorotUniform(in, out), in, out)
	bias := b.param(name+".b", optim.KindBias, zeros, out)
	b.addProductFLOPs(x.Shape()[0], in, out)
	return must(G.BroadcastAdd(must(G.Mul(x, w)), bias, nil, []byte{0}))
}

// linearReLU is relu(linear(x)), with the bias and ReLU fused into one op on
// the fast path.
func (b *builder) linearReLU(x *G.Node, in, out int, name string) *G.Node {
	if !b.fast() {
		return b.relu(b.linear(x, in, out, name))
	}
	w := b.param(name+".w", optim.KindLinear, glorotUniform(in, out), in, out)
	bias := b.param(name+".b", optim.KindBias, zeros, out)
	b.addProductFLOPs(x.Shape()[0], in, out)
	return must(ops.BiasAct(b.ws, must(G.Mul(x, w)), bias, true))
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

// flatten reshapes (B, ...) to (B, rest).
func flatten(x *G.Node) *G.Node {
	s := x.Shape()
	return must(G.Reshape(x, []int{s[0], numel(s[1:])}))
}
