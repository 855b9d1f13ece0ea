package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// dgcSampledReference is DGC's sampled selection written out the direct way,
// after accumulate: threshold from the samples of the accumulated v, every
// element checked against it, then the bounds (the reference
// implementation's order of work).
func dgcSampledReference(s *dgcSelect, v []float32, k int, p dgcSampling, offset int) []int32 {
	var vals []float32
	for i := offset; i < len(v); i += p.stride {
		vals = append(vals, v[i])
	}
	thr, _ := s.sel.kth(vals, p.top(len(vals)))
	for try := 0; ; try++ {
		pass := s.atLeast(v, thr)
		switch {
		case float64(len(pass)) > dgcUpper*float64(k):
			return s.exactAmong(v, pass, k)
		case float64(len(pass)) >= dgcLower*float64(k) || try == dgcRetries:
			return pass
		}
		thr = magnitudeKey(math.Float32frombits(thr) * dgcLower)
	}
}

// TestDGCThresholdBeforeAccumulating checks encode's selection (threshold
// from accumulated copies of the samples, then accumulate and check a block
// at a time) against accumulating first and selecting after, for every
// accumulate variant: the same indices and the same momentum and velocity
// bits. Tensors of many equal magnitudes make the threshold retry (too few
// pass) and fall back to the exact top-k (too many pass).
func TestDGCThresholdBeforeAccumulating(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	hypers := []struct {
		hyper Hyper
		mc    bool
	}{
		{Hyper{Momentum: 0.9, WeightDecay: 5e-4}, true},
		{Hyper{Momentum: 0.9, WeightDecay: 5e-4, Nesterov: true}, true},
		{Hyper{Momentum: 0.9}, true},
		{Hyper{Momentum: 0.9, Nesterov: true}, true},
		{Hyper{Momentum: 0.9, WeightDecay: 5e-4}, false},
	}
	for hi, h := range hypers {
		for _, n := range []int{2500, 4099, 70000} {
			for _, ties := range []bool{false, true} {
				name := fmt.Sprintf("hyper %d n %d ties %v", hi, n, ties)
				c := &dgc{cfg: DGCConfig{MomentumCorrection: h.mc, SampleRatio: 0.01}, hyper: h.hyper}
				draw := func() float32 {
					if ties {
						return float32(rng.IntN(5)-2) * 0.25
					}
					return float32(rng.NormFloat64())
				}
				g, w, v := make([]float32, n), make([]float32, n), make([]float32, n)
				var u []float32
				if h.mc {
					u = make([]float32, n)
				}
				for i := range g {
					g[i], w[i], v[i] = draw(), draw(), draw()
					if u != nil {
						u[i] = draw()
					}
				}
				var wd []float32
				if h.mc && h.hyper.WeightDecay != 0 {
					wd = w
				}
				for _, density := range []float64{0.01, 0.001} {
					p := dgcPlan(n, density, 0.01)
					if p.whole {
						continue
					}
					k := sparseK(n, density)
					offset := rng.IntN(p.stride)
					scale := float32(0.75)
					u2, v2 := slices.Clone(u), slices.Clone(v)
					var ref dgcSelect
					c.accumulate(g, wd, u2, v2, scale)
					want := slices.Clone(dgcSampledReference(&ref, v2, k, p, offset))

					thr := c.sampleThreshold(g, wd, u, v, scale, p, offset)
					got := c.sel.settle(v, k, thr, c.accumulateSelect(g, wd, u, v, scale, thr))
					if !slices.Equal(got, want) {
						t.Fatalf("%s density %v: selected %d elements, the reference %d (or other ones)", name, density, len(got), len(want))
					}
					for i := range v {
						if math.Float32bits(v[i]) != math.Float32bits(v2[i]) || u != nil && math.Float32bits(u[i]) != math.Float32bits(u2[i]) {
							t.Fatalf("%s density %v: element %d accumulated differently", name, density, i)
						}
					}
				}
			}
		}
	}
}

// TestAppendAtLeast checks the eight-at-a-time test against the plain
// comparison, on lengths with and without a tail, with signed zeros,
// infinities, NaN and thresholds from 0 to the largest magnitude.
func TestAppendAtLeast(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.SmallestNonzeroFloat32}
	for _, n := range []int{0, 1, 7, 8, 9, 64, 1000, 1003} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if rng.IntN(10) == 0 {
				v[i] = special[rng.IntN(len(special))]
			}
		}
		thrs := []uint32{0, 1, magnitudeKey(float32(math.Inf(1))), magnitudeKey(float32(math.NaN())), 1<<31 - 1}
		for range 20 {
			thrs = append(thrs, magnitudeKey(float32(rng.NormFloat64()*2)))
		}
		for _, thr := range thrs {
			want := []int32{-1}
			for i, x := range v {
				if magnitudeKey(x) >= thr {
					want = append(want, int32(i+5))
				}
			}
			if got := appendAtLeast([]int32{-1}, v, thr, 5); !slices.Equal(got, want) {
				t.Fatalf("n %d thr %#x: %v, want %v", n, thr, got, want)
			}
		}
	}
}
