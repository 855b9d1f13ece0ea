package compress

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

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
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	grads := make([][][]float32, steps)
	for s := range grads {
		grads[s] = make([][]float32, n)
		for w := range grads[s] {
			rng := rand.New(rand.NewPCG(uint64(s), uint64(w)))
			grads[s][w] = make([]float32, size)
			for i := range grads[s][w] {
				grads[s][w][i] = float32(rng.NormFloat64())
			}
		}
	}
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
	// The last step's payloads decoded one by one and summed.
	info := StepInfo{Step: steps - 1, Workers: n}
	sum := make([]float32, c.size)
	for _, r := range recs {
		if err := c.DecodeAdd(Payload{Floats: r.floats}, sum, info); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range xs[0].packed {
		for i := 0; i < tn.Size; i++ {
			got, want := outs[steps-1][0][tn.FlatOffset+i], sum[tn.Offset+i]/n
			if math.Abs(float64(got-want)) > 1e-5 {
				t.Fatalf("%s[%d]: exchanged %v, payloads decoded one by one %v", tn.Name, i, got, want)
			}
		}
	}
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

// TestGradiVeQResumesDense: a checkpoint keeps no basis, so a compressor
// restored at a compressed step of the schedule sends its dense gradient (and
// the step is not steady) until a sampling phase has ended.
func TestGradiVeQResumesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := gvqTestCompressor(t, rng, 2)
	if st := a.State(); len(st) != 0 {
		t.Fatalf("state %v, want none", st)
	}
	fresh, err := newGradiVeQ(gvqConfig(8, 3, 0, 2, 5, true), []Tensor{{Name: "w", Shape: []int{8, 12}, Size: 96}}, 0, 2, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	b := fresh.(*gradiVeQ)
	if err := b.SetState(a.State()); err != nil {
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
	if err := b.SetState(map[string][]float32{"basis": {1}}); err == nil {
		t.Fatal("SetState accepted a buffer")
	}
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
