package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/optim"
)

// dgcTestConfig is DGC without warm-up, exact top-k and no clipping; tests
// switch on what they check.
func dgcTestConfig(density float64) Config {
	c := DefaultConfig()
	c.Name = "dgc"
	c.Density = density
	c.DGC.WarmupEpochs = 0
	c.DGC.Sampling = false
	return c
}

// dgcBuild packs tensors of the given sizes (FlatOffset = Offset + flatShift)
// and builds worker 0 of workers.
func dgcBuild(t testing.TB, cfg Config, sizes []int, workers, flatShift int, hyper Hyper) *dgc {
	t.Helper()
	var ts []Tensor
	off := 0
	for i, n := range sizes {
		ts = append(ts, Tensor{Name: fmt.Sprintf("w%d", i), Shape: []int{n / 2, 2}, Offset: off, FlatOffset: off + flatShift, Size: n})
		off += n
	}
	c, err := newDGC(cfg, ts, 0, workers, 7, hyper)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*dgc)
}

// dgcStep compresses a copy of grad at step (2 steps per epoch) and decompresses the worker's own
// payload; it returns a copy of the payload and the decompressed gradient.
func dgcStep(t testing.TB, c *dgc, grad []float32, step int, params []float32) (Payload, []float32) {
	t.Helper()
	info := StepInfo{Step: step, StepsPerEpoch: 2, Workers: c.workers, Params: params}
	p, err := c.Encode(0, slices.Clone(grad), Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	p.Bytes = slices.Clone(p.Bytes)
	p.TensorWire = slices.Clone(p.TensorWire)
	out := make([]float32, len(grad))
	if err := decodeMean(c, Combined{Bytes: [][]byte{p.Bytes}, Workers: 1}, out, info); err != nil {
		t.Fatal(err)
	}
	return p, out
}

func dgcClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-float64(want[i])) > tol {
			t.Fatalf("%s: %v, want %v (index %d)", what, got, want, i)
		}
	}
}

func TestDGCWarmupDensity(t *testing.T) {
	cfg := dgcTestConfig(0.001)
	cfg.DGC.WarmupEpochs = 4
	c := dgcBuild(t, cfg, []int{8}, 1, 0, Hyper{})
	// Paper: 0.25^(e+1) for e = 0..3, i.e. sparsity 75%, 93.75%, 98.4375%,
	// 99.6%, then the steady 0.1%.
	for e, want := range []float64{0.25, 0.0625, 0.015625, 0.00390625, 0.001, 0.001} {
		if got := c.densityAt(StepInfo{Step: 10 * e, StepsPerEpoch: 10}); got != want {
			t.Errorf("paper schedule, epoch %d: density %v, want %v", e, got, want)
		}
		if steady := c.Steady(StepInfo{Step: 10 * e, StepsPerEpoch: 10}); steady != (e >= 4) {
			t.Errorf("epoch %d: Steady %v", e, steady)
		}
	}
	// Reference: coeff = 0.001^(1/5) = 10^-0.6 = 0.251188643; density
	// coeff^(e+1) = 10^(-0.6(e+1)): 0.251188643, 0.0630957344, 0.0158489319,
	// 0.00398107171, then 0.001.
	c.cfg.WarmupSchedule = "reference"
	for e, want := range []float64{0.251188643, 0.0630957344, 0.0158489319, 0.00398107171, 0.001} {
		if got := c.densityAt(StepInfo{Step: 10*e + 9, StepsPerEpoch: 10}); math.Abs(got-want) > 1e-8*want {
			t.Errorf("reference schedule, epoch %d: density %v, want %v", e, got, want)
		}
	}
	// Never below the steady density: with density 0.1 the paper's second
	// epoch (0.0625) is raised to 0.1.
	c.density = 0.1
	c.cfg.WarmupSchedule = "paper"
	if got := c.densityAt(StepInfo{Step: 10, StepsPerEpoch: 10}); got != 0.1 {
		t.Errorf("paper schedule below the density: %v, want 0.1", got)
	}
	// Stages: one warm-up epoch of 8 steps, density 0.001: the paper's four
	// densities above 0.001 (0.25, 0.0625, 0.015625, 0.00390625) two steps
	// each, then 0.001. With density 0.1 only 0.25 is above it: the whole
	// warm-up at 25%.
	c.density, c.cfg.WarmupSchedule, c.cfg.WarmupEpochs = 0.001, "stages", 1
	for step, want := range []float64{0.25, 0.25, 0.0625, 0.0625, 0.015625, 0.015625, 0.00390625, 0.00390625, 0.001, 0.001} {
		if got := c.densityAt(StepInfo{Step: step, StepsPerEpoch: 8}); got != want {
			t.Errorf("stages schedule, step %d: density %v, want %v", step, got, want)
		}
	}
	c.density = 0.1
	for step, want := range []float64{0.25, 0.25, 0.25, 0.1} {
		if got := c.densityAt(StepInfo{Step: step, StepsPerEpoch: 3}); got != want {
			t.Errorf("stages schedule at density 0.1, step %d: density %v, want %v", step, got, want)
		}
	}
	c.cfg.WarmupSchedule, c.cfg.WarmupEpochs = "paper", 4
	// The payload follows the schedule: 8 elements at 25% in epoch 0 send 2.
	c.density = 0.001
	p, _ := dgcStep(t, c, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 0, nil)
	if p.Wire != 4+8*2 {
		t.Errorf("epoch 0 payload %d bytes, want %d (2 of 8 elements)", p.Wire, 4+8*2)
	}
}

// The 4-element cases below use m = 0.5, density 0.25 (k = 1) and binary
// fractions, so float32 arithmetic is exact and the tolerance is zero.
var dgcHandGrads = [][]float32{{1, -2, 0.5, 0.25}, {1, 1, 1, 1}, {0, 0, 0, -4}}

func TestDGCMomentumCorrection(t *testing.T) {
	cases := []struct {
		name     string
		nesterov bool
		sent     [][]float32 // decompressed gradient per step (one worker)
		u, v     [][]float32
	}{
		{
			// u = m*u + g; v += u; the largest |v| is sent and masked in u and v.
			// step 0: u = g0 = [1 -2 .5 .25], v = u; send v[1] = -2;
			//         v = [1 0 .5 .25], u = [1 0 .5 .25].
			// step 1: u = .5u + 1 = [1.5 1 1.25 1.125]; v += u = [2.5 1 1.75 1.375];
			//         send v[0] = 2.5; v = [0 1 1.75 1.375], u = [0 1 1.25 1.125].
			// step 2: u = .5u + [0 0 0 -4] = [0 .5 .625 -3.4375];
			//         v += u = [0 1.5 2.375 -2.0625]; send v[2] = 2.375;
			//         v = [0 1.5 0 -2.0625], u = [0 .5 0 -3.4375].
			name: "momentum",
			sent: [][]float32{{0, -2, 0, 0}, {2.5, 0, 0, 0}, {0, 0, 2.375, 0}},
			u:    [][]float32{{1, 0, 0.5, 0.25}, {0, 1, 1.25, 1.125}, {0, 0.5, 0, -3.4375}},
			v:    [][]float32{{1, 0, 0.5, 0.25}, {0, 1, 1.75, 1.375}, {0, 1.5, 0, -2.0625}},
		},
		{
			// Nesterov: u = (u+g)*m; v += u + g.
			// step 0: u = .5*g0 = [.5 -1 .25 .125]; v = u + g0 = [1.5 -3 .75 .375];
			//         send v[1] = -3; v = [1.5 0 .75 .375], u = [.5 0 .25 .125].
			// step 1: u = (u+1)*.5 = [.75 .5 .625 .5625];
			//         v += u + 1 = [3.25 1.5 2.375 1.9375]; send v[0] = 3.25;
			//         v = [0 1.5 2.375 1.9375], u = [0 .5 .625 .5625].
			// step 2: u = (u+[0 0 0 -4])*.5 = [0 .25 .3125 -1.71875];
			//         v += u + g = [0 1.75 2.6875 -3.78125]; send v[3] = -3.78125;
			//         v = [0 1.75 2.6875 0], u = [0 .25 .3125 0].
			name: "nesterov", nesterov: true,
			sent: [][]float32{{0, -3, 0, 0}, {3.25, 0, 0, 0}, {0, 0, 0, -3.78125}},
			u:    [][]float32{{0.5, 0, 0.25, 0.125}, {0, 0.5, 0.625, 0.5625}, {0, 0.25, 0.3125, 0}},
			v:    [][]float32{{1.5, 0, 0.75, 0.375}, {0, 1.5, 2.375, 1.9375}, {0, 1.75, 2.6875, 0}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dgcBuild(t, dgcTestConfig(0.25), []int{4}, 1, 0, Hyper{Momentum: 0.5, Nesterov: tc.nesterov})
			if !c.Needs().OwnsMomentum {
				t.Fatal("momentum correction must own the momentum")
			}
			for s, g := range dgcHandGrads {
				_, out := dgcStep(t, c, g, s, nil)
				dgcClose(t, fmt.Sprintf("step %d sent", s), out, tc.sent[s], 0)
				dgcClose(t, fmt.Sprintf("step %d u", s), c.u, tc.u[s], 0)
				dgcClose(t, fmt.Sprintf("step %d v", s), c.v, tc.v[s], 0)
			}
		})
	}
}

func TestDGCFactorMasking(t *testing.T) {
	// Without masking only v is cleared where sent; u keeps its momentum.
	// step 0: u = v = g0 = [1 -2 .5 .25]; send v[1]; v = [1 0 .5 .25], u unchanged.
	// step 1: u = .5u + 1 = [1.5 0 1.25 1.125]; v += u = [2.5 0 1.75 1.375];
	//         send v[0] = 2.5; v = [0 0 1.75 1.375], u = [1.5 0 1.25 1.125].
	// (With masking, TestDGCMomentumCorrection: u = [0 1 1.25 1.125] after step 1.)
	cfg := dgcTestConfig(0.25)
	cfg.DGC.FactorMasking = false
	c := dgcBuild(t, cfg, []int{4}, 1, 0, Hyper{Momentum: 0.5})
	dgcStep(t, c, dgcHandGrads[0], 0, nil)
	dgcClose(t, "step 0 u", c.u, []float32{1, -2, 0.5, 0.25}, 0)
	dgcClose(t, "step 0 v", c.v, []float32{1, 0, 0.5, 0.25}, 0)
	_, out := dgcStep(t, c, dgcHandGrads[1], 1, nil)
	dgcClose(t, "step 1 sent", out, []float32{2.5, 0, 0, 0}, 0)
	dgcClose(t, "step 1 u", c.u, []float32{1.5, 0, 1.25, 1.125}, 0)
	dgcClose(t, "step 1 v", c.v, []float32{0, 0, 1.75, 1.375}, 0)
}

func TestDGCGradientAccumulation(t *testing.T) {
	// Without momentum correction v += g (no momentum, no weight decay: the
	// optimizer keeps both), and there is no u.
	// step 0: v = g0 = [1 -2 .5 .25]; send -2; v = [1 0 .5 .25].
	// step 1: v += 1 = [2 1 1.5 1.25]; send 2; v = [0 1 1.5 1.25].
	cfg := dgcTestConfig(0.25)
	cfg.DGC.MomentumCorrection = false
	c := dgcBuild(t, cfg, []int{4}, 1, 0, Hyper{Momentum: 0.9, WeightDecay: 0.5})
	if c.Needs().OwnsMomentum || c.u != nil {
		t.Fatal("gradient accumulation must leave the momentum to the optimizer")
	}
	params := []float32{8, 8, 8, 8}
	dgcStep(t, c, dgcHandGrads[0], 0, params)
	_, out := dgcStep(t, c, dgcHandGrads[1], 1, params)
	dgcClose(t, "step 1 sent", out, []float32{2, 0, 0, 0}, 0)
	dgcClose(t, "step 1 v", c.v, []float32{0, 1, 1.5, 1.25}, 0)
	if st := c.State(); len(st) != 1 || st["v/w0"] == nil {
		t.Fatalf("state %v: want v/w0 only", st)
	}
}

func TestDGCWeightDecay(t *testing.T) {
	// g += wd*w with w read at the tensor's FlatOffset (2 here), m = 0.5, wd = 0.1.
	// step 0: g = [1 0 0 0] + .1*[1 2 3 4] = [1.1 .2 .3 .4]; u = v = g;
	//         send v[0] = 1.1; v = u = [0 .2 .3 .4].
	// step 1: g = [.1 .2 .3 .4]; u = .5u + g = [.1 .3 .45 .6];
	//         v += u = [.1 .5 .75 1]; send v[3] = 1.
	c := dgcBuild(t, dgcTestConfig(0.25), []int{4}, 1, 2, Hyper{Momentum: 0.5, WeightDecay: 0.1})
	params := []float32{9, 9, 1, 2, 3, 4}
	_, out := dgcStep(t, c, []float32{1, 0, 0, 0}, 0, params)
	dgcClose(t, "step 0 sent", out, []float32{1.1, 0, 0, 0}, 1e-6)
	dgcClose(t, "step 0 u", c.u, []float32{0, 0.2, 0.3, 0.4}, 1e-6)
	_, out = dgcStep(t, c, []float32{0, 0, 0, 0}, 1, params)
	dgcClose(t, "step 1 compensated", c.Compensated(), []float32{0.1, 0.5, 0.75, 1}, 1e-6)
	dgcClose(t, "step 1 sent", out, []float32{0, 0, 0, 1}, 1e-6)
	dgcClose(t, "step 1 u", c.u, []float32{0.1, 0.3, 0.45, 0}, 1e-6)

	if _, err := c.Encode(0, make([]float32, 4), Combined{}, StepInfo{Params: params[:5]}); err == nil {
		t.Error("weight decay with parameters that do not cover the tensor was accepted")
	}

	// Nesterov: u = (u+g)*m, v += u + g. Step 0: g = [1.1 .2 .3 .4];
	// u = .5g = [.55 .1 .15 .2]; v = u + g = [1.65 .3 .45 .6].
	c = dgcBuild(t, dgcTestConfig(0.25), []int{4}, 1, 2, Hyper{Momentum: 0.5, Nesterov: true, WeightDecay: 0.1})
	dgcStep(t, c, []float32{1, 0, 0, 0}, 0, params)
	dgcClose(t, "nesterov compensated", c.Compensated(), []float32{1.65, 0.3, 0.45, 0.6}, 1e-6)
}

// TestDGCWeightDecayPlacement trains one tensor w = [1, -2] for two steps
// of DGC (one worker, density 0.5: one element a step, exact top-k, factor
// masking) and SGD (lr 0.1, m 0.9, wd 0.1), with the gradients g1 = [0.5,
// 0.1], g2 = [0.2, 0.4], under both placements of the weight decay. Worked by
// hand:
//
// velocity (decay in DGC's accumulation, plain optimizer steps):
//
//	1: u = g1 + 0.1w = [0.6, -0.1] = v; send v[0] = 0.6; v = u = [0, -0.1];
//	   w = [1 - 0.06, -2] = [0.94, -2].
//	2: g2 + 0.1w = [0.294, 0.2]; u = 0.9u + that = [0.294, 0.11];
//	   v = [0.294, 0.01]; send v[0]; w = [0.94 - 0.0294, -2] = [0.9106, -2]
//	   (w[1] never decays: it was never selected).
//
// optimizer (DGC accumulates g alone; SGD adds b = 0.9b + 0.1w densely):
//
//	1: u = v = g1 = [0.5, 0.1]; send v[0] = 0.5; v = u = [0, 0.1];
//	   b = [0.1, -0.2]; w = [1 - 0.1(0.1 + 0.5), -2 - 0.1(-0.2)] = [0.94, -1.98].
//	2: u = 0.9u + g2 = [0.2, 0.49]; v = [0.2, 0.59]; send v[1] = 0.59;
//	   b = 0.9b + 0.1w = [0.184, -0.378];
//	   w = [0.94 - 0.0184, -1.98 - 0.1(-0.378 + 0.59)] = [0.9216, -2.0012].
func TestDGCWeightDecayPlacement(t *testing.T) {
	for _, tc := range []struct {
		at   string
		want []float32
	}{
		{DecayAtVelocity, []float32{0.9106, -2}},
		{DecayAtOptimizer, []float32{0.9216, -2.0012}},
	} {
		cfg := dgcTestConfig(0.5)
		cfg.DGC.WeightDecayAt = tc.at
		c := dgcBuild(t, cfg, []int{2}, 1, 0, Hyper{Momentum: 0.9, WeightDecay: 0.1})
		if got := c.Needs().DecayAtOptimizer; got != (tc.at == DecayAtOptimizer) {
			t.Fatalf("%s: Needs().DecayAtOptimizer = %v", tc.at, got)
		}
		sgd, err := optim.NewSGD(optim.Config{Name: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if c.Needs().DecayAtOptimizer {
			sgd.DecaySteps("w0")
		} else {
			sgd.PlainSteps("w0")
		}
		w := []float32{1, -2}
		for step, g := range [][]float32{{0.5, 0.1}, {0.2, 0.4}} {
			_, mean := dgcStep(t, c, g, step, w)
			if err := sgd.Step([]optim.Param{{Name: "w0", Shape: []int{1, 2}, Value: w, Grad: mean}}, 0.1); err != nil {
				t.Fatal(err)
			}
		}
		dgcClose(t, tc.at+": w after two steps", w, tc.want, 1e-6)
	}
}

func TestDGCLocalClipping(t *testing.T) {
	// Two compressed tensors: [3 0 0 0] and [4 0 0 0], L2 norm 5 over both.
	// clip_norm 2: the threshold is 2/sqrt(N), the factor thr/(5+1e-6):
	//   N = 1: thr 2, factor 0.4: [1.2 ...] and [1.6 ...];
	//   N = 4: thr 1, factor 0.2: [0.6 ...] and [0.8 ...].
	// (Per-tensor clipping would give [2 ...] and [2 ...] at N = 1.)
	// clip_norm 100 is above the norm: nothing changes.
	g := []float32{3, 0, 0, 0, 4, 0, 0, 0}
	for _, tc := range []struct {
		clip    float64
		workers int
		want    []float32
	}{
		{2, 1, []float32{1.2, 0, 0, 0, 1.6, 0, 0, 0}},
		{2, 4, []float32{0.6, 0, 0, 0, 0.8, 0, 0, 0}},
		{100, 4, g},
		{0, 4, g},
	} {
		cfg := dgcTestConfig(0.25)
		cfg.DGC.MomentumCorrection = false
		cfg.DGC.ClipNorm = tc.clip
		c := dgcBuild(t, cfg, []int{4, 4}, tc.workers, 0, Hyper{})
		dgcStep(t, c, g, 0, nil)
		dgcClose(t, fmt.Sprintf("clip %v, N=%d", tc.clip, tc.workers), c.Compensated(), tc.want, 1e-5)
	}
}

// dgcSampledCase builds a 9800-element tensor at density 0.01 (k = 98) with
// the sampled threshold: at least 200 samples (1% = 98, but at least 2/0.01 =
// 200) at stride 9800/200 = 49 (odd), so from any offset o < 49 exactly 200
// samples (o + 49·199 <= 9799 < o + 49·200); the threshold is the 2nd largest
// of the 200 sampled magnitudes (ceil(200·0.01) = 2). The bounds are 0.8k =
// 78.4 and 1.3k = 127.4. Momentum correction is off, so v is the gradient.
func dgcSampledCase(t *testing.T) *dgc {
	cfg := dgcTestConfig(0.01)
	cfg.DGC.Sampling = true
	cfg.DGC.MomentumCorrection = false
	c := dgcBuild(t, cfg, []int{9800}, 1, 0, Hyper{})
	p := dgcPlan(9800, 0.01, 0.01)
	if p.whole || p.stride != 49 {
		t.Fatalf("sampling plan %+v", p)
	}
	for o := range 49 {
		if n := p.count(o); n != 200 || p.top(n) != 2 {
			t.Fatalf("offset %d: %d samples, threshold rank %d; want 200, 2", o, n, p.top(n))
		}
	}
	return c
}

func TestDGCSampledThreshold(t *testing.T) {
	t.Run("within bounds", func(t *testing.T) {
		// v is constant on blocks of 49: v[i] = b+1 for block b = i/49 < 200.
		// Whatever the offset o < 49, sample j (at o + 49j) lies in block j:
		// the samples are 1..200 and the threshold is 199. Blocks 198 and 199
		// pass: 98 elements, 9702..9799, within [78.4, 127.4], all sent.
		c := dgcSampledCase(t)
		g := make([]float32, 9800)
		for i := range g {
			g[i] = float32(i/49 + 1)
		}
		for step := range 3 { // three different offsets
			clear(c.v)
			dgcStep(t, c, g, step, nil)
			if len(c.lastIdx) != 98 || c.lastIdx[0] != 9702 || c.lastIdx[97] != 9799 {
				t.Fatalf("step %d: sent %d elements from %v, want 9702..9799", step, len(c.lastIdx), c.lastIdx[:min(3, len(c.lastIdx))])
			}
		}
	})
	t.Run("ties fall back to exact top-k", func(t *testing.T) {
		// v = 1 everywhere but 2 at the 30 positions 7+300m. The samples hold
		// 1s and perhaps some 2s: with fewer than two 2s sampled the threshold
		// is 1 and all 9800 pass; with two or more it is 2, 30 pass (< 78.4)
		// and it is lowered to 1.6, 1.28, 1.024, 0.82, where all pass. 9800 >
		// 127.4: the exact top-98 among them: the 30 twos and the 68
		// lowest-index ones (0..68 without 7).
		c := dgcSampledCase(t)
		g := make([]float32, 9800)
		for i := range g {
			g[i] = 1
		}
		var want []int32
		for m := range 30 {
			g[7+300*m] = 2
		}
		for i := int32(0); len(want) < 98; i++ {
			if i <= 68 || (i-7)%300 == 0 {
				want = append(want, i)
			}
		}
		dgcStep(t, c, g, 0, nil)
		if !slices.Equal(c.lastIdx, want) {
			t.Fatalf("sent %v, want %v", c.lastIdx, want)
		}
	})
	t.Run("lowered into bounds", func(t *testing.T) {
		// 1.25 at two sampled positions (o and o+49, o the step's offset), 1.1
		// at 98 positions that are never sampled (i-o not a multiple of 49),
		// 0.5 elsewhere. Threshold 1.25 (2nd largest sample): 2 pass (< 78.4);
		// lowered once to 1.25*0.8 = 1: 100 pass, within bounds, all sent.
		c := dgcSampledCase(t)
		o := c.sampleOffset(5, 0, 49)
		g := make([]float32, 9800)
		for i := range g {
			g[i] = 0.5
		}
		g[o], g[o+49] = 1.25, 1.25
		for i, n := o+1, 0; n < 98; i++ {
			if (i-o)%49 != 0 {
				g[i] = 1.1
				n++
			}
		}
		dgcStep(t, c, g, 5, nil)
		if len(c.lastIdx) != 100 {
			t.Fatalf("sent %d elements, want 100", len(c.lastIdx))
		}
	})
	t.Run("retries exhausted", func(t *testing.T) {
		// 10 at the two sampled positions o and o+49, 1 elsewhere. Threshold
		// 10: 2 pass; lowered ten times to 10*0.8^10 = 1.07 > 1, still 2 pass;
		// then what passes is sent: 2 elements.
		c := dgcSampledCase(t)
		o := c.sampleOffset(3, 0, 49)
		g := make([]float32, 9800)
		for i := range g {
			g[i] = 1
		}
		g[o], g[o+49] = 10, 10
		dgcStep(t, c, g, 3, nil)
		if !slices.Equal(c.lastIdx, []int32{int32(o), int32(o + 49)}) {
			t.Fatalf("sent %v, want [%d %d]", c.lastIdx, o, o+49)
		}
	})
}

func TestDGCExactAmongMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s dgcSelect
	for trial := range 50 {
		n := 1 + rng.IntN(300)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.IntN(9) - 4) // many ties and both signs
		}
		var src []int32
		for i := range n {
			if rng.IntN(3) > 0 {
				src = append(src, int32(i))
			}
		}
		k := rng.IntN(len(src) + 2)
		// Reference: sort the candidates by magnitude, ties by index.
		ref := slices.Clone(src)
		slices.SortStableFunc(ref, func(a, b int32) int {
			return -cmpAbs(v[a], v[b])
		})
		want := ref[:min(k, len(ref))]
		slices.Sort(want)
		if got := s.exactAmong(v, src, k); !slices.Equal(got, want) {
			t.Fatalf("trial %d: top-%d of %v at %v: %v, want %v", trial, k, v, src, got, want)
		}
	}
}

func cmpAbs(a, b float32) int {
	x, y := math.Abs(float64(a)), math.Abs(float64(b))
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func TestDGCSmallTensorIsExact(t *testing.T) {
	// 150 elements at density 0.01 are fewer than the minimum sample
	// ceil(2/0.01) = 200: no sampling, the exact top-2 (ceil(1.5)).
	if p := dgcPlan(150, 0.01, 0.01); !p.whole {
		t.Fatalf("plan %+v: want all 150 elements", p)
	}
	cfg := dgcTestConfig(0.01)
	cfg.DGC.Sampling = true
	cfg.DGC.MomentumCorrection = false
	c := dgcBuild(t, cfg, []int{150}, 1, 0, Hyper{})
	g := make([]float32, 150)
	g[10], g[20], g[30] = 3, -5, 4
	dgcStep(t, c, g, 0, nil)
	if !slices.Equal(c.lastIdx, []int32{20, 30}) {
		t.Fatalf("sent %v, want [20 30]", c.lastIdx)
	}
}

func TestDGCNarrowIndices(t *testing.T) {
	// Same tensors as TestDGCPayload with 16-bit indices: per tensor 4 + 6k
	// bytes (fp32 values) = 16 and 22; the decoded gradient is unchanged.
	g := []float32{0, 5, 0, 0, 0, 0, -1.0 / 3, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 7, -8}
	cfg := dgcTestConfig(0.25)
	cfg.DGC.MomentumCorrection = false
	cfg.NarrowIndices = true
	c := dgcBuild(t, cfg, []int{8, 12}, 2, 0, Hyper{})
	p, out := dgcStep(t, c, g, 0, nil)
	if !slices.Equal(p.TensorWire, []int64{16, 22}) || p.Wire != 38 || len(p.Bytes) != 38 {
		t.Fatalf("wire %d, per tensor %v, %d bytes; want 38, [16 22]", p.Wire, p.TensorWire, len(p.Bytes))
	}
	// Tensor 0: count 2, indices 1 and 6 as uint16, then two float32 values.
	if want := []byte{2, 0, 0, 0, 1, 0, 6, 0}; !bytes.Equal(p.Bytes[:8], want) {
		t.Fatalf("payload starts % x, want % x", p.Bytes[:8], want)
	}
	dgcClose(t, "decompressed", out, g, 0)
}

func TestDGCPayload(t *testing.T) {
	// Tensors of 8 and 12 elements at density 0.25: k = 2 and 3. Per tensor:
	// count (4 bytes) + k int32 indices + k values: fp32 4+8k = 20 and 28
	// bytes; fp16 4+6k = 16 and 22 bytes.
	g := []float32{0, 5, 0, 0, 0, 0, -1.0 / 3, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 7, -8}
	for _, fp16 := range []bool{false, true} {
		cfg := dgcTestConfig(0.25)
		cfg.FP16Values = fp16
		cfg.DGC.MomentumCorrection = false
		c := dgcBuild(t, cfg, []int{8, 12}, 2, 0, Hyper{})
		p, out := dgcStep(t, c, g, 0, nil)
		want := []int64{20, 28}
		if fp16 {
			want = []int64{16, 22}
		}
		if !slices.Equal(p.TensorWire, want) || p.Wire != want[0]+want[1] || p.Wire != int64(len(p.Bytes)) {
			t.Fatalf("fp16 %v: wire %d, per tensor %v, %d bytes; want %v", fp16, p.Wire, p.TensorWire, len(p.Bytes), want)
		}
		var head [12]byte
		binary.LittleEndian.PutUint32(head[0:], 2) // tensor 0: 2 values at 1 and 6
		binary.LittleEndian.PutUint32(head[4:], 1)
		binary.LittleEndian.PutUint32(head[8:], 6)
		if !bytes.Equal(p.Bytes[:12], head[:]) {
			t.Fatalf("fp16 %v: payload starts % x, want % x", fp16, p.Bytes[:12], head)
		}
		third := float32(-1.0 / 3)
		if fp16 {
			third = F32FromF16(F16FromF32(third)) // -0.33325195
		}
		dgcClose(t, fmt.Sprintf("fp16 %v: decompressed", fp16), out,
			[]float32{0, 5, 0, 0, 0, 0, third, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 7, -8}, 0)
		// The fp16 rounding error stays in v: -1/3 - (-0.33325195) = -8.1e-5.
		if got, want := c.v[6], float32(-1.0/3)-third; got != want {
			t.Fatalf("fp16 %v: residual at 6 is %v, want %v", fp16, got, want)
		}

		// Two workers: the mean of the scatter-added payloads. The second
		// worker's payload is the first one's with its own values: same
		// indices, v = 2g, so the mean is 1.5 times the first.
		c2 := dgcBuild(t, cfg, []int{8, 12}, 2, 0, Hyper{})
		g2 := slices.Clone(g)
		for i := range g2 {
			g2[i] *= 2
		}
		p2, _ := dgcStep(t, c2, g2, 0, nil)
		mean := make([]float32, len(g))
		if err := decodeMean(c, Combined{Bytes: [][]byte{p.Bytes, p2.Bytes}, Workers: 2}, mean, StepInfo{}); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			out[i] *= 1.5
		}
		dgcClose(t, fmt.Sprintf("fp16 %v: mean of two", fp16), mean, out, 1e-6)

		bad := slices.Clone(p.Bytes)
		binary.LittleEndian.PutUint32(bad[4:], 8) // index 8 of an 8-element tensor
		if err := decodeMean(c, Combined{Bytes: [][]byte{bad}, Workers: 1}, mean, StepInfo{}); err == nil {
			t.Errorf("fp16 %v: out-of-range index accepted", fp16)
		}
		if err := decodeMean(c, Combined{Bytes: [][]byte{p.Bytes[:len(p.Bytes)-1]}, Workers: 1}, mean, StepInfo{}); err == nil {
			t.Errorf("fp16 %v: truncated payload accepted", fp16)
		}
	}
}

// dgcLongRun is a config with every technique on: sampling, warm-up over 2
// epochs of 2 steps, clipping, Nesterov and weight decay.
func dgcLongRun(t *testing.T) (*dgc, func(step int) []float32, []float32) {
	cfg := DefaultConfig()
	cfg.Name = "dgc"
	cfg.Density = 0.01
	cfg.DGC.WarmupEpochs = 2
	cfg.DGC.ClipNorm = 50
	c := dgcBuild(t, cfg, []int{3000, 5000}, 4, 0, Hyper{Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4})
	params := make([]float32, 8000)
	for i := range params {
		params[i] = float32(math.Cos(float64(i)))
	}
	grad := func(step int) []float32 {
		rng := rand.New(rand.NewPCG(uint64(step), 9))
		g := make([]float32, 8000)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		return g
	}
	return c, grad, params
}

func TestDGCResumeEqualsUninterrupted(t *testing.T) {
	a, grad, params := dgcLongRun(t)
	b, _, _ := dgcLongRun(t)
	var want []Payload
	for s := range 6 {
		p, _ := dgcStep(t, a, grad(s), s, params)
		want = append(want, p)
	}
	for s := range 3 {
		dgcStep(t, b, grad(s), s, params)
	}
	c, _, _ := dgcLongRun(t)
	if err := c.SetState(b.State()); err != nil {
		t.Fatal(err)
	}
	for s := 3; s < 6; s++ {
		p, _ := dgcStep(t, c, grad(s), s, params)
		if !bytes.Equal(p.Bytes, want[s].Bytes) {
			t.Fatalf("step %d: resumed payload differs from the uninterrupted run's", s)
		}
	}
	// Warm-up shows in the payload: epoch 0 (steps 0-1) sends at 25%, epoch 1
	// at 6.25%, epoch 2 at the 1% density: about 25x less than epoch 0 (the
	// sampled counts may be anywhere in [0.8k, 1.3k]).
	if want[0].Wire < 10*want[4].Wire {
		t.Errorf("epoch 0 payload %d bytes vs steady %d: no warm-up", want[0].Wire, want[4].Wire)
	}

	st := b.State()
	delete(st, "u/w1")
	st["u/w9"] = make([]float32, 5000)
	if err := c.SetState(st); err == nil || !strings.Contains(err.Error(), "u/w1") {
		t.Errorf("SetState with a wrong name: %v", err)
	}
}

func TestDGCSamplingIsReproducible(t *testing.T) {
	a, _, _ := dgcLongRun(t)
	b, _, _ := dgcLongRun(t)
	// Same (seed, worker, step, tensor), same offset; the step changes it.
	differs := false
	for s := range 20 {
		oa, ob := a.sampleOffset(s, 1, 49), b.sampleOffset(s, 1, 49)
		if oa != ob {
			t.Fatalf("step %d: offsets %d and %d", s, oa, ob)
		}
		differs = differs || oa != a.sampleOffset(s+1, 1, 49)
	}
	if !differs {
		t.Error("the offset does not depend on the step")
	}
}

func TestDGCConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		key  string
	}{
		{func(c *Config) { c.Density = 1.5 }, "compress.density"},
		{func(c *Config) { c.DGC.SampleRatio = 0 }, "compress.dgc.sample_ratio"},
		{func(c *Config) { c.DGC.SampleRatio = 1.01 }, "compress.dgc.sample_ratio"},
		{func(c *Config) { c.DGC.WarmupSchedule = "linear" }, "compress.dgc.warmup_schedule"},
		{func(c *Config) { c.DGC.WarmupEpochs = -1 }, "compress.dgc.warmup_epochs"},
		{func(c *Config) { c.DGC.ClipNorm = -1 }, "compress.dgc.clip_norm"},
		{func(c *Config) { c.DGC.WeightDecayAt = "gradient" }, "compress.dgc.weight_decay_at"},
		{func(c *Config) { c.DGC.WeightDecayAt, c.DGC.MomentumCorrection = DecayAtOptimizer, false }, "compress.dgc.weight_decay_at"},
	} {
		cfg := dgcTestConfig(0.01)
		tc.edit(&cfg)
		_, err := newDGC(cfg, []Tensor{{Name: "w", Size: 10}}, 0, 1, 0, Hyper{})
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: error %v", tc.key, err)
		}
	}
}

func TestDGCStepDoesNotAllocate(t *testing.T) {
	c, grad, params := dgcLongRun(t)
	g := grad(0)
	out := make([]float32, len(g))
	all := make([][]byte, 1)
	info := StepInfo{Step: 100, StepsPerEpoch: 2, Workers: 4, Params: params}
	s := newSender("dgc", c, len(out))
	step := func() {
		p, err := c.Encode(0, g, Combined{}, info)
		if err != nil {
			t.Fatal(err)
		}
		all[0] = p.Bytes
		if err := s.Decompress(Combined{Bytes: all, Workers: 1}, out, info); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		step()
	}
	if n := testing.AllocsPerRun(10, step); n > 0 {
		t.Errorf("%v allocations per warm step", n)
	}
}

// BenchmarkDGC measures compress + decompress on one worker for one tensor of
// n elements at density 0.001, steady state, with momentum correction and
// weight decay: the sampled threshold against the exact top-k. The
// "threshold" case times the sampling and the threshold estimate alone, to
// show that they are a small share of a step. The same Gaussian gradient
// every step keeps the accumulator growing, a harder case than training.
func BenchmarkDGC(b *testing.B) {
	for _, n := range []int{1 << 20, 10 << 20} {
		for _, mode := range []string{"sampling", "exact", "threshold"} {
			b.Run(fmt.Sprintf("n=%dM/%s", n>>20, mode), func(b *testing.B) {
				cfg := dgcTestConfig(0.001)
				cfg.DGC.Sampling = mode != "exact"
				c := dgcBuild(b, cfg, []int{n}, 1, 0, Hyper{Momentum: 0.9, WeightDecay: 1e-4})
				rng := rand.New(rand.NewPCG(3, 4))
				g := make([]float32, n)
				params := make([]float32, n)
				for i := range g {
					g[i] = float32(rng.NormFloat64())
					params[i] = float32(rng.NormFloat64())
				}
				out := make([]float32, n)
				all := make([][]byte, 1)
				info := StepInfo{Workers: 1, Params: params}
				s := newSender("dgc", c, len(out))
				step := func() {
					p, err := c.Encode(0, g, Combined{}, info)
					if err != nil {
						b.Fatal(err)
					}
					all[0] = p.Bytes
					if err := s.Decompress(Combined{Bytes: all, Workers: 1}, out, info); err != nil {
						b.Fatal(err)
					}
				}
				for range 4 {
					step()
				}
				plan := dgcPlan(n, 0.001, cfg.DGC.SampleRatio)
				b.ReportAllocs()
				for b.Loop() {
					if mode == "threshold" {
						vals := c.sel.vals[:0]
						for i := 1; i < n; i += plan.stride {
							vals = append(vals, c.v[i])
						}
						c.sel.vals = vals
						c.sel.sel.kth(vals, plan.top(len(vals)))
						continue
					}
					step()
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
			})
		}
	}
}

// TestDGCPlanCoversTheTensor: the samples reach the end of every sampled
// tensor whatever the offset, at an odd stride of at least 3, and number at
// least the minimum; a tensor whose stride would be 1 is taken whole.
func TestDGCPlanCoversTheTensor(t *testing.T) {
	for _, density := range []float64{0.1, 0.01, 0.001} {
		for _, ratio := range []float64{0.01, 0.1} {
			for n := 1; n < 40000; n = n*5/4 + 1 {
				want := max(int(math.Ceil(float64(n)*ratio)), int(math.Ceil(2/density)))
				p := dgcPlan(n, density, ratio)
				if p.whole {
					if n >= 3*want {
						t.Fatalf("n=%d density %v ratio %v: taken whole, but a stride of %d fits", n, density, ratio, n/want)
					}
					continue
				}
				if p.stride < 3 || p.stride%2 == 0 {
					t.Fatalf("n=%d density %v ratio %v: stride %d, want odd >= 3", n, density, ratio, p.stride)
				}
				for o := range p.stride {
					c := p.count(o)
					last := o + (c-1)*p.stride
					if c < want || last >= n || last < n-p.stride {
						t.Fatalf("n=%d density %v ratio %v offset %d: %d samples, last at %d (want >= %d samples reaching the last %d elements)",
							n, density, ratio, o, c, last, want, p.stride)
					}
				}
			}
		}
	}
}

// TestDGCSampledThresholdSeesTheWholeTensor: 3000 elements at density 0.001
// (k = 3) with sample ratio 0.01 need at least 2/0.001 = 2000 samples, a
// stride of 1. Two values of 1e6 in the first 2000 elements and 1.0 in the
// last 1000 (1e-3 elsewhere): a threshold from the first 2000 would be 1e6,
// pass 2 (< 0.8k), and stay above 1 through all ten lowerings (1e6·0.8^10 =
// 1.07e5), sending 2 elements. The whole tensor gives the exact top-3: both
// 1e6 and the first 1.0 (index 2000, ties to the lowest index).
func TestDGCSampledThresholdSeesTheWholeTensor(t *testing.T) {
	cfg := dgcTestConfig(0.001)
	cfg.DGC.Sampling = true
	cfg.DGC.SampleRatio = 0.01
	cfg.DGC.MomentumCorrection = false
	c := dgcBuild(t, cfg, []int{3000}, 1, 0, Hyper{})
	g := make([]float32, 3000)
	for i := range g {
		g[i] = 1e-3
		if i >= 2000 {
			g[i] = 1
		}
	}
	g[500], g[1500] = 1e6, -1e6
	dgcStep(t, c, g, 0, nil)
	if want := []int32{500, 1500, 2000}; !slices.Equal(c.lastIdx, want) {
		t.Fatalf("sent %v, want %v", c.lastIdx, want)
	}
}

// BenchmarkDGCWorkers measures one step of eight workers' DGC encodes, one
// after the other as the in-process engine runs them, each worker with its
// own gradient and state, over the compressed tensors of LeNet-5 (sampling
// strides 5 and 23, one tensor taken whole) and of the MLP (strides 99 and 65): the
// per-step cost DGC adds to a simulated 8-worker step. Paper defaults
// (sampled threshold, momentum correction and factor masking), density
// 0.001, weight decay.
func BenchmarkDGCWorkers(b *testing.B) {
	for _, m := range []struct {
		name  string
		sizes []int
	}{{"lenet5", []int{2400, 48000, 10080}}, {"mlp", []int{401408, 131072}}} {
		for _, loops := range []string{"vector", "go"} {
			b.Run(m.name+"/"+loops, func(b *testing.B) {
				if loops == "vector" && !dgcVector {
					b.Skip("this CPU runs the Go loops only")
				}
				if loops == "go" {
					defer func(was bool) { dgcVector = was }(dgcVector)
					dgcVector = false
				}
				benchDGCWorkers(b, m.sizes)
			})
		}
	}
}

// BenchmarkDGCStateFloor times the least work any DGC encode with momentum
// correction does a step: each worker's u = m*u + g and v += u (reading g, u
// and v, writing u and v: 20 bytes a parameter), nothing else (no weight
// decay, no selection, no encoding), for eight workers with the MLP's 535,818
// parameters each, four on each of two goroutines as the engine's two
// replicas run them. Compared with the step of `gradwire bench --engine
// --model mlp --scenario 8/2/none`, it bounds from below what DGC can add to
// that step while it keeps the paper's float32 state per worker.
func BenchmarkDGCStateFloor(b *testing.B) {
	const workers, n = 8, 401408 + 131072 + 3338
	rng := rand.New(rand.NewPCG(3, 4))
	state := make([][3][]float32, workers) // g, u, v
	for w := range state {
		for j := range state[w] {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
			state[w][j] = s
		}
	}
	h := Hyper{Momentum: 0.9}
	var wg sync.WaitGroup
	for b.Loop() {
		for half := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, s := range state[half*workers/2 : (half+1)*workers/2] {
					momentumAccumulate(s[0], nil, s[1], s[2], 1, h)
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(workers*n*20)/1e6, "MB/step")
}

// benchDGCWorkers encodes steps of eight DGC workers on tensors of the sizes.
func benchDGCWorkers(b *testing.B, sizes []int) {
	cfg := dgcTestConfig(0.001)
	cfg.DGC.Sampling = true
	var cs []*dgc
	for range 8 {
		cs = append(cs, dgcBuild(b, cfg, sizes, 8, 0, Hyper{Momentum: 0.9, WeightDecay: 5e-4}))
	}
	n := cs[0].flatEnd()
	rng := rand.New(rand.NewPCG(1, 2))
	params := make([]float32, n)
	for i := range params {
		params[i] = float32(rng.NormFloat64())
	}
	grads := make([][]float32, len(cs))
	for w := range grads {
		grads[w] = make([]float32, n)
		for i := range grads[w] {
			grads[w][i] = float32(rng.NormFloat64())
		}
	}
	step := 0
	for b.Loop() {
		for w, c := range cs {
			info := StepInfo{Step: step, StepsPerEpoch: 1 << 20, Workers: len(cs), Params: params}
			if _, err := c.Encode(0, grads[w], Combined{}, info); err != nil {
				b.Fatal(err)
			}
		}
		step++
	}
}

// TestDGCDecodeFlatMatchesDecompress checks the mean written straight into
// the flat gradient against Decompress into the packed buffer and the copy
// out of it, bit for bit: four workers whose selections overlap (each index
// sent by one to four workers), sums that cancel to zero, float16 values and
// narrow indices; the flat positions outside the compressed tensors keep
// what they held; a damaged payload is an error.
func TestDGCDecodeFlatMatchesDecompress(t *testing.T) {
	for _, fp16 := range []bool{false, true} {
		cfg := dgcTestConfig(0.05)
		cfg.FP16Values, cfg.NarrowIndices = fp16, true
		const workers, shift = 4, 3
		sizes := []int{200, 64, 1000}
		rng := rand.New(rand.NewPCG(11, 12))
		var payloads [][]byte
		var c *dgc
		for w := range workers {
			c = dgcBuild(t, cfg, sizes, workers, shift, Hyper{})
			grad := make([]float32, c.flatEnd()+shift)
			for i := range grad {
				// Few distinct magnitudes: the workers pick many of the same
				// indices, some with opposite signs.
				grad[i] = float32(rng.IntN(9)-4) * 0.5
			}
			grad[shift+7] = float32(w%2*2-1) * 100 // sent by all, summing to 0
			p, err := c.Encode(0, grad[shift:], Combined{}, StepInfo{Step: 0, StepsPerEpoch: 1, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, slices.Clone(p.Bytes))
		}
		last := Combined{Bytes: payloads, Workers: workers}
		info := StepInfo{Step: 0, StepsPerEpoch: 1, Workers: workers}
		packed := make([]float32, len(c.v))
		if err := decodeMean(c, last, packed, info); err != nil {
			t.Fatal(err)
		}
		flat := make([]float32, c.flatEnd()+5)
		for i := range flat {
			flat[i] = -1 // left alone outside the tensors
		}
		for range 2 { // twice: the marks are cleared between calls
			if ok, err := c.decodeFlat(last, flat, info); !ok || err != nil {
				t.Fatalf("fp16 %v: decodeFlat: %v, %v", fp16, ok, err)
			}
			for i, x := range flat {
				want := float32(-1)
				if i >= shift && i < shift+len(packed) {
					want = packed[i-shift]
				}
				if math.Float32bits(x) != math.Float32bits(want) {
					t.Fatalf("fp16 %v: flat[%d] = %v, want %v", fp16, i, x, want)
				}
			}
		}
		if flat[shift+7] != 0 {
			t.Fatalf("fp16 %v: the cancelling entry is %v", fp16, flat[shift+7])
		}
		senders := make([]int, len(packed)) // how many workers sent each index
		for _, b := range payloads {
			one := make([]float32, len(packed))
			if err := c.DecodeAdd(Payload{Bytes: b}, one, info); err != nil {
				t.Fatal(err)
			}
			for i, x := range one {
				if x != 0 {
					senders[i]++
				}
			}
		}
		if slices.Max(senders) != workers || senders[7] != workers {
			t.Fatalf("fp16 %v: at most %d workers sent an index (index 7: %d), want overlaps of %d", fp16, slices.Max(senders), senders[7], workers)
		}
		bad := slices.Clone(payloads)
		bad[2] = bad[2][:len(bad[2])-1]
		if _, err := c.decodeFlat(Combined{Bytes: bad, Workers: workers}, flat, info); err == nil || !strings.Contains(err.Error(), "worker 2") {
			t.Fatalf("fp16 %v: damaged payload: %v", fp16, err)
		}
		if _, err := c.decodeFlat(Combined{Bytes: payloads[:3], Workers: workers}, flat, info); err == nil {
			t.Fatalf("fp16 %v: 3 payloads for 4 workers accepted", fp16)
		}
	}
}

// BenchmarkDGCDecode decodes the mean of eight workers' payloads on the MLP's
// tensors (density 0.001) the two ways the exchange can: into the packed
// buffer and copied into the flat gradient ("packed"), or straight into the
// flat gradient ("flat", decodeFlat).
func BenchmarkDGCDecode(b *testing.B) {
	cfg := dgcTestConfig(0.001)
	cfg.DGC.Sampling = true
	const workers = 8
	sizes := []int{401408, 131072}
	rng := rand.New(rand.NewPCG(3, 4))
	var payloads [][]byte
	var c *dgc
	for range workers {
		c = dgcBuild(b, cfg, sizes, workers, 0, Hyper{Momentum: 0.9})
		grad := make([]float32, c.flatEnd())
		for i := range grad {
			grad[i] = float32(rng.NormFloat64())
		}
		p, err := c.Encode(0, grad, Combined{}, StepInfo{Step: 0, StepsPerEpoch: 1, Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
		payloads = append(payloads, slices.Clone(p.Bytes))
	}
	last := Combined{Bytes: payloads, Workers: workers}
	info := StepInfo{Step: 0, StepsPerEpoch: 1, Workers: workers}
	grad := make([]float32, c.flatEnd())
	b.Run("packed", func(b *testing.B) {
		s := newSender("dgc", c, len(c.v))
		out := make([]float32, len(c.v))
		for b.Loop() {
			if err := s.Decompress(last, out, info); err != nil {
				b.Fatal(err)
			}
			for _, t := range c.tensors {
				copy(grad[t.FlatOffset:t.FlatOffset+t.Size], out[t.Offset:t.Offset+t.Size])
			}
		}
	})
	b.Run("flat", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.decodeFlat(last, grad, info); err != nil {
				b.Fatal(err)
			}
		}
	})
}
