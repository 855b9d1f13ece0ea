package ops

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

// TestFastMaxPoolForward pins values, shapes and the argmax (first maximum in
// row-major order on ties) against plain loops, on inputs with many ties.
func TestFastMaxPoolForward(t *testing.T) {
	for _, c := range poolCases {
		t.Run(fmt.Sprintf("in%v_k%d_s%d", c.shape, c.k, c.stride), func(t *testing.T) {
			n, ch, h, w := c.shape[0], c.shape[1], c.shape[2], c.shape[3]
			x := make([]float64, n*ch*h*w)
			for i := range x {
				x[i] = float64((i*7919)%5) - 2 // values in -2..2: ties in most windows
			}
			g := G.NewGraph()
			xn := G.NewTensor(g, tensor.Float64, 4, G.WithShape(c.shape...), G.WithName("x"))
			y, err := MaxPool2d(NewWorkspace(0), xn, c.k, c.stride)
			if err != nil {
				t.Fatal(err)
			}
			op := y.Op().(*maxPoolOp)
			if err := G.Let(xn, tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(x))); err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(g)
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
