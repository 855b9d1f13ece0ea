package dist

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMeanSpan checks the fused step's mean against the sum written out in
// replica order, bit for bit, for 2 to 7 replicas (AddScale for two, the Add
// loops for more), over a length with a tail and a range that starts inside
// a block.
func TestMeanSpan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 5003
	for nr := 2; nr <= 7; nr++ {
		dst := meanValues(rng, n)
		srcs := make([][]float32, nr-1)
		for i := range srcs {
			srcs[i] = meanValues(rng, n)
		}
		inv := 1 / float32(nr)
		want := append([]float32(nil), dst...)
		for i := 3; i < n; i++ {
			s := want[i]
			for _, src := range srcs {
				s += src[i]
			}
			want[i] = s * inv
		}
		got := append([]float32(nil), dst...)
		meanSpan(got, srcs, inv, 3, n)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("meanSpan of %d replicas: element %d is %v, want %v", nr, i, got[i], want[i])
			}
		}
	}
}

// meanValues draws values over many magnitudes and both signs, so that adding
// in another order changes some bits.
func meanValues(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4)))
	}
	return v
}
