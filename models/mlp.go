package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// buildMLP is a multi-layer perceptron: flatten, then Linear+ReLU per hidden
// size (one fused op each on the fast path), then a linear classifier
// (default 784-512-256-10).
func buildMLP(b *builder, x *G.Node, in Input, batch int) *G.Node {
	h := b.flatten(x)
	width := numel(in.Shape)
	for i, size := range b.cfg.Hidden {
		h = b.linearReLU(h, width, size, fmt.Sprintf("fc%d", i+1))
		width = size
	}
	return b.linear(h, width, in.Classes, fmt.Sprintf("fc%d", len(b.cfg.Hidden)+1))
}
