package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// embedding maps one-hot rows to learned vectors: each node of onehots, shaped
// (N, vocab), becomes onehot·E of shape (N, dim), all through one table E
// (vocab, dim), initialised N(0, 1) like PyTorch's nn.Embedding. The fast op
// gathers table rows from the nonzeros of each row (ops.Embedding);
// Gorgonia's is the matrix product. It takes a list so that a sequence model
// on Gorgonia's ops can embed each time step's one-hot input directly:
// embedding all steps at once and slicing the result per step costs Gorgonia
// a full-size gradient tensor per slice, O(T²) (measured on a char-LSTM
// training step: 1.1x slower at T = 64, 1.8x at T = 256).
func (b *builder) embedding(onehots []*G.Node, vocab, dim int, name string) []*G.Node {
	e := b.param(name+".w", optim.KindEmbed, normal(1), vocab, dim)
	out := make([]*G.Node, len(onehots))
	for i, x := range onehots {
		if b.fast() {
			out[i] = must(ops.Embedding(b.ws, x, e, !b.inputs[x]))
		} else {
			out[i] = must(G.Mul(x, e))
		}
	}
	return out
}

// embedSeq embeds a batch of token sequences given as one-hot rows x (batch*steps,
// vocab), row b*steps+t for token t of sequence b: one (batch, steps, dim) node
// with the fast ops, a node per step with Gorgonia's.
func (b *builder) embedSeq(x *G.Node, batch, steps, vocab, dim int, name string) seq {
	if b.fast() {
		e := b.embedding([]*G.Node{x}, vocab, dim, name)[0]
		return seq{whole: b.reshape(e, batch, steps, dim)}
	}
	return seq{steps: b.embedding(b.stepSeq(seq{whole: b.reshape(x, batch, steps, vocab)}), vocab, dim, name)}
}
