package models

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"

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
			return must(biasAct(b.ws, x, bias, false))
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

// TestReLUKernels pins the branch-free kernels against their definitions,
// including signed zeros, infinities and denormals.
func TestReLUKernels(t *testing.T) {
	vals := []float64{-2.5, -1e-40, math.Copysign(0, -1), 0, 1e-40, 3.25, math.Inf(1), math.Inf(-1)}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 50 {
		vals = append(vals, rng.NormFloat64())
	}
	for _, v := range vals {
		want := math.Max(v, 0)
		if got := relu64(v); got != want || math.Signbit(got) {
			t.Errorf("relu64(%g) = %g, expected %g", v, got, want)
		}
		if got, want := relu32(float32(v)), float32(math.Max(float64(float32(v)), 0)); got != want || math.Signbit(float64(got)) {
			t.Errorf("relu32(%g) = %g, expected %g", float32(v), got, want)
		}
		// pass: the gradient goes through where the ReLU output is positive.
		y := math.Max(v, 0)
		wantD := 0.0
		if y > 0 {
			wantD = 1.5
		}
		if got := pass64(1.5, y); got != wantD {
			t.Errorf("pass64(1.5, %g) = %g, expected %g", y, got, wantD)
		}
		y32 := relu32(float32(v))
		wantD32 := float32(0)
		if y32 > 0 {
			wantD32 = -2
		}
		if got := pass32(-2, y32); got != wantD32 {
			t.Errorf("pass32(-2, %g) = %g, expected %g", y32, got, wantD32)
		}
	}
}
