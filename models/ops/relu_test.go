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
}
