package optim

import (
	"math"
	"testing"
)

func clipParams() []Param {
	return []Param{
		{Name: "w", Value: make([]float32, 2), Grad: []float32{3, 0}},
		{Name: "b", Value: make([]float32, 1), Grad: []float32{-4}},
	}
}

func TestClipGlobalNorm(t *testing.T) {
	// The global norm over both tensors is sqrt(3^2 + 0^2 + 4^2) = 5. With maxNorm 1 every
	// gradient is scaled by 1/(5+1e-6) = 0.19999996: [3, 0] -> [0.59999988, 0], -4 -> -0.79999984.
	p := clipParams()
	if norm := ClipGlobalNorm(p, 1); norm != 5 {
		t.Errorf("norm = %v, want 5", norm)
	}
	for _, c := range []struct {
		got  float32
		want float64
	}{{p[0].Grad[0], 0.59999988}, {p[1].Grad[0], -0.79999984}} {
		if !near(float64(c.got), c.want) {
			t.Errorf("clipped gradient %.9g, want %.9g", c.got, c.want)
		}
	}
	if p[0].Grad[1] != 0 {
		t.Errorf("zero gradient became %v", p[0].Grad[1])
	}
	if norm := ClipGlobalNorm(p, 1); !near(norm, 5/(5+1e-6)) {
		t.Errorf("norm after clipping = %v, want 5/(5+1e-6)", norm)
	}
}

func TestClipGlobalNormLeavesGradients(t *testing.T) {
	for _, c := range []struct {
		name    string
		maxNorm float64
	}{{"below the threshold", 10}, {"off", 0}, {"negative is off", -1}} {
		p := clipParams()
		if norm := ClipGlobalNorm(p, c.maxNorm); norm != 5 {
			t.Errorf("%s: norm = %v, want 5", c.name, norm)
		}
		if p[0].Grad[0] != 3 || p[1].Grad[0] != -4 {
			t.Errorf("%s: gradients changed to %v %v", c.name, p[0].Grad, p[1].Grad)
		}
	}

	// A NaN gradient is reported through the norm, and nothing is scaled.
	p := clipParams()
	p[0].Grad[1] = float32(math.NaN())
	if norm := ClipGlobalNorm(p, 1); !math.IsNaN(norm) {
		t.Errorf("norm with a NaN gradient = %v, want NaN", norm)
	}
	if p[0].Grad[0] != 3 || p[1].Grad[0] != -4 {
		t.Errorf("NaN norm: gradients changed to %v %v", p[0].Grad, p[1].Grad)
	}
}

func TestClipGlobalNormAtThreshold(t *testing.T) {
	// As PyTorch: a norm equal to maxNorm is still scaled by 5/(5+1e-6) = 0.9999998.
	p := clipParams()
	ClipGlobalNorm(p, 5)
	if !near(float64(p[0].Grad[0]), 3*5/(5+1e-6)) || p[0].Grad[0] == 3 {
		t.Errorf("gradient at the threshold = %.9g, want %.9g", p[0].Grad[0], 3*5/(5+1e-6))
	}
}

func TestSumSquaresTail(t *testing.T) {
	// 7 elements: one block of four and a tail of three. 1+4+9+...+49 = 140.
	x := []float32{1, 2, 3, 4, 5, 6, 7}
	if got := sumSquares(x); got != 140 {
		t.Errorf("sumSquares = %v, want 140", got)
	}
}
