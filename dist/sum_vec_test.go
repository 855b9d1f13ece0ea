package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// sumValues draws values over many magnitudes and both signs, so that adding
// in another order, or multiplying before adding, changes some bits.
func sumValues(rng *rand.Rand, n int) []float32 {
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

// TestSumVectorLoops checks the vector loops of the in-process all-reduce and
// the fused mean against the Go loops (sumVector off), bit for bit, on
// lengths with and without a tail.
func TestSumVectorLoops(t *testing.T) {
	if !sumVector {
		t.Skip("no vector loops on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 37, 2048, 2051} {
		dst, a, b, c, d := sumValues(rng, n), sumValues(rng, n), sumValues(rng, n), sumValues(rng, n), sumValues(rng, n)
		s := float32(1) / 3
		run := func(vector bool, f func(out []float32)) []float32 {
			defer func(v bool) { sumVector = v }(sumVector)
			sumVector = vector
			out := append([]float32(nil), dst...)
			f(out)
			return out
		}
		cases := []struct {
			name string
			f    func(out []float32)
		}{
			{"add1", func(o []float32) { add1(o, a) }},
			{"add2", func(o []float32) { add2(o, a, b) }},
			{"add3", func(o []float32) { add3(o, a, b, c) }},
			{"add4", func(o []float32) { add4(o, a, b, c, d) }},
			{"scale", func(o []float32) { scale(o, s) }},
			{"addScale", func(o []float32) { addScale(o, o, a, s) }},
			{"addScale apart", func(o []float32) { addScale(o, b, a, s) }},
		}
		for _, cs := range cases {
			want := run(false, cs.f)
			got := run(true, cs.f)
			sameBits(t, cs.name, got, want)
		}
		// addScale is add1 then scale.
		want := run(false, func(o []float32) { add1(o, a); scale(o, s) })
		sameBits(t, "addScale against add1 and scale", run(true, func(o []float32) { addScale(o, o, a, s) }), want)
	}
}

// TestMeanSpanVector checks the fused step's mean with the vector loops
// against the Go loops and against the sum written out in replica order, bit
// for bit, for 2 to 7 replicas, over a length with a tail and a range that
// starts inside a block.
func TestMeanSpanVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 5003
	for nr := 2; nr <= 7; nr++ {
		dst := sumValues(rng, n)
		srcs := make([][]float32, nr-1)
		for i := range srcs {
			srcs[i] = sumValues(rng, n)
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
		for _, vector := range []bool{false, true} {
			func() {
				defer func(v bool) { sumVector = v }(sumVector)
				sumVector = vector && sumVector
				got := append([]float32(nil), dst...)
				meanSpan(got, srcs, inv, 3, n)
				sameBits(t, fmt.Sprintf("meanSpan of %d replicas (vector %v)", nr, sumVector), got, want)
			}()
		}
	}
}

// BenchmarkMeanSpan times the fused step's mean over two and over four
// replicas' gradients of the MLP's size (535,818 values) on one core, with
// the vector loops and with the Go loops.
func BenchmarkMeanSpan(b *testing.B) {
	const n = 535818
	rng := rand.New(rand.NewPCG(1, 2))
	for _, nr := range []int{2, 4} {
		dst := sumValues(rng, n)
		srcs := make([][]float32, nr-1)
		for i := range srcs {
			srcs[i] = sumValues(rng, n)
		}
		for _, vector := range []bool{true, false} {
			name := "go"
			if vector {
				name = "vector"
			}
			b.Run(fmt.Sprintf("replicas=%d/%s", nr, name), func(b *testing.B) {
				if vector && !sumVector {
					b.Skip("no vector loops on this CPU")
				}
				defer func(v bool) { sumVector = v }(sumVector)
				sumVector = vector
				b.SetBytes(int64(4 * n * (nr + 1)))
				for b.Loop() {
					meanSpan(dst, srcs, 1, 0, n)
				}
			})
		}
	}
}
