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

// TestDGCEncodeSampledSelection checks encode's sampled selection, on tensors
// sampled with strides of 5 to 35, against accumulating a copy of the state
// and selecting the reference's way: the same indices and the same
// accumulated values, step after step, for every accumulate variant. Tensors
// of five distinct values make the selection fall back to the exact top-k
// among those passing (too many pass); TestDGCSampledThreshold covers the
// retries.
func TestDGCEncodeSampledSelection(t *testing.T) {
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
	sizes := []int{10080, 30720, 70000} // strides 5, 15 and 35 at density 0.001
	rng := rand.New(rand.NewPCG(9, 10))
	for hi, h := range hypers {
		for _, ties := range []bool{false, true} {
			name := fmt.Sprintf("hyper %d ties %v", hi, ties)
			draw := func() float32 {
				if ties {
					return float32(rng.IntN(5)-2) * 0.25
				}
				return float32(rng.NormFloat64())
			}
			cfg := dgcTestConfig(0.001)
			cfg.DGC.Sampling = true
			cfg.DGC.MomentumCorrection = h.mc
			c := dgcBuild(t, cfg, sizes, 4, 0, h.hyper)
			var strides []int
			for _, tn := range c.tensors {
				strides = append(strides, dgcPlan(tn.Size, 0.001, cfg.DGC.SampleRatio).stride)
			}
			if want := []int{5, 15, 35}; !slices.Equal(strides, want) {
				t.Fatalf("strides %v, want %v", strides, want)
			}
			total := c.flatEnd()
			params := make([]float32, total)
			for i := range params {
				params[i] = draw()
			}
			var wd []float32
			if h.mc && h.hyper.WeightDecay != 0 {
				wd = params
			}
			for step := range 4 {
				grad := make([]float32, total)
				for i := range grad {
					grad[i] = draw()
				}
				u, v := slices.Clone(c.u), slices.Clone(c.v)
				var want []int32
				var wantPre []float32
				for ti, tn := range c.tensors {
					lo, hi := tn.Offset, tn.Offset+tn.Size
					var ut, wt []float32
					if u != nil {
						ut = u[lo:hi]
					}
					if wd != nil {
						wt = wd[lo:hi]
					}
					c.accumulate(grad[lo:hi], wt, ut, v[lo:hi], c.clipScale(grad, false))
					p := dgcPlan(tn.Size, 0.001, cfg.DGC.SampleRatio)
					var ref dgcSelect
					for _, j := range dgcSampledReference(&ref, v[lo:hi], sparseK(tn.Size, 0.001), p, c.sampleOffset(step, ti, p.stride)) {
						want = append(want, int32(lo)+j)
						wantPre = append(wantPre, v[lo+int(j)])
						if u != nil && c.cfg.FactorMasking {
							u[lo+int(j)] = 0
						}
					}
				}
				info := StepInfo{Step: step, StepsPerEpoch: 100, Workers: 4, Params: params}
				if _, err := c.Encode(0, grad, Combined{}, info); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(c.lastIdx, want) {
					t.Fatalf("%s step %d: selected %d elements, the reference %d (or other ones)", name, step, len(c.lastIdx), len(want))
				}
				for i := range want {
					if math.Float32bits(c.lastPre[i]) != math.Float32bits(wantPre[i]) {
						t.Fatalf("%s step %d: element %d accumulated to %v, the reference %v", name, step, want[i], c.lastPre[i], wantPre[i])
					}
				}
				for i := range u {
					if math.Float32bits(c.u[i]) != math.Float32bits(u[i]) {
						t.Fatalf("%s step %d: momentum %d is %v, the reference %v", name, step, i, c.u[i], u[i])
					}
				}
			}
		}
	}
}
