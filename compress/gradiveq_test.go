package compress

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// The shared worked-example gradients (docs ALGORITHMS-COMPRESSORS2.md): a
// 2x4 tensor, two workers, two steps.
var (
	gvqStep1 = [][]float32{
		{0.4, -0.2, 0.1, 0.0, -0.6, 0.3, 0.05, -0.1},
		{0.2, -0.1, 0.3, -0.4, -0.5, 0.1, 0.0, 0.2},
	}
	gvqStep2 = [][]float32{
		{0.3, -0.1, 0.2, 0.1, -0.4, 0.2, -0.05, 0.0},
		{0.1, 0.0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1},
	}
)

// gvqConfig compresses every tensor of at least one element from the
// schedule given.
func gvqConfig(k, rank, warmup, sample, comp int, center bool) Config {
	c := DefaultConfig()
	c.Name, c.MinSize = "gradiveq", 1
	c.GradiVeQ = GradiVeQConfig{SliceSize: k, Rank: rank, Lambda: 0.01, WarmupSteps: warmup,
		SampleSteps: sample, CompressSteps: comp, Center: center}
	return c
}

func gvqParam2x4() []optim.Param {
	return []optim.Param{{Name: "w", Kind: optim.KindConv, Shape: []int{2, 4}, Value: make([]float32, 8), Grad: make([]float32, 8)}}
}

func gvqNear(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i, w := range want {
		if math.Abs(float64(got[i])-w) > tol {
			t.Fatalf("%s[%d] = %v, want %v (all: %v)", what, i, got[i], w, got)
		}
	}
}

// TestGradiVeQHandWorked: K = 2 (four slices of the 2x4 tensor), r = 1, no
// centring, one sampling step then one compressed step, two workers.
func TestGradiVeQHandWorked(t *testing.T) {
	cfg := gvqConfig(2, 1, 0, 1, 1, false)
	xs, recs, outs := exchangeSteps(t, cfg, gvqParam2x4(), [][][]float32{gvqStep1, gvqStep2})
	// Step 0 (sampling, dense): summed S = g1 + g2 =
	// [0.6, -0.3 | 0.4, -0.4 | -1.1, 0.4 | 0.05, 0.1]; the mean is S/2.
	gvqNear(t, "step 0 mean", outs[0][0], []float64{0.3, -0.15, 0.2, -0.2, -0.55, 0.2, 0.025, 0.05}, 1e-7)
	// Second moment over the 4 slices: C = (1/4) sum x x^T,
	//   C00 = (0.36 + 0.16 + 1.21 + 0.0025)/4 = 0.433125
	//   C01 = (-0.18 - 0.16 - 0.44 + 0.005)/4 = -0.19375
	//   C11 = (0.09 + 0.16 + 0.16 + 0.01)/4   = 0.105
	// eigenvalues tr/2 +- sqrt(tr^2/4 - det), tr = 0.538125,
	// det = 0.0079390625: 0.5229435, 0.0151815. Top eigenvector
	// (C01, l1 - C00) normalised, largest entry positive:
	//   U = [0.9072536, -0.4205841]
	st := gvqState(xs[0])
	gvqNear(t, "basis", st["basis"][:2], []float64{0.9072535722658908, -0.4205840648559811}, 1e-6)
	if st["rank"][0] != 1 {
		t.Fatalf("rank %v, want 1", st["rank"])
	}
	// Step 1 (compressed): c_n = U^T x per slice of g_n'.
	//   worker 1: [0.3142345, 0.1393923, -0.4470182, -0.0453627]
	//   worker 2: [0.0907254, 0.3076259, -0.2235091,  0.0486670]
	// 4 floats = 16 B each (the slice is 2 floats: ratio K/d = 2).
	gvqNear(t, "worker 1 coefficients", recs[0].floats, []float64{0.3142344781653653, 0.13939230796758006, -0.44701824187755257, -0.045362678613294544}, 1e-6)
	gvqNear(t, "worker 2 coefficients", recs[1].floats, []float64{0.09072535722658909, 0.3076259339099725, -0.22350912093877628, 0.04866695074099098}, 1e-6)
	// Summed in the all-reduce: C = [0.4049598, 0.4470182, -0.6705274, 0.0033043].
	// Decoded mean U C / 2, slice by slice:
	//   [0.1837006, -0.0851598 | 0.2027794, -0.0940044 | -0.3041692, 0.1410066 | 0.0014989, -0.0006949]
	// (true mean [0.2, -0.05, 0.2, -0.1, -0.3, 0.15, 0.025, 0.05]).
	want := []float64{0.18370062864177886, -0.0851598268362786, 0.2027794484057138, -0.09400437461681761,
		-0.3041691726085707, 0.14100656192522643, 0.0014989063457956026, -0.0006948621014284437}
	for w := range outs[1] {
		gvqNear(t, "step 1 mean", outs[1][w], want, 1e-6)
	}
	tr := xs[0].Traffic()
	if tr.Wire != 32+16 || tr.Dense != 64 || tr.SteadyWire != 16 || tr.SteadyDense != 32 || tr.SteadySteps != 1 {
		t.Fatalf("traffic %+v: want 32 B dense + 16 B of coefficients, the second step steady", tr)
	}
}

// TestGradiVeQCentred: K = 4 (the rows), centring on mu, two sampling steps
// (S1 = g1 + g2, S2 = g1' + g2'), then one compressed step on g1, g2 again.
// The rank follows lambda.
func TestGradiVeQCentred(t *testing.T) {
	cfg := gvqConfig(4, 0, 0, 2, 1, true)
	cfg.GradiVeQ.Lambda = 0.2
	xs, recs, outs := exchangeSteps(t, cfg, gvqParam2x4(), [][][]float32{gvqStep1, gvqStep2, gvqStep1})
	// S1 = [0.6, -0.3, 0.4, -0.4 | -1.1, 0.4, 0.05, 0.1]
	// S2 = [0.4, -0.1, 0.4, -0.2 | -0.6, 0.3, 0.05, 0.1]
	// mu = [0.5, -0.2, 0.4, -0.3 | -0.85, 0.35, 0.05, 0.1]
	// Deviations: slice 0 +-[0.1, -0.1, 0, -0.1], slice 1 +-[-0.25, 0.05, 0, 0];
	// C = (1/4) sum d d^T =
	//   [ 0.03625 -0.01125 0 -0.005
	//    -0.01125  0.00625 0  0.005
	//     0        0       0  0
	//    -0.005    0.005   0  0.005 ], trace 0.0475.
	// Top eigenvalue 0.0411156 = 86.6% of the trace: >= 1 - lambda = 80%,
	// so d = 1, U = [0.9296691, -0.3248824, 0, -0.1736858].
	st := gvqState(xs[0])
	if st["rank"][0] != 1 {
		t.Fatalf("rank %v, want 1", st["rank"])
	}
	gvqNear(t, "basis", st["basis"][:4], []float64{0.9296691132939238, -0.32488243325085625, 0, -0.17368576324008939}, 1e-6)
	gvqNear(t, "mu", st["mu"], []float64{0.5, -0.2, 0.4, -0.3, -0.85, 0.35, 0.05, 0.1}, 1e-7)
	// c_n = U^T (g_n - mu/2): worker 1 [0.1458857, -0.1772495], worker 2
	// [-0.0030620, -0.0714119]; summed [0.1428237, -0.2486614];
	// mean (U C + mu)/2.
	gvqNear(t, "worker 1 coefficients", recs[0].floats, []float64{0.1458857458331608, -0.17724953449678021}, 1e-6)
	gvqNear(t, "worker 2 coefficients", recs[1].floats, []float64{-0.0030620148546738335, -0.07141186548924341}, 1e-6)
	gvqNear(t, "step 2 mean", outs[2][1], []float64{0.31638940566804996, -0.12320046062312828, 0.2, -0.16240322436189786,
		-0.5405864116177161, 0.21539286034151192, 0.025, 0.07159447252246083}, 1e-6)

	// lambda 0.1 < 13.4% dropped: a second component is needed.
	cfg.GradiVeQ.Lambda = 0.1
	xs, _, _ = exchangeSteps(t, cfg, gvqParam2x4(), [][][]float32{gvqStep1, gvqStep2})
	if r := gvqState(xs[0])["rank"][0]; r != 2 {
		t.Fatalf("lambda 0.1: rank %v, want 2", r)
	}
}

// gvqTestCompressor builds one compressor over a packed 96-value tensor and
// gives it a basis fitted to random summed gradients (two sampling steps).
func gvqTestCompressor(t *testing.T, rng *rand.Rand, workers int) *gradiVeQ {
	t.Helper()
	cfg := gvqConfig(8, 3, 0, 2, 5, true)
	comp, err := newGradiVeQ(cfg, []Tensor{{Name: "w", Shape: []int{8, 12}, Size: 96}}, 0, workers, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	c := comp.(*gradiVeQ)
	dst := make([]float32, 96)
	for step := range 2 {
		sum := make([]float32, 96)
		for i := range sum {
			sum[i] = float32(rng.NormFloat64())
		}
		if err := c.DecodeMean(Combined{Floats: sum, Workers: workers}, dst, StepInfo{Step: step, Workers: workers}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestGradiVeQLinear: the sum of the workers' coefficients is the coefficients
// of the summed gradient, so decoding the sum gives the projection of the sum.
func TestGradiVeQLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 3
	c := gvqTestCompressor(t, rng, n)
	info := StepInfo{Step: 2, Workers: n}
	total := make([]float32, 96)
	sumCoef := make([]float64, c.payLen)
	for range n {
		g := make([]float32, 96)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
			total[i] += g[i]
		}
		p, err := c.Encode(0, g, Combined{}, info)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Floats) != 12*3 || p.Wire != 4*12*3 {
			t.Fatalf("payload %d floats, %d B; want 12 slices x 3 coefficients", len(p.Floats), p.Wire)
		}
		for i, v := range p.Floats {
			sumCoef[i] += float64(v)
		}
	}
	// The summed gradient encoded as one worker (mu subtracted once).
	p, err := c.Encode(0, total, Combined{}, StepInfo{Step: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range p.Floats {
		if math.Abs(float64(v)-sumCoef[i]) > 1e-5*(1+math.Abs(sumCoef[i])) {
			t.Fatalf("coefficient %d: of the sum %v, sum of the workers' %v", i, v, sumCoef[i])
		}
	}
	// A summed slice equal to mu decodes to exactly mu (coefficients 0).
	zero := make([]float32, c.payLen)
	got := make([]float32, 96)
	if err := c.DecodeMean(Combined{Floats: zero, Workers: 1}, got, StepInfo{Step: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, c.tens[0].mu) {
		t.Fatalf("zero coefficients decode to %v, want mu %v", got, c.tens[0].mu)
	}
}

// TestGradiVeQWorkersAgree: three workers, warm-up, sampling and compressed
// steps over the conformance model: every worker fits the same basis and
// returns the same mean bit for bit, the exchanged mean is the sum of the
// payloads decoded one by one (to float32 rounding), the basis is
// orthonormal, and the counted bytes are the payloads' sizes.
func TestGradiVeQWorkersAgree(t *testing.T) {
	const n, steps = 3, 7
	cfg := gvqConfig(16, 2, 1, 2, 4, true) // step 0 warm-up, 1-2 sampled, 3-6 compressed
	cfg.MinSize = 64                       // small.w (20 values) travels dense
	params := conformanceParams()
	grads := gvqGrads(params, steps, n, 0)
	xs, recs, outs := exchangeSteps(t, cfg, params, grads)
	st0 := gvqState(xs[0])
	for w := 1; w < n; w++ {
		st := gvqState(xs[w])
		for _, k := range []string{"basis", "rank", "mu"} {
			for i, v := range st[k] {
				if math.Float32bits(v) != math.Float32bits(st0[k][i]) {
					t.Fatalf("worker %d's %s[%d] = %v, worker 0's %v", w, k, i, v, st0[k][i])
				}
			}
		}
		for s := range outs {
			for i, v := range outs[s][w] {
				if math.Float32bits(v) != math.Float32bits(outs[s][0][i]) {
					t.Fatalf("step %d: worker %d's mean [%d] = %v, worker 0's %v", s, w, i, v, outs[s][0][i])
				}
			}
		}
	}
	c := xs[0].Compressor().(*gradiVeQ)
	// conv.w (288 values, 18 slices) and fc.w (1200, 75 slices), rank 2.
	if len(c.tens) != 2 || c.tens[0].slices != 18 || c.tens[1].slices != 75 || c.payLen != 2*(18+75) {
		t.Fatalf("%d tensors, payload %d; want conv.w (18 slices) and fc.w (75), 2 coefficients each", len(c.tens), c.payLen)
	}
	for _, tn := range c.tens {
		for a := 0; a < tn.rank; a++ {
			for b := 0; b < tn.rank; b++ {
				var dot float64
				for i := 0; i < tn.k; i++ {
					dot += float64(tn.basis[a*tn.k+i]) * float64(tn.basis[b*tn.k+i])
				}
				if want := map[bool]float64{true: 1, false: 0}[a == b]; math.Abs(dot-want) > 1e-6 {
					t.Fatalf("basis columns %d, %d: dot %v, want %v", a, b, dot, want)
				}
			}
		}
	}
	gvqDecodedOneByOne(t, xs, recs, outs)
	// Bytes: the dense tensors every step; the compressed ones dense on the
	// 3 uncompressed steps and 4 x 2 x 93 coefficients on the 4 others.
	denseTensors := int64(4 * len(xs[0].dbuf))
	packed := int64(4 * len(xs[0].cbuf))
	tr := xs[0].Traffic()
	wantWire := steps*denseTensors + 3*packed + 4*4*2*93
	if tr.Wire != wantWire || tr.SteadySteps != 4 || tr.SteadyWire != 4*(denseTensors+4*2*93) {
		t.Fatalf("traffic %+v: want %d B in all, 4 steady steps of %d B", tr, wantWire, denseTensors+4*2*93)
	}
	if carried := recs[0].reduced; carried != steps*int64(len(xs[0].dbuf))+3*int64(len(xs[0].cbuf))+4*2*93 {
		t.Fatalf("the collective carried %d values", carried)
	}
}

// TestGradiVeQOldStateResumesDense: a checkpoint written before GradiVeQ
// kept state holds none, so a compressor restored from it at a compressed
// step of the schedule sends its dense gradient (and the step is not steady)
// until a sampling phase has ended.
func TestGradiVeQOldStateResumesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := gvqTestCompressor(t, rng, 2)
	fresh, err := newGradiVeQ(gvqConfig(8, 3, 0, 2, 5, true), []Tensor{{Name: "w", Shape: []int{8, 12}, Size: 96}}, 0, 2, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	b := fresh.(*gradiVeQ)
	if err := b.SetState(nil); err != nil {
		t.Fatal(err)
	}
	info := StepInfo{Step: 3, Workers: 2}
	if !a.Steady(info) || b.Steady(info) {
		t.Fatalf("step 3: steady %v with a basis, %v without; want true, false", a.Steady(info), b.Steady(info))
	}
	g := make([]float32, 96)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	pa, _ := a.Encode(0, slices.Clone(g), Combined{}, info)
	pb, err := b.Encode(0, slices.Clone(g), Combined{}, info)
	if err != nil || !slices.Equal(pb.Floats, g) || pb.Wire != 4*96 || pa.Wire != 4*12*3 {
		t.Fatalf("without a basis: %d values, %d B (%v); with one %d B; want the dense 384 B and 144 B", len(pb.Floats), pb.Wire, err, pa.Wire)
	}
	// Restoring a's state instead gives b a's basis: the same coefficients.
	if err := b.SetState(a.State()); err != nil {
		t.Fatal(err)
	}
	pb, err = b.Encode(0, slices.Clone(g), Combined{}, info)
	if err != nil || !slices.Equal(pb.Floats, pa.Floats) {
		t.Fatalf("restored: coefficients %v (%v), want %v", pb.Floats, err, pa.Floats)
	}
}

// TestGradiVeQResumeExact: three workers with error feedback, and with and
// without quantized coefficients, are cut after 2, 3, 5 and 8 of 11 steps
// (warm-up 1, then cycles of 3 sampled and 3 compressed steps: inside the
// first sampling phase after one and two samples, inside a compressed phase,
// inside the second sampling phase), rebuilt from State and Traffic, and go on
// exactly as the uninterrupted workers: every mean bit for bit, the traffic,
// the final state. The state takes the form of its phase and never holds more
// than StateValues.
func TestGradiVeQResumeExact(t *testing.T) {
	const n, steps = 3, 11
	params := conformanceParams()
	grads := gvqGrads(params, steps, n, 100)
	for _, bits := range []int{0, 4} {
		cfg := gvqConfig(16, 0, 1, 3, 3, true)
		cfg.MinSize = 64
		cfg.GradiVeQ.ErrorFeedback, cfg.GradiVeQ.QuantizeBits = true, bits
		want, _, wantOuts := exchangeSteps(t, cfg, params, grads)
		for _, cut := range []int{2, 3, 5, 8} {
			head, _, _ := exchangeSteps(t, cfg, params, grads[:cut])
			form := []string{"pca", "residual", "samples"}
			if cut == 5 {
				form = []string{"basis", "mu", "rank", "residual"}
			}
			c := head[0].Compressor().(*gradiVeQ)
			st := head[0].State()
			total := 0
			for k, v := range st {
				if k != "residual" {
					total += len(v)
				}
			}
			if keys := slices.Sorted(maps.Keys(st)); !slices.Equal(keys, form) || total > c.StateValues() {
				t.Fatalf("bits %d, cut %d: state %v of %d values, want %v of at most %d", bits, cut, keys, total, form, c.StateValues())
			}
			xs := make([]*Exchange, n)
			members, err := dist.NewLocal(n)
			if err != nil {
				t.Fatal(err)
			}
			for w := range xs {
				info := func(step int) StepInfo { return StepInfo{Step: step, StepsPerEpoch: 100, Worker: w, Workers: n} }
				if xs[w], err = NewExchange(cfg, params, members[w], 1, Hyper{}, info); err != nil {
					t.Fatal(err)
				}
				if err := xs[w].SetState(head[w].State()); err != nil {
					t.Fatal(err)
				}
				xs[w].SetTraffic(head[w].Traffic())
			}
			for s := cut; s < steps; s++ {
				var wg sync.WaitGroup
				outs := make([][]float32, n)
				for w := range xs {
					outs[w] = slices.Clone(grads[s][w])
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						if err := xs[w].Exchange(outs[w], s); err != nil {
							t.Error(err)
						}
					}(w)
				}
				wg.Wait()
				for w := range xs {
					for i, v := range outs[w] {
						if math.Float32bits(v) != math.Float32bits(wantOuts[s][w][i]) {
							t.Fatalf("bits %d, cut %d: worker %d step %d: resumed mean [%d] = %v, uninterrupted %v", bits, cut, w, s, i, v, wantOuts[s][w][i])
						}
					}
				}
			}
			for w := range xs {
				if !reflect.DeepEqual(xs[w].Traffic(), want[w].Traffic()) || !reflect.DeepEqual(xs[w].State(), want[w].State()) {
					t.Fatalf("bits %d, cut %d: worker %d ends with other traffic or state", bits, cut, w)
				}
			}
		}
	}
}

// TestGradiVeQStateValues: the state's bound, worked by hand.
func TestGradiVeQStateValues(t *testing.T) {
	build := func(k, rank int, sizes ...int) *gradiVeQ {
		t.Helper()
		var tensors []Tensor
		off := 0
		for _, s := range sizes {
			tensors = append(tensors, Tensor{Name: "w", Shape: []int{s, 1}, Offset: off, Size: s})
			off += s
		}
		comp, err := newGradiVeQ(gvqConfig(k, rank, 0, 2, 2, true), tensors, 0, 2, 0, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		return comp.(*gradiVeQ)
	}
	// LeNet-5's weights (conv1 150, conv2 2400, fc1 48000, fc2 10080, fc3
	// 840) in slices of 768: k = 150 (1 slice), 768 (4, 63, 14, 2 slices).
	// Slices hold 150 + 83 x 768 = 63,894 values; the upper triangles
	// 150 x 151 / 2 + 4 x 768 x 769 / 2 = 1,192,509. Inside a sampling phase:
	// 1 + 3 x (63,894 + 1,192,509) = 3,769,210. Outside: 5 ranks, full-rank
	// bases 150^2 + 4 x 768^2 = 2,381,796, mu 63,894: 2,445,695.
	if got := build(768, 0, 150, 2400, 48000, 10080, 840).StateValues(); got != 3769210 {
		t.Errorf("lenet5: %d values, want 3,769,210", got)
	}
	// Rank 4 shrinks the bases (150 x 4 + 4 x 768 x 4), not the sums.
	if got := build(768, 4, 150, 2400, 48000, 10080, 840).StateValues(); got != 3769210 {
		t.Errorf("lenet5, rank 4: %d values, want 3,769,210", got)
	}
	// One 8-value tensor in slices of 2 (4 slices): inside a sampling phase
	// 1 + 3 x (8 + 3) = 34; outside, 1 + 2 x 2 + 8 = 13. With slices of 8
	// (one slice, rank 1): 1 + 3 x (8 + 36) = 133 inside, 1 + 8 + 8 outside.
	if got := build(2, 0, 8).StateValues(); got != 34 {
		t.Errorf("8 values, K = 2: %d, want 34", got)
	}
	c := build(8, 1, 8)
	if got := c.StateValues(); got != 133 {
		t.Errorf("8 values, K = 8: %d, want 133", got)
	}
	// The basis form at its largest: 17 of the 133 values.
	c.tens[0].setBasis(identityColumns(8, 1))
	c.layout()
	st := c.State()
	if len(st["rank"])+len(st["basis"])+len(st["mu"]) != 17 {
		t.Errorf("basis state %v, want 17 values", st)
	}
}

// TestGradiVeQFloat64Words: the accumulators' float64 values survive the
// three-word form bit for bit, NaN payloads and signed zeros included, and
// the words are small integers (finite, so any encoding carries them).
func TestGradiVeQFloat64Words(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1.5, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1),
		math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000001)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		vals = append(vals, math.Float64frombits(rng.Uint64()))
	}
	w := make([]float32, gvqWords)
	for _, v := range vals {
		gvqPutF64(w, v)
		for _, x := range w {
			if x != float32(uint32(x)) || x >= 1<<22 {
				t.Fatalf("%x: word %v is not an integer below 2^22", math.Float64bits(v), x)
			}
		}
		got, ok := gvqGetF64(w)
		if !ok || math.Float64bits(got) != math.Float64bits(v) {
			t.Fatalf("%x came back as %x (%v)", math.Float64bits(v), math.Float64bits(got), ok)
		}
	}
	for _, bad := range [][]float32{{0.5, 0, 0}, {-1, 0, 0}, {1 << 22, 0, 0}, {0, 0, 1 << 20}, {float32(math.NaN()), 0, 0}} {
		if _, ok := gvqGetF64(bad); ok {
			t.Errorf("words %v accepted", bad)
		}
	}
}

// TestGradiVeQSetStateRefuses: every malformed state is refused naming the
// buffer and what was expected, and leaves the compressor as it was.
func TestGradiVeQSetStateRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := gvqTestCompressor(t, rng, 2) // one tensor of 96, k = 8, rank 3, 12 slices
	good := c.State()
	before := fmt.Sprint(good)
	with := func(k string, v []float32) map[string][]float32 {
		st := maps.Clone(good)
		st[k] = v
		return st
	}
	pca := make([]float32, 3*(96+36))
	for _, tc := range []struct {
		st   map[string][]float32
		want string
	}{
		{with("q", nil), `unknown state buffer "q"`},
		{with("basis", make([]float32, 23)), `state buffer "basis" has 23 values, want 24`},
		{with("mu", make([]float32, 95)), `state buffer "mu" has 95 values, want 96`},
		{with("rank", []float32{3, 3}), `state buffer "rank" has 2 values, want 1`},
		{with("rank", []float32{4}), `state buffer "rank" value 0 (tensor w) is 4, want an integer in [1, 3]`},
		{with("rank", []float32{2.5}), `is 2.5, want an integer in [1, 3]`},
		{with("samples", []float32{1}), `state buffer "rank" next to "samples" and "pca"`},
		{map[string][]float32{"basis": good["basis"], "mu": good["mu"]}, `state buffer "rank" has 0 values, want 1`},
		{map[string][]float32{"samples": {1}, "pca": pca[:10]}, `state buffer "pca" has 10 values, want 396 (132 float64 sums, 3 words each)`},
		{map[string][]float32{"samples": {2}, "pca": pca}, `state buffer "samples" holds 2, want an integer in [1, 1]`},
		{map[string][]float32{"pca": pca}, `state buffer "samples" has 0 values, want 1`},
		{map[string][]float32{"samples": {1}, "pca": append([]float32{0.5}, pca[1:]...)}, `state buffer "pca" value 0 (words [0.5 0 0]) is not a float64`},
	} {
		if err := c.SetState(tc.st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("state %v: error %v, want %q", slices.Sorted(maps.Keys(tc.st)), err, tc.want)
		}
		if fmt.Sprint(c.State()) != before {
			t.Fatalf("a refused state %v changed the compressor", slices.Sorted(maps.Keys(tc.st)))
		}
	}
	// Every value of a valid sampling state is taken.
	if err := c.SetState(map[string][]float32{"samples": {1}, "pca": pca}); err != nil {
		t.Fatal(err)
	}
	if st := c.State(); !slices.Equal(st["pca"], pca) || !slices.Equal(st["samples"], []float32{1}) {
		t.Fatalf("state after restoring samples: %v", slices.Sorted(maps.Keys(st)))
	}
}

// gvqDecodedOneByOne checks the last step of an exchangeSteps run: every
// worker's mean is the same, and is what the workers' payloads (as handed to
// the collective) decode to one by one, summed, over N (to float32 rounding).
func gvqDecodedOneByOne(t *testing.T, xs []*Exchange, recs []*recordingMember, outs [][][]float32) {
	t.Helper()
	c, last, n := xs[0].Compressor().(*gradiVeQ), len(outs)-1, len(xs)
	sum := make([]float32, c.size)
	for _, r := range recs {
		if err := c.DecodeAdd(Payload{Floats: r.floats}, sum, StepInfo{Step: last, Workers: n}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range xs[0].packed {
		for i := 0; i < tn.Size; i++ {
			got, want := outs[last][0][tn.FlatOffset+i], sum[tn.Offset+i]/float32(n)
			for w := 1; w < n; w++ {
				if math.Float32bits(outs[last][w][tn.FlatOffset+i]) != math.Float32bits(got) {
					t.Fatalf("%s[%d]: worker %d's mean differs from worker 0's", tn.Name, i, w)
				}
			}
			if math.Abs(float64(got-want)) > 1e-5 {
				t.Fatalf("%s[%d]: exchanged %v, payloads decoded one by one %v", tn.Name, i, got, want)
			}
		}
	}
}

// gvqGrads is n workers' flat gradients over params for steps steps,
// grads[s][w] drawn from a generator seeded by (s + seed, w).
func gvqGrads(params []optim.Param, steps, n int, seed uint64) [][][]float32 {
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	grads := make([][][]float32, steps)
	for s := range grads {
		grads[s] = make([][]float32, n)
		for w := range grads[s] {
			rng := rand.New(rand.NewPCG(uint64(s)+seed, uint64(w)))
			grads[s][w] = make([]float32, size)
			for i := range grads[s][w] {
				grads[s][w][i] = float32(rng.NormFloat64())
			}
		}
	}
	return grads
}

// gvqState is a worker's fitted basis (rank columns per tensor, one after the
// other), ranks and mu.
func gvqState(x *Exchange) map[string][]float32 {
	st := map[string][]float32{}
	for _, t := range x.Compressor().(*gradiVeQ).tens {
		st["basis"] = append(st["basis"], t.basis...)
		st["rank"] = append(st["rank"], float32(t.rank))
		st["mu"] = append(st["mu"], t.mu...)
	}
	return st
}

func TestGradiVeQConfigProblems(t *testing.T) {
	c := DefaultConfig()
	c.GradiVeQ = GradiVeQConfig{SliceSize: 0, Rank: -1, Lambda: 1, WarmupSteps: -1, SampleSteps: 0, CompressSteps: 0}
	var got []string
	for _, p := range c.Problems() {
		got = append(got, p.Error())
	}
	want := []string{
		`compress.gradiveq.slice_size: 0: must be at least 1`,
		`compress.gradiveq.rank: -1: must be at least 0 (0 = chosen by lambda)`,
		`compress.gradiveq.lambda: 1: must be a fraction in [0, 1)`,
		`compress.gradiveq.warmup_steps: -1: must be at least 0`,
		`compress.gradiveq.sample_steps: 0: must be at least 1`,
		`compress.gradiveq.compress_steps: 0: must be at least 1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%q\nwant\n%q", got, want)
	}
	c.Name = "gradiveq"
	if _, err := newGradiVeQ(c, nil, 0, 1, 0, Hyper{}); err == nil || !strings.Contains(err.Error(), "compress.gradiveq.slice_size") {
		t.Errorf("building from a bad section: %v", err)
	}
}

// gvqQuantized is n workers' compressors over one packed 96-value tensor
// (K = 8, rank 3, compressed from step 2 on) with b-bit coefficients, every
// one fitted to the same two summed gradients, so that they share U and mu.
func gvqQuantized(t *testing.T, bits, n int) []*gradiVeQ {
	t.Helper()
	cfg := gvqConfig(8, 3, 0, 2, 1<<20, true)
	cfg.GradiVeQ.QuantizeBits = bits
	out := make([]*gradiVeQ, n)
	for w := range out {
		comp, err := newGradiVeQ(cfg, []Tensor{{Name: "w", Shape: []int{8, 12}, Size: 96}}, w, n, 9, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		out[w] = comp.(*gradiVeQ)
		rng := rand.New(rand.NewPCG(3, 4))
		dst := make([]float32, 96)
		for step := range 2 {
			sum := make([]float32, 96)
			for i := range sum {
				sum[i] = float32(rng.NormFloat64())
			}
			if err := out[w].DecodeMean(Combined{Floats: sum, Workers: n}, dst, StepInfo{Step: step, Workers: n}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// gvqQuantizedStep runs both rounds of a quantized step on every worker's
// gradient and returns the workers' float32 coefficients (round 0's
// projection), their levels and the levels summed in rank order.
func gvqQuantizedStep(t *testing.T, cs []*gradiVeQ, grads [][]float32, step int) (coef, levels [][]float32, sum []float32) {
	t.Helper()
	n := len(cs)
	info := StepInfo{Step: step, Workers: n}
	maxes := make([][]byte, n)
	for w, c := range cs {
		p, err := c.Encode(0, slices.Clone(grads[w]), Combined{}, info)
		if err != nil {
			t.Fatal(err)
		}
		maxes[w] = slices.Clone(p.Bytes)
		coef = append(coef, slices.Clone(c.pay))
	}
	for w, c := range cs {
		info.Worker = w
		p, err := c.Encode(1, slices.Clone(grads[w]), Combined{Bytes: maxes, Workers: n}, info)
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, slices.Clone(p.Floats))
	}
	sum = make([]float32, len(levels[0]))
	for _, l := range levels {
		for i, v := range l {
			sum[i] += v
		}
	}
	return coef, levels, sum
}

// TestGradiVeQQuantizedUnbiased: over many steps (fresh draws each), the mean
// of the decoded coefficient sum A Q / s is the workers' float32 coefficient
// sum within 5 standard errors: each level has variance at most 1/4, so a
// coefficient sum's standard error is (A/s) sqrt(N / (4 D)). Rounding to the
// nearest level or down would miss it by more (checked, so the tolerance
// can tell), and every level is an integer in [-s, s] whose float32 sum is
// exact. At |c| = A the level is s without a draw.
func TestGradiVeQQuantizedUnbiased(t *testing.T) {
	const n, draws = 3, 20000
	for _, bits := range []int{2, 4} {
		cs := gvqQuantized(t, bits, n)
		s := float64(cs[0].levels)
		rng := rand.New(rand.NewPCG(11, 12))
		grads := make([][]float32, n)
		for w := range grads {
			grads[w] = make([]float32, 96)
			for i := range grads[w] {
				grads[w][i] = float32(rng.NormFloat64())
			}
		}
		var exact, mean []float64
		var scale float64
		var coef0 [][]float32 // the same every step: fixed gradients and basis
		for d := range draws {
			coef, levels, sum := gvqQuantizedStep(t, cs, grads, 2+d)
			if d == 0 {
				coef0 = coef
				exact = make([]float64, len(sum))
				for _, cw := range coef {
					for i, v := range cw {
						exact[i] += float64(v)
						scale = max(scale, math.Abs(float64(v)))
					}
				}
				mean = make([]float64, len(sum))
			}
			if a := float64(cs[0].scales[0]); a != scale {
				t.Fatalf("bits %d: shared scale %v, want the largest |c| %v", bits, a, scale)
			}
			for i, q := range sum {
				var whole int
				for w := range levels {
					l := levels[w][i]
					if l != float32(int(l)) || math.Abs(float64(l)) > s {
						t.Fatalf("bits %d: level %v is not an integer in [-%v, %v]", bits, l, s, s)
					}
					if math.Abs(float64(coef[w][i])) == scale && math.Abs(float64(l)) != s {
						t.Fatalf("bits %d: |c| = A got level %v, want +-%v", bits, l, s)
					}
					whole += int(l)
				}
				if q != float32(whole) {
					t.Fatalf("bits %d: summed levels %v, want %d", bits, q, whole)
				}
				mean[i] += scale * float64(q) / s / draws
			}
		}
		tol := 5 * scale / s * math.Sqrt(n/(4.0*draws))
		var worst, nearest, floor float64
		for i, want := range exact {
			worst = max(worst, math.Abs(mean[i]-want))
			var rn, fl float64
			for w := range n {
				x := s * float64(coef0[w][i]) / scale
				rn += scale / s * math.Round(x)
				fl += scale / s * math.Copysign(math.Floor(math.Abs(x)), x)
			}
			nearest = max(nearest, math.Abs(rn-want))
			floor = max(floor, math.Abs(fl-want))
		}
		t.Logf("bits %d: largest error of the mean %.5f, tolerance %.5f; rounding to nearest %.5f, down %.5f", bits, worst, tol, nearest, floor)
		if worst > tol {
			t.Errorf("bits %d: the mean of %d quantized sums misses the coefficient sum by %v, more than %v", bits, draws, worst, tol)
		}
		if nearest < 2*tol || floor < 2*tol {
			t.Errorf("bits %d: biased rounding misses by %v (nearest), %v (down): the tolerance %v cannot tell", bits, nearest, floor, tol)
		}
	}
}

// gvqPackLevels is the wire form the counted bytes stand for (the type's
// comment): each level plus s in b bits, least significant bit first, bit k
// of the stream being bit k%8 of byte k/8.
func gvqPackLevels(levels []float32, s, b int) []byte {
	out := make([]byte, (b*len(levels)+7)/8)
	for i, l := range levels {
		u := uint(int(l) + s)
		for k := range b {
			if u>>k&1 == 1 {
				out[(i*b+k)/8] |= 1 << ((i*b + k) % 8)
			}
		}
	}
	return out
}

func gvqUnpackLevels(p []byte, n, s, b int) []float32 {
	out := make([]float32, n)
	for i := range out {
		u := 0
		for k := range b {
			u |= int(p[(i*b+k)/8]>>((i*b+k)%8)&1) << k
		}
		out[i] = float32(u - s)
	}
	return out
}

// TestGradiVeQQuantizedExchange: two workers with 5-bit coefficients (s =
// 15) over the conformance model: step 0 warm-up, 1-2 sampled, 3-5
// compressed. Every compressed step all-gathers one float32 per tensor (8 B)
// and all-reduces 2 x (18 + 75) levels, counted at 5 bits each per tensor:
// conv.w ceil(5 x 36 / 8) = 23 B, fc.w ceil(5 x 150 / 8) = 94 B. The counted
// bytes are the packed levels' length, the packing loses nothing, the
// workers agree bit for bit, and the mean is what the workers' payloads
// decode to one by one, summed.
func TestGradiVeQQuantizedExchange(t *testing.T) {
	const n, steps, bits, s = 2, 6, 5, 15
	cfg := gvqConfig(16, 2, 1, 2, 3, true)
	cfg.MinSize, cfg.GradiVeQ.QuantizeBits = 64, bits
	params := conformanceParams()
	grads := gvqGrads(params, steps, n, 0)
	xs, recs, outs := exchangeSteps(t, cfg, params, grads)
	c := xs[0].Compressor().(*gradiVeQ)
	if nd := c.Needs(); nd.Rounds != 2 || nd.Op(0) != dist.OpAllGather || nd.Op(1) != dist.OpAllReduce {
		t.Fatalf("needs %+v, want an all-gather then an all-reduce", nd)
	}
	denseTensors, packed := int64(4*len(xs[0].dbuf)), int64(4*len(xs[0].cbuf))
	const perStep = 8 + 23 + 94
	tr := xs[0].Traffic()
	if want := steps*denseTensors + 3*packed + 3*perStep; tr.Wire != want || tr.SteadyWire != 3*(denseTensors+perStep) ||
		tr.Dense != steps*(denseTensors+packed) {
		t.Fatalf("traffic %+v: want %d B in all, 3 steady steps of %d B", tr, want, denseTensors+perStep)
	}
	if recs[0].gathered != 3*8 {
		t.Fatalf("all-gathered %d B, want 8 on each compressed step and none on the others", recs[0].gathered)
	}
	// The last step's levels as handed to the all-reduce, packed per tensor.
	var wire int64
	for w, r := range recs {
		for ti, tn := range c.tens {
			levels := r.floats[tn.pay : tn.pay+tn.slices*tn.rank]
			p := gvqPackLevels(levels, s, bits)
			if int64(len(p)) != c.compWire[ti] {
				t.Fatalf("worker %d tensor %s: %d levels pack into %d B, counted %d", w, tn.name, len(levels), len(p), c.compWire[ti])
			}
			if !slices.Equal(gvqUnpackLevels(p, len(levels), s, bits), levels) {
				t.Fatalf("worker %d tensor %s: the packed levels do not read back", w, tn.name)
			}
			if w == 0 {
				wire += int64(len(p))
			}
		}
	}
	if wire != 23+94 {
		t.Fatalf("packed levels %d B, want 117", wire)
	}
	gvqDecodedOneByOne(t, xs, recs, outs)
	// A non-finite gradient leaves no scale: every worker refuses the step.
	good, bad := make([]float32, c.size), make([]float32, c.size)
	bad[0] = float32(math.Inf(1)) // conv.w
	cs := []*gradiVeQ{xs[0].Compressor().(*gradiVeQ), xs[1].Compressor().(*gradiVeQ)}
	maxes := make([][]byte, n)
	for w, g := range [][]float32{good, bad} {
		p, err := cs[w].Encode(0, slices.Clone(g), Combined{}, StepInfo{Step: 3, Worker: w, Workers: n})
		if err != nil {
			t.Fatal(err)
		}
		maxes[w] = slices.Clone(p.Bytes)
	}
	for w := range cs {
		_, err := cs[w].Encode(1, slices.Clone(bad), Combined{Bytes: maxes, Workers: n}, StepInfo{Step: 3, Worker: w, Workers: n})
		if err == nil || !strings.Contains(err.Error(), "tensor conv.w: coefficient scale +Inf is not finite") {
			t.Fatalf("worker %d: error %v, want the tensor named", w, err)
		}
	}
}

// TestGradiVeQQuantizeBitsProblems: quantize_bits is 0 or in [2, 16], and
// the levels' sum must stay exact for the number of workers: N s <= 2^24.
func TestGradiVeQQuantizeBitsProblems(t *testing.T) {
	for _, b := range []int{-1, 1, 17} {
		c := DefaultConfig()
		c.GradiVeQ.QuantizeBits = b
		want := fmt.Sprintf("compress.gradiveq.quantize_bits: %d: must be 0 (float32 coefficients) or an integer in [2, 16]", b)
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("quantize_bits %d: %v, want %q", b, err, want)
		}
	}
	tensors := []Tensor{{Name: "w", Shape: []int{8, 12}, Size: 96}}
	cfg := gvqConfig(8, 3, 0, 2, 5, true)
	cfg.GradiVeQ.QuantizeBits = 16 // s = 32767: 512 x 32767 = 16,776,704 <= 2^24 < 513 x 32767
	if _, err := newGradiVeQ(cfg, tensors, 0, 512, 0, Hyper{}); err != nil {
		t.Errorf("16 bits, 512 workers: %v", err)
	}
	_, err := newGradiVeQ(cfg, tensors, 0, 513, 0, Hyper{})
	if want := "compress.gradiveq.quantize_bits: 16 with 513 workers: the summed levels reach 513 x 32767, beyond 2^24 = 16777216, " +
		"the largest integer a float32 sum holds exactly; expected at most 15 bits for 513 workers"; err == nil || err.Error() != want {
		t.Errorf("16 bits, 513 workers: %v, want %q", err, want)
	}
	// The bound is float32's: 512 levels of 32767 sum exactly in any order,
	// one more level past 2^24 does not.
	var sum, big float32 = 0, 1 << 24
	for range 512 {
		sum += 32767
	}
	if sum != 512*32767 || big+1 != big {
		t.Errorf("float32 sums: 512 x 32767 = %v, 2^24 + 1 = %v", sum, big+1)
	}
}
