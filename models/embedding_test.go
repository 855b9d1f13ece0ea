package models

import (
	"testing"

	G "gorgonia.org/gorgonia"
)

// TestGradEmbedding checks the table's gradient through two inputs sharing it
// (the input rows are real-valued here, so their gradient is checked too).
func TestGradEmbedding(t *testing.T) {
	checkLayer(t, Config{}, []int{5, 7}, func(b *builder, x *G.Node) *G.Node {
		parts := []*G.Node{must(G.Slice(x, G.S(0, 2))), must(G.Slice(x, G.S(2, 5)))}
		out := b.embedding(parts, 7, 3, "embed")
		return must(G.Concat(0, out...))
	})
}
