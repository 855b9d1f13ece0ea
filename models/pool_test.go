package models

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestGradMaxPool(t *testing.T) {
	t.Run("k2s2", func(t *testing.T) {
		checkLayer(t, Config{}, []int{2, 3, 4, 6}, func(_ *builder, x *G.Node) *G.Node { return maxPool(x, 2, 2) })
	})
	t.Run("k3s2_overlapping", func(t *testing.T) {
		checkLayer(t, Config{}, []int{2, 2, 5, 5}, func(_ *builder, x *G.Node) *G.Node { return maxPool(x, 3, 2) })
	})
}

func TestGradGlobalAvgPool(t *testing.T) {
	checkLayer(t, Config{}, []int{3, 4, 3, 5}, func(_ *builder, x *G.Node) *G.Node { return globalAvgPool(x) })
}

// TestPoolForward pins the pools' values and output shapes against plain loops.
func TestPoolForward(t *testing.T) {
	shape := []int{2, 3, 5, 5}
	b, c, h, w := shape[0], shape[1], shape[2], shape[3]
	t.Run("max", func(t *testing.T) {
		out, x, _ := forward(t, shape, func(_ *builder, x *G.Node) *G.Node { return maxPool(x, 3, 2) })
		if !out.Shape().Eq(tensor.Shape{b, c, 2, 2}) {
			t.Fatalf("shape %v, expected (%d, %d, 2, 2)", out.Shape(), b, c)
		}
		got := out.Data().([]float64)
		for n := range b * c {
			for i := range 2 {
				for j := range 2 {
					m := math.Inf(-1)
					for p := range 3 {
						for q := range 3 {
							m = math.Max(m, x[(n*h+2*i+p)*w+2*j+q])
						}
					}
					if g := got[(n*2+i)*2+j]; g != m {
						t.Fatalf("plane %d (%d, %d): %g, expected %g", n, i, j, g, m)
					}
				}
			}
		}
	})
	t.Run("globalAvg", func(t *testing.T) {
		out, x, _ := forward(t, shape, func(_ *builder, x *G.Node) *G.Node { return globalAvgPool(x) })
		if !out.Shape().Eq(tensor.Shape{b, c}) {
			t.Fatalf("shape %v, expected (%d, %d)", out.Shape(), b, c)
		}
		got := out.Data().([]float64)
		for n := range b * c {
			s := 0.0
			for _, v := range x[n*h*w : (n+1)*h*w] {
				s += v
			}
			if want := s / float64(h*w); math.Abs(got[n]-want) > 1e-12 {
				t.Fatalf("plane %d: %g, expected %g", n, got[n], want)
			}
		}
	})
}
