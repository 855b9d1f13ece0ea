package models

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// reluLayers are the layers with a fused bias and/or ReLU, with their input shapes.
var reluLayers = []struct {
	name  string
	shape []int
	layer func(b *builder, x *G.Node) *G.Node
}{
	{"conv_bias_relu", []int{3, 2, 6, 6}, func(b *builder, x *G.Node) *G.Node { return b.conv2dReLU(x, 2, 3, 3, 1, 1, "conv") }},
	{"conv_bias_relu_s2", []int{2, 3, 7, 7}, func(b *builder, x *G.Node) *G.Node { return b.conv2dReLU(x, 3, 4, 5, 2, 0, "conv") }},
	{"bias_rows", []int{5, 7}, func(b *builder, x *G.Node) *G.Node {
		bias := b.param("b", optim.KindBias, normal(1), 7)
		if b.fast() {
			return must(ops.BiasAct(b.ws, x, bias, false))
		}
		return must(G.BroadcastAdd(x, bias, nil, []byte{0}))
	}},
	{"linear_relu", []int{5, 7}, func(b *builder, x *G.Node) *G.Node { return b.linearReLU(x, 7, 4, "fc") }},
	{"linear_relu_batch1", []int{1, 9}, func(b *builder, x *G.Node) *G.Node { return b.linearReLU(x, 9, 6, "fc") }},
	{"add_relu", []int{3, 4, 5, 5}, func(b *builder, x *G.Node) *G.Node {
		other := b.param("other", optim.KindLinear, normal(1), 3, 4, 5, 5)
		return b.addReLU(x, other)
	}},
	{"add_relu_same_input", []int{2, 3, 4, 4}, func(b *builder, x *G.Node) *G.Node {
		return b.addReLU(x, b.conv2d(x, 3, 3, 3, 1, 1, false, "conv"))
	}},
}

func TestFastReLUGrad(t *testing.T) {
	for _, c := range reluLayers {
		t.Run(c.name, func(t *testing.T) { checkLayer(t, Config{Ops: OpsFast}, c.shape, c.layer) })
	}
}

func TestFastReLUMatchesGorgonia(t *testing.T) {
	for _, c := range reluLayers {
		t.Run(c.name, func(t *testing.T) { fastMatchesGorgonia(t, c.shape, c.layer) })
	}
}
