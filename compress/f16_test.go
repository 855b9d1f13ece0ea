package compress

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// roundF16Scalar is RoundF16's Go loop, the reference for the vector one.
func roundF16Scalar(v []float32) {
	for i, x := range v {
		v[i] = F32FromF16(F16FromF32(x))
	}
}

// checkRoundF16 compares RoundF16 with the Go loop bit for bit on vals,
// at every length mod 8 so that the vector part and the tail both run.
func checkRoundF16(t *testing.T, vals []float32) {
	t.Helper()
	got, want := append([]float32(nil), vals...), append([]float32(nil), vals...)
	RoundF16(got)
	roundF16Scalar(want)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("RoundF16(%#08x = %v) = %#08x, want %#08x", math.Float32bits(vals[i]), vals[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// TestRoundF16Vector: RoundF16 gives the Go conversion's bits wherever the
// vector loop runs: every half-precision value and its float32 neighbours
// (the rounding boundaries: each half, the midpoints to the next half and
// the float32 values one and two units either side of both), both signs,
// float32 subnormals, infinities, values that overflow half precision, NaNs
// with payloads (quiet and signalling) and a million random bit patterns.
func TestRoundF16Vector(t *testing.T) {
	if !f16Vector {
		t.Skip("this CPU runs the Go loop only")
	}
	var vals []float32
	for h := range 1 << 16 {
		x := F32FromF16(uint16(h))
		next := F32FromF16(uint16(h + 1))
		if math.IsNaN(float64(x)) {
			continue
		}
		for _, b := range []uint32{math.Float32bits(x), math.Float32bits((x + next) / 2)} {
			for d := -2; d <= 2; d++ {
				vals = append(vals, math.Float32frombits(b+uint32(d)))
			}
		}
	}
	for _, b := range []uint32{0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0x7fffffff, 0xffc00001, 0xff800001,
		0x00000001, 0x807fffff, 0x477fefff, 0x477ff000, 0x477fffff, 0x47800000, 0x33000000, 0x33000001, 0xb3000000} {
		vals = append(vals, math.Float32frombits(b))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for cut := range 8 {
		checkRoundF16(t, vals[:len(vals)-cut])
	}
}

// TestRoundF16Exhaustive compares every float32 bit pattern; about a minute,
// so only with GRADWIRE_EXHAUSTIVE=1.
func TestRoundF16Exhaustive(t *testing.T) {
	if os.Getenv("GRADWIRE_EXHAUSTIVE") != "1" {
		t.Skip("set GRADWIRE_EXHAUSTIVE=1 to compare all 2^32 float32 values")
	}
	if !f16Vector {
		t.Skip("this CPU runs the Go loop only")
	}
	const block = 1 << 20
	vals := make([]float32, block)
	for start := uint64(0); start < 1<<32; start += block {
		for i := range vals {
			vals[i] = math.Float32frombits(uint32(start) + uint32(i))
		}
		checkRoundF16(t, vals)
	}
}

func BenchmarkRoundF16(b *testing.B) {
	v := make([]float32, 535818)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	for _, loops := range []string{"vector", "go"} {
		b.Run(loops, func(b *testing.B) {
			if loops == "vector" && !f16Vector {
				b.Skip("this CPU runs the Go loop only")
			}
			for b.Loop() {
				if loops == "go" {
					roundF16Scalar(v)
				} else {
					RoundF16(v)
				}
			}
			b.ReportMetric(float64(len(v))*float64(b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}
