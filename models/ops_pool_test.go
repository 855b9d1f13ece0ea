package models

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// poolCases: the 2×2/2 fast path on even and odd sizes, and the general
// kernel with overlapping (3/2, 2/1) and disjoint (3/3) windows.
var poolCases = []struct {
	shape     []int
	k, stride int
}{
	{[]int{2, 3, 4, 6}, 2, 2},
	{[]int{1, 2, 5, 7}, 2, 2},
	{[]int{3, 1, 8, 8}, 2, 2},
	{[]int{2, 2, 5, 5}, 3, 2},
	{[]int{2, 2, 4, 5}, 2, 1},
	{[]int{1, 3, 7, 6}, 3, 3},
}

func poolName(shape []int, k, stride int) string {
	return fmt.Sprintf("in%v_k%d_s%d", shape, k, stride)
}

func TestFastMaxPoolGrad(t *testing.T) {
	for _, c := range poolCases {
		t.Run(poolName(c.shape, c.k, c.stride), func(t *testing.T) {
			checkLayer(t, Config{Ops: OpsFast}, c.shape, func(b *builder, x *G.Node) *G.Node { return b.maxPool(x, c.k, c.stride) })
		})
	}
}

func TestFastMaxPoolMatchesGorgonia(t *testing.T) {
	for _, c := range poolCases {
		t.Run(poolName(c.shape, c.k, c.stride), func(t *testing.T) {
			fastMatchesGorgonia(t, c.shape, func(b *builder, x *G.Node) *G.Node { return b.maxPool(x, c.k, c.stride) })
		})
	}
}

// TestFastMaxPoolForward pins values, shapes and the argmax (first maximum in
// row-major order on ties) against plain loops, on inputs with many ties.
func TestFastMaxPoolForward(t *testing.T) {
	for _, c := range poolCases {
		t.Run(poolName(c.shape, c.k, c.stride), func(t *testing.T) {
			n, ch, h, w := c.shape[0], c.shape[1], c.shape[2], c.shape[3]
			x := make([]float64, numel(c.shape))
			for i := range x {
				x[i] = float64((i*7919)%5) - 2 // values in -2..2: ties in most windows
			}
			b := newBuilder(withDefaults(Config{}), tensor.Float64, false, 0)
			xn := b.input("x", c.shape...)
			y := b.maxPool(xn, c.k, c.stride)
			op := y.Op().(*maxPoolOp)
			if err := G.Let(xn, tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(x))); err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(b.g)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			oh, ow := (h-c.k)/c.stride+1, (w-c.k)/c.stride+1
			if !y.Value().Shape().Eq(tensor.Shape{n, ch, oh, ow}) {
				t.Fatalf("shape %v, expected (%d, %d, %d, %d)", y.Value().Shape(), n, ch, oh, ow)
			}
			got := y.Value().Data().([]float64)
			for p := range n * ch {
				for i := range oh {
					for j := range ow {
						m, arg := math.Inf(-1), -1
						for a := range c.k {
							for q := range c.k {
								if o := (i*c.stride+a)*w + j*c.stride + q; x[p*h*w+o] > m {
									m, arg = x[p*h*w+o], o
								}
							}
						}
						o := (p*oh+i)*ow + j
						if got[o] != m || int(op.arg[o]) != arg {
							t.Fatalf("plane %d (%d, %d): max %g at %d, expected %g at %d", p, i, j, got[o], op.arg[o], m, arg)
						}
					}
				}
			}
		})
	}
}

func TestFastGlobalAvgPool(t *testing.T) {
	for _, s := range [][]int{{3, 4, 3, 5}, {1, 2, 1, 1}, {2, 3, 8, 8}} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			layer := func(b *builder, x *G.Node) *G.Node { return b.globalAvgPool(x) }
			checkLayer(t, Config{Ops: OpsFast}, s, layer)
			// After the backward pass, the value of Gorgonia's mean node reads
			// divided by H·W once more (its loss and gradients are right):
			// check the output against plain means instead.
			res := fastMatchesGorgoniaOut(t, s, layer, false)
			hw := s[2] * s[3]
			want := make([]float64, s[0]*s[1])
			for p := range want {
				for _, v := range res.input[p*hw : (p+1)*hw] {
					want[p] += v / float64(hw)
				}
			}
			if err := near(res.out, want, 1e-14); err != nil {
				t.Fatalf("output: %v", err)
			}
		})
	}
}
