package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// values draws values over many magnitudes and both signs, so that adding
// in another order, or multiplying before adding, changes some bits.
func values(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4)))
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d is %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

// TestVectorLoops checks the vector loops against the Go loops (vector off), bit for bit, on
// lengths with and without a tail.
func TestVectorLoops(t *testing.T) {
	if !vector {
		t.Skip("no vector loops on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 37, 2048, 2051} {
		dst, a, b, c, d := values(rng, n), values(rng, n), values(rng, n), values(rng, n), values(rng, n)
		s := float32(1) / 3
		run := func(vec bool, f func(out []float32)) []float32 {
			defer func(v bool) { vector = v }(vector)
			vector = vec
			out := append([]float32(nil), dst...)
			f(out)
			return out
		}
		cases := []struct {
			name string
			f    func(out []float32)
		}{
			{"Add1", func(o []float32) { Add1(o, a) }},
			{"Add2", func(o []float32) { Add2(o, a, b) }},
			{"Add3", func(o []float32) { Add3(o, a, b, c) }},
			{"Add4", func(o []float32) { Add4(o, a, b, c, d) }},
			{"Scale", func(o []float32) { Scale(o, s) }},
			{"AddScale", func(o []float32) { AddScale(o, o, a, s) }},
			{"AddScale apart", func(o []float32) { AddScale(o, b, a, s) }},
		}
		for _, cs := range cases {
			want := run(false, cs.f)
			got := run(true, cs.f)
			sameBits(t, cs.name, got, want)
		}
		// addScale is add1 then scale.
		want := run(false, func(o []float32) { Add1(o, a); Scale(o, s) })
		sameBits(t, "AddScale against Add1 and Scale", run(true, func(o []float32) { AddScale(o, o, a, s) }), want)
	}
}

// BenchmarkMean times the fused step's mean of the MLP's size (535,818
// values) on one core: over two replicas' gradients (AddScale) and over
// four (Add3, Scale), with the vector loops and with the Go loops.
func BenchmarkMean(b *testing.B) {
	const n = 535818
	rng := rand.New(rand.NewPCG(1, 2))
	x, s1, s2, s3 := values(rng, n), values(rng, n), values(rng, n), values(rng, n)
	for _, nr := range []int{2, 4} {
		for _, vec := range []bool{true, false} {
			name := "go"
			if vec {
				name = "vector"
			}
			b.Run(fmt.Sprintf("replicas=%d/%s", nr, name), func(b *testing.B) {
				if vec && !vector {
					b.Skip("no vector loops on this CPU")
				}
				defer func(v bool) { vector = v }(vector)
				vector = vec
				b.SetBytes(int64(4 * n * (nr + 1)))
				for b.Loop() {
					if nr == 2 {
						AddScale(x, x, s1, 1)
						continue
					}
					Add3(x, s1, s2, s3)
					Scale(x, 1)
				}
			})
		}
	}
}
