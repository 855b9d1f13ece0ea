package models

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
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
