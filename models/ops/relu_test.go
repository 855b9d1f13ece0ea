package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

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
	// NaNs of either sign pass (the default NaN of x86 arithmetic has the
	// sign bit set): a diverged activation must reach the loss.
	for _, b := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001} {
		if got := relu32(math.Float32frombits(b)); !math.IsNaN(float64(got)) {
			t.Errorf("relu32(NaN %#x) = %g, expected NaN", b, got)
		}
		if got := relu64(float64(math.Float32frombits(b))); !math.IsNaN(got) {
			t.Errorf("relu64(NaN %#x) = %g, expected NaN", b, got)
		}
	}
}

// TestReluLoopsKeepNaN: the ReLU loops (AVX-512, AVX2 and Go) turn a NaN of
// either sign into a NaN and every other value into max(v, 0) with +0, in
// every lane and in the masked tails.
func TestReluLoopsKeepNaN(t *testing.T) { loopVariants(t, testReluLoopsKeepNaN) }

func testReluLoopsKeepNaN(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	nans := []float32{math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000)}
	for _, n := range []int{1, 7, 8, 9, 16, 17, 31, 33, 100} {
		x, zero := make([]float32, n), make([]float32, n)
		for i := range x {
			switch rng.IntN(4) {
			case 0:
				x[i] = nans[rng.IntN(2)]
			case 1:
				x[i] = float32(math.Copysign(0, -1))
			default:
				x[i] = float32(rng.NormFloat64())
			}
		}
		check := func(what string, got []float32) {
			for i, v := range x {
				want := float32(max(float64(v), 0))
				if math.IsNaN(float64(v)) {
					if !math.IsNaN(float64(got[i])) {
						t.Errorf("n %d: %s[%d] = %v for NaN %#x, expected NaN", n, what, i, got[i], math.Float32bits(v))
					}
					continue
				}
				if got[i] != want || math.Signbit(float64(got[i])) {
					t.Errorf("n %d: %s[%d] = %v for %v, expected %v", n, what, i, got[i], v, want)
				}
			}
		}
		out := make([]float32, n)
		affine(out, x, 1, 0, true)
		check("affine", out)
		out = make([]float32, n)
		addRelu(out, x, zero)
		check("addRelu", out)
	}
}
