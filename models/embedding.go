package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/optim"
)

// embedding maps one-hot rows to learned vectors: each node of onehots, shaped
// (N, vocab), becomes onehot·E of shape (N, dim), all through one table E
// (vocab, dim), initialised N(0, 1) like PyTorch's nn.Embedding. It takes a
// list so that a sequence model can embed each time step's one-hot input
// directly: embedding all steps at once and slicing the result per step costs
// Gorgonia a full-size gradient tensor per slice, O(T²) (measured on a
// char-LSTM training step: 1.1x slower at T = 64, 1.8x at T = 256).
func (b *builder) embedding(onehots []*G.Node, vocab, dim int, name string) []*G.Node {
	e := b.param(name+".w", optim.KindEmbed, normal(1), vocab, dim)
	out := make([]*G.Node, len(onehots))
	for i, x := range onehots {
		out[i] = must(G.Mul(x, e))
	}
	return out
}
