package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The scalar reference of sgd.go's kernels, as they were before the vector
// kernels: every vector result must have its bits.
func sgdPlainRef(w, g []float32, lr, wd float64) {
	for i, wi := range w {
		d := float64(g[i]) + wd*float64(wi)
		w[i] = float32(float64(wi) - lr*d)
	}
}

func sgdMomentumRef(w, g, b []float32, lr, wd, m float64, nesterov bool) {
	for i, wi := range w {
		d := float64(g[i]) + wd*float64(wi)
		bi := m*float64(b[i]) + d
		b[i] = float32(bi)
		if nesterov {
			d += m * bi
		} else {
			d = bi
		}
		w[i] = float32(float64(wi) - lr*d)
	}
}

// sgdDraw is a value of any sign over 60 binary orders of magnitude, and now
// and then a subnormal, an infinity or a NaN.
func sgdDraw(rng *rand.Rand) float32 {
	switch rng.IntN(50) {
	case 0:
		return float32(math.Inf(1 - 2*rng.IntN(2)))
	case 1:
		return float32(math.NaN())
	case 2:
		return math.Float32frombits(uint32(rng.IntN(1 << 23))) // subnormal
	}
	return float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(60)-30)))
}

// sameBits: equal bits, or both NaN (the payload of a NaN is not specified).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestSGDKernelsVectorMatchScalar: the vector kernels of sgd_amd64.s (where
// the CPU has them) give every element the scalar code's bits, for lengths
// around the vector width and odd hyper-parameters.
func TestSGDKernelsVectorMatchScalar(t *testing.T) {
	if !sgdVector {
		t.Skip("no vector kernels on this CPU or architecture")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 400 {
		n := rng.IntN(40)
		if trial%50 == 0 {
			n = 100003
		}
		lr, wd, m := rng.Float64()*0.3, []float64{0, 5e-4, 0.1}[rng.IntN(3)], []float64{0.9, 0.5, 0.99}[rng.IntN(3)]
		w, g, b := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range w {
			w[i], g[i], b[i] = sgdDraw(rng), sgdDraw(rng), sgdDraw(rng)
		}
		w1, w2 := append([]float32(nil), w...), append([]float32(nil), w...)
		sgdPlain(w1, g, lr, wd)
		sgdPlainRef(w2, g, lr, wd)
		for i := range w1 {
			if !sameBits(w1[i], w2[i]) {
				t.Fatalf("plain n=%d lr=%v wd=%v: element %d: %v, scalar %v", n, lr, wd, i, w1[i], w2[i])
			}
		}
		for _, nesterov := range []bool{false, true} {
			w1, w2 = append([]float32(nil), w...), append([]float32(nil), w...)
			b1, b2 := append([]float32(nil), b...), append([]float32(nil), b...)
			sgdMomentum(w1, g, b1, lr, wd, m, nesterov)
			sgdMomentumRef(w2, g, b2, lr, wd, m, nesterov)
			for i := range w1 {
				if !sameBits(w1[i], w2[i]) || !sameBits(b1[i], b2[i]) {
					t.Fatalf("momentum n=%d nesterov %v: element %d: w %v b %v, scalar w %v b %v", n, nesterov, i, w1[i], b1[i], w2[i], b2[i])
				}
			}
		}
	}
}

func BenchmarkSGDPlain(b *testing.B) {
	w, g := make([]float32, 535818), make([]float32, 535818)
	for i := range w {
		w[i], g[i] = float32(i%7), float32(i%5)
	}
	b.Run("vector", func(b *testing.B) {
		for b.Loop() {
			sgdPlain(w, g, 1e-9, 0)
		}
	})
	b.Run("scalar", func(b *testing.B) {
		for b.Loop() {
			sgdPlainRef(w, g, 1e-9, 0)
		}
	})
}

// TestSGDStepSplitMatchesScalar: a tensor large enough to be split over the
// helper goroutines (sgdSplitMin) and of a length that is no whole number of
// blocks is updated exactly as the scalar reference updates it, in every
// kernel SGD.Step chooses, over several steps.
func TestSGDStepSplitMatchesScalar(t *testing.T) {
	const n = 3*sgdSplitMin + 17
	rng := rand.New(rand.NewPCG(21, 22))
	w0, g := make([]float32, n), make([]float32, n)
	for i := range w0 {
		w0[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	const lr, wd, m = 0.05, 5e-4, 0.9
	for _, c := range []struct {
		name     string
		cfg      Config
		exchange func(*SGD)
		ref      func(w, b []float32)
	}{
		{"plain", Config{Name: "sgd", LR: lr, WeightDecay: wd}, nil,
			func(w, _ []float32) { sgdPlainRef(w, g, lr, wd) }},
		{"nesterov", Config{Name: "sgd", LR: lr, Momentum: m, Nesterov: true, WeightDecay: wd}, nil,
			func(w, b []float32) { sgdMomentumRef(w, g, b, lr, wd, m, true) }},
		{"plain-steps", Config{Name: "sgd", LR: lr, Momentum: m, WeightDecay: wd}, func(s *SGD) { s.PlainSteps("w") },
			func(w, _ []float32) { sgdPlainRef(w, g, lr, 0) }},
		{"decay-steps", Config{Name: "sgd", LR: lr, Momentum: m, WeightDecay: wd}, func(s *SGD) { s.DecaySteps("w") },
			func(w, b []float32) {
				for i, wi := range w { // DecaySteps' formula, in sgdDecayMomentum's arithmetic
					bi := m*float64(b[i]) + wd*float64(wi)
					b[i] = float32(bi)
					w[i] = float32(float64(wi) - lr*(bi+float64(g[i]))) // no Nesterov: d = b
				}
			}},
	} {
		s, err := NewSGD(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.exchange != nil {
			c.exchange(s)
		}
		w := append([]float32(nil), w0...)
		ref, b := append([]float32(nil), w0...), make([]float32, n)
		for step := range 3 {
			if err := s.Step([]Param{{Name: "w", Value: w, Grad: g}}, lr); err != nil {
				t.Fatal(err)
			}
			c.ref(ref, b)
			for i := range w {
				if !sameBits(w[i], ref[i]) {
					t.Fatalf("%s step %d: element %d: %v, reference %v", c.name, step, i, w[i], ref[i])
				}
			}
		}
	}
}
