package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// psgdConfig is PowerSGD compressing from step 0 with PyTorch's other defaults.
func psgdConfig(rank int) Config {
	c := DefaultConfig()
	c.Name = "powersgd"
	c.PowerSGD.Rank = rank
	c.PowerSGD.StartIter = 0
	return c
}

// psgdBuild makes one compressor per worker for tensors of the given shapes,
// packed in order.
func psgdBuild(t testing.TB, cfg Config, workers int, shapes ...[]int) []Compressor {
	t.Helper()
	var tensors []Tensor
	off := 0
	for i, s := range shapes {
		size := 1
		for _, d := range s {
			size *= d
		}
		tensors = append(tensors, Tensor{Name: fmt.Sprintf("t%d", i), Shape: s, Offset: off, FlatOffset: off, Size: size})
		off += size
	}
	cs := make([]Compressor, workers)
	for w := range cs {
		c, err := newPowerSGD(cfg, tensors, w, workers, 7, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		cs[w] = c
	}
	return cs
}

// psgdStep runs one step on every worker the way the exchange does: each
// round's payloads are summed in rank order and the sum is written into every
// worker's payload (an in-place all-reduce). It returns each worker's
// decompressed mean and the payloads' wire sizes per round.
func psgdStep(t testing.TB, cs []Compressor, grads [][]float32, step int) (outs [][]float32, wire [2]int64) {
	t.Helper()
	n := len(cs)
	prev := make([]Combined, n) // each worker's combined result of the last round
	for r := 0; r < 2; r++ {
		ps := make([]Payload, n)
		for w, c := range cs {
			p, err := c.Encode(r, grads[w], prev[w], StepInfo{Step: step, Worker: w, Workers: n})
			if err != nil {
				t.Fatal(err)
			}
			if p.Wire != int64(4*len(p.Floats)) {
				t.Fatalf("round %d: wire %d for %d floats", r, p.Wire, len(p.Floats))
			}
			var tw int64
			for _, v := range p.TensorWire {
				tw += v
			}
			if tw != p.Wire {
				t.Fatalf("round %d: tensor wire %v sums to %d, wire %d", r, p.TensorWire, tw, p.Wire)
			}
			ps[w] = p
		}
		sum := make([]float32, len(ps[0].Floats))
		for _, p := range ps {
			for i, v := range p.Floats {
				sum[i] += v
			}
		}
		for w, p := range ps {
			copy(p.Floats, sum)
			prev[w] = Combined{Floats: p.Floats, Workers: n}
		}
		wire[r] = ps[0].Wire
	}
	outs = make([][]float32, n)
	for w, c := range cs {
		outs[w] = make([]float32, len(grads[w]))
		if err := decodeMean(c, prev[w], outs[w], StepInfo{Step: step, Worker: w, Workers: n}); err != nil {
			t.Fatal(err)
		}
	}
	return outs, wire
}

// clone copies each worker's gradient (Compress may use it as scratch).
func clone(gs [][]float32) [][]float32 {
	out := make([][]float32, len(gs))
	for i, g := range gs {
		out[i] = append([]float32(nil), g...)
	}
	return out
}

// outer returns the n x m matrix a b^T, row-major.
func outer(a, b []float64) []float64 {
	out := make([]float64, len(a)*len(b))
	for i, x := range a {
		for j, y := range b {
			out[i*len(b)+j] = x * y
		}
	}
	return out
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// maxDiff is max |x-y| and max |y|.
func maxDiff(x, y []float32) (diff, scale float64) {
	for i := range x {
		diff = math.Max(diff, math.Abs(float64(x[i])-float64(y[i])))
		scale = math.Max(scale, math.Abs(float64(y[i])))
	}
	return diff, scale
}

func psgdRandom(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.NormFloat64()
	}
	return out
}

// A rank-1 matrix is recovered exactly at rank 1 in one step. For M = a b^T
// and any Q with b.Q != 0: P = M Q = a (b.Q), orthonormalised P = ±a/|a|;
// Q = M^T P = ±b |a|; P Q^T = a b^T. The conv weight 4x2x3x3 is viewed as the
// 4 x 18 matrix (out x in*kh*kw): a b^T written row-major is that view.
// (4+18)*1*2 = 44 < 72, so it is compressed.
func TestPowerSGDRankOneExact(t *testing.T) {
	a := []float64{1, -2, 3, 0.5}
	b := make([]float64, 18)
	for j := range b {
		b[j] = float64(j%5) - 1.5
	}
	m := f32s(outer(a, b))
	for _, workers := range []int{1, 2} {
		cs := psgdBuild(t, psgdConfig(1), workers, []int{4, 2, 3, 3})
		grads := make([][]float32, workers)
		for w := range grads {
			grads[w] = append([]float32(nil), m...)
		}
		outs, wire := psgdStep(t, cs, grads, 0)
		for w, out := range outs {
			if d, s := maxDiff(out, m); d > 1e-5*s {
				t.Fatalf("workers=%d worker %d: |Mhat - M| = %g (scale %g)", workers, w, d, s)
			}
			e := cs[w].(ErrorFeedback).Residual()
			if d, s := maxDiff(e, make([]float32, len(e))); d > 1e-5*maxAbs(m) {
				t.Fatalf("residual %g (scale %g), want 0", d, s)
			}
		}
		// P is 4 values, Q is 18.
		if wire[0] != 4*4 || wire[1] != 4*18 {
			t.Fatalf("wire %v, want [16 72]", wire)
		}
	}
}

func maxAbs(v []float32) float64 {
	var m float64
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// A rank-2 matrix is recovered exactly at rank 2: P = M Q spans the column
// space of M (Q generic), so after Gram-Schmidt P P^T is the projector onto
// it and P Q^T = P P^T M = M. With error feedback the residual is then 0, so
// the second, warm-started step sees the same M and is exact again.
// (10+8)*2*2 = 72 < 80: compressed.
func TestPowerSGDRankTwoExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mf := outer(psgdRandom(rng, 10), psgdRandom(rng, 8))
	m2 := outer(psgdRandom(rng, 10), psgdRandom(rng, 8))
	for i := range mf {
		mf[i] += m2[i]
	}
	m := f32s(mf)
	for _, workers := range []int{1, 3} {
		cs := psgdBuild(t, psgdConfig(2), workers, []int{10, 8})
		for step := 0; step < 2; step++ {
			grads := make([][]float32, workers)
			for w := range grads {
				grads[w] = append([]float32(nil), m...)
			}
			outs, _ := psgdStep(t, cs, grads, step)
			for w, out := range outs {
				if d, s := maxDiff(out, m); d > 1e-5*s {
					t.Fatalf("workers=%d step %d worker %d: |Mhat - M| = %g (scale %g)", workers, step, w, d, s)
				}
			}
		}
	}
	// At rank 1 the same matrix is not recovered: the test can fail.
	cs := psgdBuild(t, psgdConfig(1), 1, []int{10, 8})
	outs, _ := psgdStep(t, cs, [][]float32{append([]float32(nil), m...)}, 0)
	if d, s := maxDiff(outs[0], m); d < 1e-2*s {
		t.Fatalf("rank 1 recovered a rank-2 matrix: |Mhat - M| = %g", d)
	}
}

// Gram-Schmidt by hand. Columns (3,4) and (1,0): (3,4)/5 = (0.6, 0.8);
// (1,0) - 0.6*(0.6,0.8) = (0.64, -0.48), norm 0.8 -> (0.8, -0.6).
// With eps = 1: (3,4)/(5+1) = (0.5, 2/3); (1,0) - 0.5*(0.5, 2/3) =
// (0.75, -1/3), norm sqrt(0.5625 + 1/9) = 0.820738, divided by 1.820738.
// A zero column stays zero (eps 0) and is skipped by the projections.
func TestPowerSGDGramSchmidt(t *testing.T) {
	check := func(name string, got []float32, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-6 {
				t.Fatalf("%s: got %v, want %v", name, got, want)
			}
		}
	}
	a := []float32{3, 4, 1, 0}
	psgdGramSchmidt(a, 2, 2, 0)
	check("eps 0", a, []float64{0.6, 0.8, 0.8, -0.6})

	a = []float32{3, 4, 1, 0}
	psgdGramSchmidt(a, 2, 2, 1)
	nrm := math.Sqrt(0.5625 + 1.0/9)
	check("eps 1", a, []float64{0.5, 2.0 / 3, 0.75 / (nrm + 1), -1.0 / 3 / (nrm + 1)})

	a = []float32{0, 0, 1, 1}
	psgdGramSchmidt(a, 2, 2, 0)
	check("zero column", a, []float64{0, 0, 1 / math.Sqrt2, 1 / math.Sqrt2})

	// A random 50 x 3 matrix: P^T P = I.
	rng := rand.New(rand.NewPCG(3, 4))
	const n, r = 50, 3
	p := f32s(psgdRandom(rng, n*r))
	psgdGramSchmidt(p, n, r, 0)
	for i := 0; i < r; i++ {
		for j := 0; j < r; j++ {
			var s float64
			for k := 0; k < n; k++ {
				s += float64(p[i*n+k]) * float64(p[j*n+k])
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-5 {
				t.Fatalf("(P^T P)[%d][%d] = %v, want %v", i, j, s, want)
			}
		}
	}
}

// The compression rule by hand: compress at rank r' = min(r, n, m) when
// (n+m)*r'*rate < n*m (strictly).
func TestPowerSGDCompressionRule(t *testing.T) {
	for _, c := range []struct {
		n, m, rank int
		rate       float64
		want       int
	}{
		{8, 6, 1, 2, 1},      // 14*1*2 = 28 < 48
		{3, 3, 1, 2, 0},      // 6*1*2 = 12 >= 9
		{16, 27, 2, 2, 2},    // conv 16x3x3x3: 43*2*2 = 172 < 432
		{10, 10, 2, 2, 2},    // 20*2*2 = 80 < 100
		{10, 10, 3, 2, 0},    // 20*3*2 = 120 >= 100
		{8, 8, 2, 2, 0},      // 16*2*2 = 64, not < 64
		{2, 1000, 4, 0.5, 2}, // rank clipped to 2: 1002*2*0.5 = 1002 < 2000
		{3, 2, 5, 0, 2},      // rank clipped to 2, rate 0 compresses anything
		{1, 500, 1, 2, 0},    // 501*1*2 = 1002 >= 500
	} {
		if got := psgdCompressed(c.n, c.m, c.rank, c.rate); got != c.want {
			t.Errorf("%dx%d rank %d rate %v: rank %d, want %d", c.n, c.m, c.rank, c.rate, got, c.want)
		}
	}
	// Through the builder: a compressed 16x27 conv weight and a dense 3x3
	// matrix. Round 0 carries P (16*2) and the dense 9 values, round 1 Q
	// (27*2); the dense matrix is the exact mean.
	cs := psgdBuild(t, psgdConfig(2), 2, []int{16, 3, 3, 3}, []int{3, 3})
	g0, g1 := make([]float32, 432+9), make([]float32, 432+9)
	for i := range g0 {
		g0[i], g1[i] = float32(i%11)-5, float32(i%7)*0.5
	}
	outs, wire := psgdStep(t, cs, clone([][]float32{g0, g1}), 0)
	if wire[0] != 4*(32+9) || wire[1] != 4*54 {
		t.Fatalf("wire %v, want [%d %d]", wire, 4*(32+9), 4*54)
	}
	for i := 432; i < 441; i++ {
		if want := (g0[i] + g1[i]) * 0.5; outs[0][i] != want {
			t.Fatalf("dense value %d: %v, want the mean %v", i, outs[0][i], want)
		}
	}
	// Dense matrices keep no residual.
	for w, c := range cs {
		for i, e := range c.(ErrorFeedback).Residual()[432:] {
			if e != 0 {
				t.Fatalf("worker %d: dense residual[%d] = %v", w, i, e)
			}
		}
	}
}

// Before start_iter the step is a vanilla all-reduce: round 0 carries the
// whole gradient, round 1 nothing, the result is the exact mean, the residual
// stays zero and the step is not steady. From start_iter on PowerSGD runs.
func TestPowerSGDStartIter(t *testing.T) {
	cfg := psgdConfig(1)
	cfg.PowerSGD.StartIter = 2
	cs := psgdBuild(t, cfg, 2, []int{8, 6})
	rng := rand.New(rand.NewPCG(5, 6))
	for step := 0; step < 3; step++ {
		g := [][]float32{f32s(psgdRandom(rng, 48)), f32s(psgdRandom(rng, 48))}
		outs, wire := psgdStep(t, cs, clone(g), step)
		steady := cs[0].Steady(StepInfo{Step: step})
		res := cs[0].(ErrorFeedback).Residual()
		if step < 2 {
			if steady || wire[0] != 4*48 || wire[1] != 0 {
				t.Fatalf("step %d: steady %v, wire %v, want false, [192 0]", step, steady, wire)
			}
			for i := range g[0] {
				if want := (g[0][i] + g[1][i]) * 0.5; outs[0][i] != want || outs[1][i] != want {
					t.Fatalf("step %d: value %d: %v, %v, want the mean %v", step, i, outs[0][i], outs[1][i], want)
				}
			}
			if maxAbs(res) != 0 {
				t.Fatalf("step %d: residual changed during the vanilla phase", step)
			}
			continue
		}
		// (8+6)*1 floats in all: P then Q.
		if !steady || wire[0] != 4*8 || wire[1] != 4*6 {
			t.Fatalf("step %d: steady %v, wire %v, want true, [32 24]", step, steady, wire)
		}
		if maxAbs(res) == 0 {
			t.Fatalf("step %d: no residual after compressing a random matrix at rank 1", step)
		}
	}
}

// Through the real exchange (the warm-up all-reduces the gradient buffer
// itself in place): the first start_iter steps give the exact mean on both
// workers, the next one compresses and the workers still agree bit for bit.
func TestPowerSGDExchangeWarmUp(t *testing.T) {
	cfg := psgdConfig(1)
	cfg.MinSize = 16
	cfg.PowerSGD.StartIter = 2
	params := []optim.Param{{Name: "w", Kind: optim.KindLinear, Shape: []int{8, 6}, Value: make([]float32, 48), Grad: make([]float32, 48)}}
	members, err := dist.NewLocal(2)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]*Exchange, 2)
	for w := range xs {
		info := func(step int) StepInfo { return StepInfo{Step: step, Worker: w, Workers: 2} }
		if xs[w], err = NewExchange(cfg, params, members[w], 3, Hyper{}, info); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for step := 0; step < 3; step++ {
		g := [][]float32{f32s(psgdRandom(rng, 48)), f32s(psgdRandom(rng, 48))}
		out := clone(g)
		var wg sync.WaitGroup
		for w := range xs {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				if err := xs[w].Exchange(out[w], step); err != nil {
					t.Error(err)
				}
			}(w)
		}
		wg.Wait()
		for i := range out[0] {
			if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
				t.Fatalf("step %d: workers disagree at %d", step, i)
			}
			if want := (g[0][i] + g[1][i]) * 0.5; step < 2 && out[0][i] != want {
				t.Fatalf("step %d: value %d: %v, want the mean %v", step, i, out[0][i], want)
			}
		}
	}
	// Two dense steps of 48 floats, then P (8) and Q (6).
	if tr := xs[0].Traffic(); tr.Wire != 4*(2*48+8+6) || tr.SteadyWire != 4*(8+6) {
		t.Fatalf("traffic %+v", tr)
	}
}

// Two workers with M_0 = A + D and M_1 = A - D, A = a b^T of rank 1 and D
// full rank: round 0 gives P = mean(M_w) Q = A Q, round 1 Q = mean(M_w^T P) =
// A^T P, so Mhat = P P^T A = A exactly, on both workers bit for bit; each
// residual is M_w - A = ±D.
func TestPowerSGDMeanOfWorkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	a := f32s(outer(psgdRandom(rng, 12), psgdRandom(rng, 9)))
	d := f32s(psgdRandom(rng, 108))
	m0, m1 := make([]float32, 108), make([]float32, 108)
	for i := range a {
		m0[i], m1[i] = a[i]+d[i], a[i]-d[i]
	}
	cs := psgdBuild(t, psgdConfig(1), 2, []int{12, 9})
	outs, _ := psgdStep(t, cs, [][]float32{m0, m1}, 0)
	for i := range outs[0] {
		if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
			t.Fatalf("workers disagree at %d", i)
		}
	}
	if diff, s := maxDiff(outs[0], a); diff > 1e-5*s {
		t.Fatalf("|Mhat - A| = %g (scale %g)", diff, s)
	}
	e0, e1 := cs[0].(ErrorFeedback).Residual(), cs[1].(ErrorFeedback).Residual()
	neg := make([]float32, len(d))
	for i, v := range d {
		neg[i] = -v
	}
	if diff, s := maxDiff(e0, d); diff > 1e-4*s {
		t.Fatalf("worker 0 residual differs from D by %g", diff)
	}
	if diff, s := maxDiff(e1, neg); diff > 1e-4*s {
		t.Fatalf("worker 1 residual differs from -D by %g", diff)
	}
}

// In general N workers compute what one worker would compute on the mean
// matrix: P = mean(M_w) Q and Q' = mean(M_w)^T P are linear in the M_w.
func TestPowerSGDEqualsPowerSGDOfTheMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const workers, size = 3, 20 * 15
	grads := make([][]float32, workers)
	mean := make([]float32, size)
	for w := range grads {
		grads[w] = f32s(psgdRandom(rng, size))
	}
	for i := range mean {
		var s float64
		for w := range grads {
			s += float64(grads[w][i])
		}
		mean[i] = float32(s / workers)
	}
	cfg := psgdConfig(2)
	cfg.PowerSGD.ErrorFeedback = false
	many := psgdBuild(t, cfg, workers, []int{20, 15})
	one := psgdBuild(t, cfg, 1, []int{20, 15})
	for step := 0; step < 3; step++ {
		outs, _ := psgdStep(t, many, clone(grads), step)
		ref, _ := psgdStep(t, one, [][]float32{append([]float32(nil), mean...)}, step)
		if d, s := maxDiff(outs[0], ref[0]); d > 1e-4*s {
			t.Fatalf("step %d: %d workers differ from PowerSGD of the mean by %g (scale %g)", step, workers, d, s)
		}
	}
}

// Error feedback: M_t = g_t + e_{t-1} exactly, M_t = Mhat_t + e_t, hence
// sum_t Mhat_t = mean_w sum_t g_{w,t} - mean_w e_{w,T} (telescoping; Mhat is
// the same on every worker).
func TestPowerSGDErrorFeedback(t *testing.T) {
	const workers, size, steps = 2, 16 * 12, 5
	cs := psgdBuild(t, psgdConfig(1), workers, []int{16, 12})
	rng := rand.New(rand.NewPCG(11, 12))
	sumOut := make([]float64, size)
	sumG := make([]float64, size)
	prevE := make([][]float32, workers)
	for w := range prevE {
		prevE[w] = make([]float32, size)
	}
	for step := 0; step < steps; step++ {
		g := make([][]float32, workers)
		for w := range g {
			g[w] = f32s(psgdRandom(rng, size))
			for i, v := range g[w] {
				sumG[i] += float64(v) / workers
			}
		}
		outs, _ := psgdStep(t, cs, clone(g), step)
		for i, v := range outs[0] {
			sumOut[i] += float64(v)
		}
		for w, c := range cs {
			ef := c.(ErrorFeedback)
			comp, sent, res := ef.Compensated(), ef.Sent(), ef.Residual()
			for i := range comp {
				if comp[i] != g[w][i]+prevE[w][i] {
					t.Fatalf("step %d worker %d: M[%d] = %v, want g + e = %v", step, w, i, comp[i], g[w][i]+prevE[w][i])
				}
				if d := math.Abs(float64(comp[i]) - float64(sent[i]) - float64(res[i])); d > 1e-6 {
					t.Fatalf("step %d worker %d: M != Mhat + e at %d (%g)", step, w, i, d)
				}
				if sent[i] != outs[w][i] {
					t.Fatalf("step %d worker %d: Sent[%d] = %v, applied %v", step, w, i, sent[i], outs[w][i])
				}
			}
			copy(prevE[w], res)
		}
	}
	for i := range sumOut {
		want := sumG[i] - (float64(prevE[0][i])+float64(prevE[1][i]))/workers
		if math.Abs(sumOut[i]-want) > 1e-4 {
			t.Fatalf("sum of updates %v, want sum of gradients - mean residual %v", sumOut[i], want)
		}
	}
}

// Warm start turns the steps into a power iteration on a fixed matrix: with
// M = 3 e0 f0^T + 1 e1 f1^T (8 x 6, no error feedback), each step multiplies
// Q by M^T M, shrinking the f1 component against the f0 one by 1/9, so after
// 15 steps Mhat = 3 e0 f0^T, the best rank-1 approximation, to about 1e-14.
// Without warm start Q is redrawn from (seed, step): a fresh compressor run
// only at that step gives the same bits, and on the first compressed step
// warm and cold start agree.
func TestPowerSGDWarmStart(t *testing.T) {
	m := make([]float32, 48)
	m[0], m[1*6+1] = 3, 1
	best := make([]float32, 48)
	best[0] = 3
	cfg := psgdConfig(1)
	cfg.PowerSGD.ErrorFeedback = false
	warm := psgdBuild(t, cfg, 1, []int{8, 6})
	var out []float32
	for step := 0; step < 15; step++ {
		outs, _ := psgdStep(t, warm, [][]float32{append([]float32(nil), m...)}, step)
		out = outs[0]
	}
	if d, _ := maxDiff(out, best); d > 1e-5 {
		t.Fatalf("warm start after 15 steps: |Mhat - 3 e0 f0^T| = %g", d)
	}

	cfg.PowerSGD.WarmStart = false
	rng := rand.New(rand.NewPCG(13, 14))
	g := f32s(psgdRandom(rng, 48))
	cold := psgdBuild(t, cfg, 1, []int{8, 6})
	var first []float32
	for step := 0; step < 4; step++ {
		outs, _ := psgdStep(t, cold, [][]float32{append([]float32(nil), g...)}, step)
		if step == 0 {
			first = outs[0]
		} else if d, _ := maxDiff(outs[0], first); d == 0 {
			t.Fatalf("cold start step %d projected the same gradient as step 0: Q was not redrawn", step)
		}
		fresh := psgdBuild(t, cfg, 1, []int{8, 6})
		ref, _ := psgdStep(t, fresh, [][]float32{append([]float32(nil), g...)}, step)
		for i := range ref[0] {
			if math.Float32bits(outs[0][i]) != math.Float32bits(ref[0][i]) {
				t.Fatalf("cold start step %d differs from a fresh draw at (seed, step)", step)
			}
		}
		if step == 0 {
			cfg.PowerSGD.WarmStart = true
			w := psgdBuild(t, cfg, 1, []int{8, 6})
			cfg.PowerSGD.WarmStart = false
			wout, _ := psgdStep(t, w, [][]float32{append([]float32(nil), g...)}, 0)
			for i := range wout[0] {
				if math.Float32bits(outs[0][i]) != math.Float32bits(wout[0][i]) {
					t.Fatal("warm and cold start differ on the first compressed step")
				}
			}
		}
	}
}

// Round 0 sends P = M Q with Q the normal draw for (seed, start_iter)
// orthonormalised first (PyTorch orthonormalises Q on every step). Checked
// against a float64 product of the same draw.
func TestPowerSGDRoundZeroIsMQ(t *testing.T) {
	const n, m, r = 12, 10, 2 // (12+10)*2*2 = 88 < 120: compressed
	cfg := psgdConfig(r)
	cfg.PowerSGD.StartIter = 3
	c := psgdBuild(t, cfg, 1, []int{n, m})[0]
	q := append([]float32(nil), c.(powerSGDEF).q...)
	psgdGramSchmidt(q, m, r, 0)
	for k := 0; k < r; k++ { // the columns of the orthonormalised Q have norm 1
		var s float64
		for _, v := range q[k*m : (k+1)*m] {
			s += float64(v) * float64(v)
		}
		if math.Abs(s-1) > 1e-6 {
			t.Fatalf("column %d of Q has squared norm %v", k, s)
		}
	}
	rng := rand.New(rand.NewPCG(15, 16))
	g := f32s(psgdRandom(rng, n*m))
	p, err := c.Encode(0, append([]float32(nil), g...), Combined{}, StepInfo{Step: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < r; k++ {
		for i := 0; i < n; i++ {
			var want float64
			for j := 0; j < m; j++ {
				want += float64(g[i*m+j]) * float64(q[k*m+j])
			}
			if got := p.Floats[k*n+i]; math.Abs(float64(got)-want) > 1e-5 {
				t.Fatalf("P[%d][%d] = %v, want (M Q)[%d][%d] = %v", i, k, got, i, k, want)
			}
		}
	}
}

// A zero gradient with epsilon 0 gives zeros, not NaN.
func TestPowerSGDZeroGradient(t *testing.T) {
	cs := psgdBuild(t, psgdConfig(2), 2, []int{10, 8})
	outs, _ := psgdStep(t, cs, [][]float32{make([]float32, 80), make([]float32, 80)}, 0)
	for i, v := range outs[0] {
		if v != 0 {
			t.Fatalf("value %d: %v, want 0", i, v)
		}
	}
}

func TestPowerSGDConfigErrors(t *testing.T) {
	for _, c := range []struct {
		key string
		set func(*PowerSGDConfig)
	}{
		{"compress.powersgd.rank", func(c *PowerSGDConfig) { c.Rank = 0 }},
		{"compress.powersgd.start_iter", func(c *PowerSGDConfig) { c.StartIter = -1 }},
		{"compress.powersgd.min_compression_rate", func(c *PowerSGDConfig) { c.MinCompressionRate = -1 }},
		{"compress.powersgd.min_compression_rate", func(c *PowerSGDConfig) { c.MinCompressionRate = math.NaN() }},
		{"compress.powersgd.epsilon", func(c *PowerSGDConfig) { c.Epsilon = -1e-8 }},
	} {
		cfg := psgdConfig(1)
		c.set(&cfg.PowerSGD)
		_, err := newPowerSGD(cfg, []Tensor{{Name: "w", Shape: []int{8, 6}, Size: 48}}, 0, 1, 1, Hyper{})
		if err == nil || !strings.HasPrefix(err.Error(), c.key+":") {
			t.Errorf("%s: error %v", c.key, err)
		}
	}
}

// A run resumed from State equals the uninterrupted run bit for bit (error
// feedback and warm start: both the residual and Q matter).
func TestPowerSGDResume(t *testing.T) {
	shapes := [][]int{{16, 4, 3, 3}, {5}, {24, 20}}
	const workers, size = 2, 16*36 + 5 + 24*20
	grads := func(step int) [][]float32 {
		rng := rand.New(rand.NewPCG(uint64(step), 99))
		return [][]float32{f32s(psgdRandom(rng, size)), f32s(psgdRandom(rng, size))}
	}
	cfg := psgdConfig(2)
	cfg.PowerSGD.StartIter = 1
	ref := psgdBuild(t, cfg, workers, shapes...)
	run := psgdBuild(t, cfg, workers, shapes...)
	var want [][]float32
	for step := 0; step < 6; step++ {
		want, _ = psgdStep(t, ref, grads(step), step)
		if step < 3 {
			psgdStep(t, run, grads(step), step)
		}
	}
	resumed := psgdBuild(t, cfg, workers, shapes...)
	for w := range run {
		st := map[string][]float32{}
		for k, v := range run[w].State() {
			st[k] = append([]float32(nil), v...)
		}
		if len(st) != 2 {
			t.Fatalf("state %v, want residual and q", st)
		}
		if err := resumed[w].SetState(st); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]float32
	for step := 3; step < 6; step++ {
		got, _ = psgdStep(t, resumed, grads(step), step)
	}
	for w := range got {
		for i := range got[w] {
			if math.Float32bits(got[w][i]) != math.Float32bits(want[w][i]) {
				t.Fatalf("worker %d: resumed run differs at %d", w, i)
			}
		}
	}
	if err := resumed[0].SetState(map[string][]float32{"q": make([]float32, 1)}); err == nil {
		t.Fatal("SetState accepted a short q and no residual")
	}
	st := resumed[0].State()
	st["momentum"] = nil
	if err := resumed[0].SetState(st); err == nil {
		t.Fatal("SetState accepted an unknown buffer")
	}
}

// BenchmarkPowerSGD measures compress+decompress (both rounds, error
// feedback, warm start) of one worker at rank 2, and at rank 1 (the
// default) on the MLP's first weight matrix.
func BenchmarkPowerSGD(b *testing.B) {
	for _, c := range []struct{ n, m, rank int }{{1000, 1000, 2}, {1000, 10000, 2}, {784, 512, 1}, {784, 512, 2}} {
		s := [2]int{c.n, c.m}
		b.Run(fmt.Sprintf("%dx%d/rank%d", c.n, c.m, c.rank), func(b *testing.B) {
			cs := psgdBuild(b, psgdConfig(c.rank), 1, s[:])
			c := cs[0]
			rng := rand.New(rand.NewPCG(1, 1))
			g := make([]float32, s[0]*s[1])
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, len(g))
			info := StepInfo{Step: 0, Workers: 1}
			snd := newSender("powersgd", c, len(dst))
			step := func() {
				p0, err := c.Encode(0, g, Combined{}, info)
				if err != nil {
					b.Fatal(err)
				}
				p1, err := c.Encode(1, g, Combined{Floats: p0.Floats, Workers: 1}, info)
				if err != nil {
					b.Fatal(err)
				}
				if err := snd.Decompress(Combined{Floats: p1.Floats, Workers: 1}, dst, info); err != nil {
					b.Fatal(err)
				}
			}
			step()
			b.ReportAllocs()
			iters := 0
			for b.Loop() {
				step()
				iters++
			}
			b.ReportMetric(float64(len(g))*float64(iters)/b.Elapsed().Seconds(), "elements/s")
		})
	}
}

// Splitting the products over cores (the run on the mean gradient) changes
// no bit: rows of P and of the decoded mean are independent, each element
// of Q sums over the rows in the same order however the columns are split,
// and at rank 1 the one pass sums M^T P by fixed blocks of rows. The first
// matrix is large enough to split, the second is not.
func TestPowerSGDSplitSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][]int{{300, 257}, {12, 10}}
	size := 300*257 + 12*10
	for _, rank := range []int{1, 2} {
		cfg := psgdConfig(rank)
		one := psgdBuild(t, cfg, 1, shapes...)
		spread := psgdBuild(t, cfg, 1, shapes...)
		one[0].(meanLinear).setMeanRun(1)
		spread[0].(meanLinear).setMeanRun(3)
		for step := 0; step < 4; step++ {
			g := f32s(psgdRandom(rng, size))
			a, _ := psgdStep(t, one, [][]float32{append([]float32(nil), g...)}, step)
			b, _ := psgdStep(t, spread, [][]float32{append([]float32(nil), g...)}, step)
			for i := range a[0] {
				if math.Float32bits(a[0][i]) != math.Float32bits(b[0][i]) {
					t.Fatalf("rank %d step %d: value %d is %v split, %v not", rank, step, i, b[0][i], a[0][i])
				}
			}
			ra, rb := one[0].(ErrorFeedback).Residual(), spread[0].(ErrorFeedback).Residual()
			for i := range ra {
				if math.Float32bits(ra[i]) != math.Float32bits(rb[i]) {
					t.Fatalf("rank %d step %d: residual %d is %v split, %v not", rank, step, i, rb[i], ra[i])
				}
			}
		}
	}
}

// TestPowerSGDMeanRunOnePass runs PowerSGD on one worker's gradients over
// ten steps two ways from the same start: as the exchange on the workers'
// mean (ExchangeMean, where rank-1 matrices take Q from round 0's pass over
// M) and as a plain exchange in a group of one (two passes over M). At rank
// 1 the decoded gradients agree to float32 rounding, not bit for bit (the
// one pass divides M^T P by P's norm instead of normalising P first); at
// rank 2 every matrix takes two passes either way, and they agree bit for
// bit.
func TestPowerSGDMeanRunOnePass(t *testing.T) {
	params := []optim.Param{
		{Name: "big.w", Kind: optim.KindLinear, Shape: []int{300, 200}}, // split over the cores
		{Name: "fc.w", Kind: optim.KindLinear, Shape: []int{40, 30}},
		{Name: "fc.b", Kind: optim.KindBias, Shape: []int{30}},
	}
	size := 0
	for i := range params {
		n := params[i].Shape[0]
		if len(params[i].Shape) > 1 {
			n *= params[i].Shape[1]
		}
		params[i].Value, params[i].Grad = make([]float32, n), make([]float32, n)
		size += n
	}
	for _, rank := range []int{1, 2} {
		cfg := DefaultConfig()
		cfg.Name, cfg.MinSize, cfg.PowerSGD.StartIter, cfg.PowerSGD.Rank = "powersgd", 64, 0, rank
		var xs [2]*Exchange
		for i := range xs {
			members, err := dist.NewLocal(1)
			if err != nil {
				t.Fatal(err)
			}
			info := func(step int) StepInfo { return StepInfo{Step: step, Workers: 1} }
			if xs[i], err = NewExchange(cfg, params, members[0], 3, Hyper{Momentum: 0.9}, info); err != nil {
				t.Fatal(err)
			}
		}
		if err := xs[0].SetMeanState([]dist.MeanExchanger{xs[1]}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, uint64(rank)))
		var worst float64
		for step := range 10 {
			g := make([]float32, size)
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			mean, plain := append([]float32(nil), g...), append([]float32(nil), g...)
			if err := xs[0].ExchangeMean(mean, step, nil, false); err != nil {
				t.Fatal(err)
			}
			if err := xs[1].Exchange(plain, step); err != nil {
				t.Fatal(err)
			}
			var scale, diff float64
			for i := range plain {
				scale = math.Max(scale, math.Abs(float64(plain[i])))
				diff = math.Max(diff, math.Abs(float64(mean[i]-plain[i])))
				if rank == 2 && math.Float32bits(mean[i]) != math.Float32bits(plain[i]) {
					t.Fatalf("rank 2 step %d: value %d is %v on the mean run, %v plainly", step, i, mean[i], plain[i])
				}
			}
			if scale == 0 {
				t.Fatalf("rank %d step %d: the decoded gradient is all zeros", rank, step)
			}
			worst = math.Max(worst, diff/scale)
		}
		// Measured: 1.4e-7 after the first step, 1.5e-6 after the tenth.
		if rank == 1 && (worst > 1e-5 || worst == 0) {
			t.Fatalf("rank 1: the mean run's one pass is off by %.3g of the largest value (want rounding: above 0, at most 1e-5)", worst)
		}
	}
}

// BenchmarkPowerSGDMeanRun times PowerSGD's exchange on the workers' mean
// gradient (ExchangeMean, as on fused steps, split over the pool's cores) on
// the MLP's tensors (784x512, 512x256, 256x10 and biases) at rank 1, with
// round 1's M^T P from round 0's pass (onepass) and from a second pass over M
// (twopass). Each iteration exchanges the same gradient (copied in: about a
// tenth of the time).
func BenchmarkPowerSGDMeanRun(b *testing.B) {
	shapes := [][]int{{784, 512}, {512}, {512, 256}, {256}, {256, 10}, {10}}
	var params []optim.Param
	size := 0
	for i, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		params = append(params, optim.Param{Name: fmt.Sprintf("t%d", i), Kind: optim.KindLinear, Shape: s, Value: make([]float32, n), Grad: make([]float32, n)})
		size += n
	}
	for _, one := range []bool{true, false} {
		name := "twopass"
		if one {
			name = "onepass"
		}
		b.Run(name, func(b *testing.B) {
			defer func(v bool) { psgdOnePass = v }(psgdOnePass)
			psgdOnePass = one
			cfg := DefaultConfig()
			cfg.Name, cfg.PowerSGD.StartIter = "powersgd", 0
			members, err := dist.NewLocal(1)
			if err != nil {
				b.Fatal(err)
			}
			x, err := NewExchange(cfg, params, members[0], 1, Hyper{}, func(step int) StepInfo { return StepInfo{Step: step, Workers: 1} })
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			g0 := make([]float32, size)
			for i := range g0 {
				g0[i] = float32(rng.NormFloat64())
			}
			g := make([]float32, size)
			step := 0
			for b.Loop() {
				copy(g, g0)
				if err := x.ExchangeMean(g, step, nil, false); err != nil {
					b.Fatal(err)
				}
				step++
			}
		})
	}
}
