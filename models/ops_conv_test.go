package models

import (
	"math"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// fastConvCases add to convCases: a batch larger than reduceChunks that does
// not divide evenly into them, non-square images, a "same" 5×5 convolution on
// a non-square image, a stride-2 1×1 (ResNet's shortcut) and padding larger
// than "same".
var fastConvCases = append(slices.Clone(convCases),
	convCase{[]int{19, 2, 5, 5}, 3, 3, 1, 1, false},
	convCase{[]int{2, 3, 7, 5}, 4, 3, 1, 1, true},
	convCase{[]int{2, 2, 6, 9}, 3, 5, 1, 2, false},
	convCase{[]int{3, 4, 8, 8}, 5, 1, 2, 0, false},
	convCase{[]int{2, 2, 5, 6}, 3, 3, 2, 2, true},
	convCase{[]int{1, 1, 4, 4}, 2, 3, 1, 2, false},
)

func TestFastConvGrad(t *testing.T) {
	for _, c := range fastConvCases {
		t.Run(c.String(), func(t *testing.T) {
			checkLayer(t, Config{Ops: OpsFast}, c.shape, func(b *builder, x *G.Node) *G.Node {
				return b.conv2d(x, c.shape[1], c.cout, c.k, c.stride, c.pad, c.bias, "conv")
			})
		})
	}
}

func TestFastConvMatchesGorgonia(t *testing.T) {
	for _, c := range fastConvCases {
		t.Run(c.String(), func(t *testing.T) {
			fastMatchesGorgonia(t, c.shape, func(b *builder, x *G.Node) *G.Node {
				return b.conv2d(x, c.shape[1], c.cout, c.k, c.stride, c.pad, c.bias, "conv")
			})
		})
	}
}

// TestFastConvForward pins the fast op's output against the textbook loop.
func TestFastConvForward(t *testing.T) {
	for _, c := range fastConvCases {
		t.Run(c.String(), func(t *testing.T) {
			out, xv, flat := forward(t, c.shape, func(b *builder, x *G.Node) *G.Node {
				if !b.fast() {
					t.Fatal("forward builds with the default model.ops, expected fast")
				}
				return b.conv2d(x, c.shape[1], c.cout, c.k, c.stride, c.pad, c.bias, "conv")
			})
			nw := c.cout * c.shape[1] * c.k * c.k
			var bv []float64
			if c.bias {
				bv = flat[nw:]
			}
			want, wantShape := naiveConv2d(xv, c.shape, flat[:nw], c.cout, c.k, c.stride, c.pad, bv)
			if !out.Shape().Eq(tensor.Shape(wantShape)) {
				t.Fatalf("output shape %v, expected %v", out.Shape(), wantShape)
			}
			if err := near(out.Data().([]float64), want, 1e-12); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFastConvInputImage checks the convolution of a graph input (no gradient
// for the image): no data-gradient op is built and the weight gradient still
// matches Gorgonia's.
func TestFastConvInputImage(t *testing.T) {
	shape := []int{3, 2, 6, 6}
	grads := map[string][]float64{}
	for _, ops := range OpsNames() {
		b := newBuilder(withDefaults(Config{Ops: ops}), tensor.Float64, true, 0)
		x := b.input("x", shape...)
		y := b.conv2d(x, 2, 4, 3, 1, 1, false, "conv")
		loss := must(G.Sum(must(G.Square(y))))
		flat := make([]float64, b.size())
		offsets, err := b.bind(flat)
		if err != nil {
			t.Fatal(err)
		}
		b.initialise(flat, offsets, 3)
		xv := make([]float64, numel(shape))
		for i := range xv {
			xv[i] = math.Sin(float64(i))
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(shape...), tensor.WithBacking(xv))); err != nil {
			t.Fatal(err)
		}
		w := b.params[0].node
		buildMu.Lock()
		_, err = G.Grad(loss, w)
		vm := G.NewTapeMachine(b.g, G.BindDualValues(w))
		buildMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if ops == OpsFast {
			for _, n := range b.g.AllNodes() {
				if opKind(n.Op()) == "Conv2dDataGrad" {
					t.Errorf("the input image's convolution built %v", n.Op())
				}
			}
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gv, err := w.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads[ops] = slices.Clone(gv.Data().([]float64))
		vm.Close()
	}
	if err := near(grads[OpsFast], grads[OpsGorgonia], 1e-10); err != nil {
		t.Fatal(err)
	}
}
