package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/optim"
)

// linear is x·W + b for x of shape (B, in); W is (in, out), Glorot-uniform
// initialised; b is (out) and starts at zero.
func (b *builder) linear(x *G.Node, in, out int, name string) *G.Node {
	w := b.param(name+".w", optim.KindLinear, glorotUniform(in, out), in, out)
	bias := b.param(name+".b", optim.KindBias, zeros, out)
	return must(G.BroadcastAdd(must(G.Mul(x, w)), bias, nil, []byte{0}))
}

// relu is max(x, 0).
func (b *builder) relu(x *G.Node) *G.Node { return must(G.Rectify(x)) }

// flatten reshapes (B, ...) to (B, rest).
func flatten(x *G.Node) *G.Node {
	s := x.Shape()
	return must(G.Reshape(x, []int{s[0], numel(s[1:])}))
}
