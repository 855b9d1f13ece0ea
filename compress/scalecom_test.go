package compress

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// scaleComConfig compresses every tensor of at least 2 dimensions from step 0.
func scaleComConfig(density, beta float64) Config {
	c := DefaultConfig()
	c.Name, c.MinSize, c.Density = "scalecom", 1, density
	c.ScaleCom.Beta, c.ScaleCom.WarmupEpochs = beta, 0
	return c
}

// exchangeSteps runs one exchange per step on n in-process workers;
// grads[step][w] is worker w's gradient (flat, over params). It returns the
// exchanges, their recording collectives and outs[step][w].
func exchangeSteps(t *testing.T, cfg Config, params []optim.Param, grads [][][]float32) ([]*Exchange, []*recordingMember, [][][]float32) {
	t.Helper()
	n := len(grads[0])
	members, err := dist.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]*Exchange, n)
	recs := make([]*recordingMember, n)
	for w := range xs {
		recs[w] = &recordingMember{Collective: members[w]}
		info := func(step int) StepInfo { return StepInfo{Step: step, StepsPerEpoch: 100, Worker: w, Workers: n} }
		if xs[w], err = NewExchange(cfg, params, recs[w], 1, Hyper{}, info); err != nil {
			t.Fatal(err)
		}
	}
	outs := make([][][]float32, len(grads))
	for step, gs := range grads {
		outs[step] = make([][]float32, n)
		var wg sync.WaitGroup
		for w := range xs {
			outs[step][w] = slices.Clone(gs[w])
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				if err := xs[w].Exchange(outs[step][w], step); err != nil {
					t.Error(err)
				}
			}(w)
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	return xs, recs, outs
}

func near(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// TestScaleComWorkedExample is the worked example of the design notes
// (ALGORITHMS-COMPRESSORS2.md, "ScaleCom (CLT-k)"): one 2x4 tensor, two
// workers, k = 2 (density 0.25), beta = 0.1, m = 0 at the start.
func TestScaleComWorkedExample(t *testing.T) {
	params := []optim.Param{{Name: "w", Kind: optim.KindLinear, Shape: []int{2, 4}, Value: make([]float32, 8), Grad: make([]float32, 8)}}
	grads := [][][]float32{
		{{0.4, -0.2, 0.1, 0.0, -0.6, 0.3, 0.05, -0.1}, {0.2, -0.1, 0.3, -0.4, -0.5, 0.1, 0.0, 0.2}},
		{{0.3, -0.1, 0.2, 0.1, -0.4, 0.2, -0.05, 0.0}, {0.1, 0.0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1}},
	}
	// Step 0 only first: the values each worker sent are recorded per step.
	xs, recs, outs := exchangeSteps(t, scaleComConfig(0.25, 0.1), params, grads[:1])
	sc := func(w int) *scaleCom { return xs[w].Compressor().(*scaleCom) }
	// Step 0, leader rank 0 (W1): p1 = g1, p2 = g2. |p1| is largest at 4 (0.6)
	// and 0 (0.4): I = {0, 4}.
	if got := sc(1).idx[:2]; !slices.Equal(got, []int32{0, 4}) {
		t.Fatalf("step 0: I = %v, want [0 4]", got)
	}
	// Only the leader sends indices: 2 x 4 bytes.
	if recs[0].gathered != 8 || recs[1].gathered != 0 {
		t.Fatalf("step 0: index bytes %d (leader), %d; want 8, 0", recs[0].gathered, recs[1].gathered)
	}
	// Sent: W1 p1[I] = [0.4, -0.6], W2 p2[I] = [0.2, -0.5].
	near(t, "step 0: W1 sent", recs[0].floats, []float64{0.4, -0.6})
	near(t, "step 0: W2 sent", recs[1].floats, []float64{0.2, -0.5})
	// ghat = scatter(([0.4,-0.6] + [0.2,-0.5]) / 2, I).
	for w := range 2 {
		near(t, "step 0: ghat", outs[0][w], []float64{0.3, 0, 0, 0, -0.55, 0, 0, 0})
	}
	// m = 0.9*0 + 0.1*(p - scatter(c, I)):
	// m1 = 0.1*[0, -0.2, 0.1, 0, 0, 0.3, 0.05, -0.1]
	// m2 = 0.1*[0, -0.1, 0.3, -0.4, 0, 0.1, 0, 0.2]
	near(t, "step 0: m1", sc(0).mem, []float64{0, -0.02, 0.01, 0, 0, 0.03, 0.005, -0.01})
	near(t, "step 0: m2", sc(1).mem, []float64{0, -0.01, 0.03, -0.04, 0, 0.01, 0, 0.02})

	// Both steps from the start, to see step 1 on its own.
	xs, recs, outs = exchangeSteps(t, scaleComConfig(0.25, 0.1), params, grads)
	// Step 1, leader rank 1 (W2): p = g' + m:
	// p1 = [0.3, -0.12, 0.21, 0.1, -0.4, 0.23, -0.045, -0.01]
	// p2 = [0.1, -0.01, 0.23, -0.34, -0.2, 0.11, 0.1, 0.12]
	// |p2| is largest at 3 (0.34) and 2 (0.23): I = {2, 3}; W1's own largest
	// (4 and 0) wait.
	if got := sc(0).idx[:2]; !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("step 1: I = %v, want [2 3]", got)
	}
	// Over both steps, each worker led once: 8 index bytes each.
	if recs[0].gathered != 8 || recs[1].gathered != 8 {
		t.Fatalf("index bytes %d, %d over two steps; want 8, 8", recs[0].gathered, recs[1].gathered)
	}
	near(t, "step 1: W1 sent", recs[0].floats, []float64{0.21, 0.1})
	near(t, "step 1: W2 sent", recs[1].floats, []float64{0.23, -0.34})
	// ghat = scatter(([0.21, 0.1] + [0.23, -0.34]) / 2, I) = [.., 0.22, -0.12, ..].
	for w := range 2 {
		near(t, "step 1: ghat", outs[1][w], []float64{0, 0, 0.22, -0.12, 0, 0, 0, 0})
	}
	// m1 = 0.9*[0, -0.02, 0.01, 0, 0, 0.03, 0.005, -0.01]
	//    + 0.1*[0.3, -0.12, 0, 0, -0.4, 0.23, -0.045, -0.01]
	// m2 = 0.9*[0, -0.01, 0.03, -0.04, 0, 0.01, 0, 0.02]
	//    + 0.1*[0.1, -0.01, 0, 0, -0.2, 0.11, 0.1, 0.12]
	near(t, "step 1: m1", sc(0).mem, []float64{0.03, -0.03, 0.009, 0, -0.04, 0.05, 0, -0.01})
	near(t, "step 1: m2", sc(1).mem, []float64{0.01, -0.01, 0.027, -0.036, -0.02, 0.02, 0.01, 0.03})
}

// TestScaleComMatchesReference runs 3 workers for 5 steps (every worker
// leads at least once) against an independent float64 model of the
// algorithm: p_i = m_i + g_i, I = the k largest |p_leader| (ties to the lower
// index), result = C_I(mean_i p_i), which must equal mean_i C_I(p_i) (the
// commutation the all-reduce relies on), and m_i = (1-beta) m_i + beta (p_i -
// C_I(p_i)).
func TestScaleComMatchesReference(t *testing.T) {
	const n, steps, size, k, beta = 3, 5, 40, 6, 0.3
	params := []optim.Param{{Name: "w", Kind: optim.KindLinear, Shape: []int{4, 10}, Value: make([]float32, size), Grad: make([]float32, size)}}
	grads := make([][][]float32, steps)
	for s := range grads {
		grads[s] = make([][]float32, n)
		for w := range n {
			rng := rand.New(rand.NewPCG(uint64(s), uint64(w)))
			grads[s][w] = make([]float32, size)
			for i := range grads[s][w] {
				grads[s][w][i] = float32(rng.NormFloat64())
			}
		}
	}
	_, _, outs := exchangeSteps(t, scaleComConfig(float64(k)/size, beta), params, grads)
	mem := make([][]float64, n)
	for w := range mem {
		mem[w] = make([]float64, size)
	}
	for s := range steps {
		p := make([][]float64, n)
		for w := range n {
			p[w] = make([]float64, size)
			for i := range p[w] {
				p[w][i] = mem[w][i] + float64(grads[s][w][i])
			}
		}
		lead := p[s%n]
		order := make([]int, size)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			if math.Abs(lead[a]) > math.Abs(lead[b]) {
				return -1
			}
			if math.Abs(lead[a]) < math.Abs(lead[b]) {
				return 1
			}
			return 0
		})
		in := make([]bool, size)
		for _, i := range order[:k] {
			in[i] = true
		}
		want := make([]float64, size)  // C_I(mean_i p_i)
		meanC := make([]float64, size) // mean_i C_I(p_i)
		for i := range want {
			if !in[i] {
				continue
			}
			for w := range n {
				want[i] += p[w][i] / n
				meanC[i] += p[w][i]
			}
			meanC[i] /= n
			if math.Abs(want[i]-meanC[i]) > 1e-12 {
				t.Fatalf("step %d [%d]: mean of compressed %v != compressed mean %v", s, i, meanC[i], want[i])
			}
		}
		for w := range n {
			near(t, "step result", outs[s][w], want)
			for i := range mem[w] {
				sent := 0.0
				if in[i] {
					sent = p[w][i]
				}
				mem[w][i] = (1-beta)*mem[w][i] + beta*(p[w][i]-sent)
			}
		}
	}
}

// TestScaleComBetaOneIsTopK: one worker with beta = 1 is top-k with error
// feedback, bit for bit (the same selection, and m = p - sent).
func TestScaleComBetaOneIsTopK(t *testing.T) {
	params := conformanceParams()
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	grads := make([][][]float32, 6)
	for s := range grads {
		rng := rand.New(rand.NewPCG(uint64(s), 7))
		g := make([]float32, size)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		grads[s] = [][]float32{g}
	}
	sc := scaleComConfig(0.05, 1)
	sc.MinSize = 64
	tk := sc
	tk.Name, tk.Residual = "topk", true
	_, _, got := exchangeSteps(t, sc, params, grads)
	_, _, want := exchangeSteps(t, tk, params, grads)
	for s := range grads {
		for i, v := range got[s][0] {
			if math.Float32bits(v) != math.Float32bits(want[s][0][i]) {
				t.Fatalf("step %d [%d]: scalecom %v, topk %v", s, i, v, want[s][0][i])
			}
		}
	}
}

// TestScaleComBytesFlatInN: what a worker puts on the wire in a step does
// not depend on N: 4k bytes of values, plus 4k bytes of indices when it leads
// (once every N steps), where top-k's all-gather delivers N index sets to
// every worker.
func TestScaleComBytesFlatInN(t *testing.T) {
	params := conformanceParams()
	cfg := scaleComConfig(0.05, 0.1)
	cfg.MinSize = 64
	size, dense, k := 0, 0, 0
	for _, p := range params {
		size += len(p.Value)
		if Compressed(p, cfg.MinSize) {
			k += int(math.Ceil(float64(len(p.Value)) * 0.05)) // 15 + 60
		} else {
			dense += len(p.Value)
		}
	}
	if k != 75 {
		t.Fatalf("k = %d, want 15 + 60", k)
	}
	for _, n := range []int{2, 4, 8} {
		members, err := dist.NewLocal(n)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]*Exchange, n)
		for w := range xs {
			info := func(step int) StepInfo { return StepInfo{Step: step, StepsPerEpoch: 100, Worker: w, Workers: n} }
			if xs[w], err = NewExchange(cfg, params, members[w], 1, Hyper{}, info); err != nil {
				t.Fatal(err)
			}
		}
		for step := range n {
			before := make([]int64, n)
			var wg sync.WaitGroup
			for w, x := range xs {
				before[w] = x.Traffic().Wire
				g := make([]float32, size)
				for i := range g {
					g[i] = float32(math.Sin(float64(i*(w+1) + step)))
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := x.Exchange(g, step); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			for w, x := range xs {
				want := int64(4*dense + 4*k)
				if w == step%n {
					want += int64(4 * k)
				}
				if got := x.Traffic().Wire - before[w]; got != want {
					t.Fatalf("N=%d step %d worker %d: %d bytes, want %d", n, step, w, got, want)
				}
			}
		}
	}
}

// TestScaleComWarmup: during the warm-up k follows DGC's "paper" density
// schedule (0.25^(epoch+1), never below compress.density) and the steps are
// not steady.
func TestScaleComWarmup(t *testing.T) {
	params := []optim.Param{{Name: "w", Kind: optim.KindLinear, Shape: []int{10, 100}, Value: make([]float32, 1000), Grad: make([]float32, 1000)}}
	cfg := scaleComConfig(0.01, 0.1)
	cfg.ScaleCom.WarmupEpochs = 1
	members, err := dist.NewLocal(1)
	if err != nil {
		t.Fatal(err)
	}
	info := func(step int) StepInfo { return StepInfo{Step: step, StepsPerEpoch: 2, Workers: 1} }
	x, err := NewExchange(cfg, params, members[0], 1, Hyper{}, info)
	if err != nil {
		t.Fatal(err)
	}
	sc := x.Compressor().(*scaleCom)
	// Epoch 0: density 0.25, k = 250; epoch 1 on: 0.01, k = 10.
	for step, want := range []int{250, 250, 10, 10} {
		g := make([]float32, 1000)
		for i := range g {
			g[i] = float32(i%13) - 6
		}
		if err := x.Exchange(g, step); err != nil {
			t.Fatal(err)
		}
		if sc.ks[0] != want || sc.Steady(info(step)) != (step >= 2) {
			t.Fatalf("step %d: k = %d steady %v, want k = %d steady %v", step, sc.ks[0], sc.Steady(info(step)), want, step >= 2)
		}
	}
}

func TestScaleComConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		beta   float64
		warmup int
		key    string
	}{{0, 0, "compress.scalecom.beta"}, {1.5, 0, "compress.scalecom.beta"}, {math.NaN(), 0, "compress.scalecom.beta"}, {0.1, -1, "compress.scalecom.warmup_epochs"}} {
		cfg := scaleComConfig(0.01, tc.beta)
		cfg.ScaleCom.WarmupEpochs = tc.warmup
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("beta %v warmup %d: Validate = %v, want a problem with %s", tc.beta, tc.warmup, err, tc.key)
		}
		if _, err := newScaleCom(cfg, nil, 0, 1, 0, Hyper{}); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("beta %v warmup %d: newScaleCom = %v, want a problem with %s", tc.beta, tc.warmup, err, tc.key)
		}
	}
}

// TestScaleComRejectsMalformedIndices: the leader's indices must have the
// step's length, be increasing and in range, and no other worker may send any.
func TestScaleComRejectsMalformedIndices(t *testing.T) {
	tensors := []Tensor{{Name: "w", Shape: []int{2, 4}, Kind: optim.KindLinear, Size: 8}}
	comp, err := newScaleCom(scaleComConfig(0.25, 0.1), tensors, 1, 2, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	info := StepInfo{Step: 0, Worker: 1, Workers: 2} // rank 0 leads
	idx := func(v ...int32) []byte {
		var e Encoder
		e.Int32s(v)
		return slices.Clone(e.Bytes())
	}
	for _, tc := range []struct {
		name    string
		payload [][]byte
		want    string
	}{
		{"repeated", [][]byte{idx(4, 4), nil}, "not increasing"},
		{"decreasing", [][]byte{idx(4, 0), nil}, "not increasing"},
		{"out of range", [][]byte{idx(0, 8), nil}, "not increasing within [0, 8)"},
		{"short", [][]byte{idx(0), nil}, "worker 0 sent 4 index bytes, want 8"},
		{"not the leader", [][]byte{idx(0, 4), idx(1, 2)}, "worker 1 sent 8 index bytes, want 0"},
		{"missing worker", [][]byte{idx(0, 4)}, "1 index payloads for 2 workers"},
	} {
		if _, err := comp.Encode(0, make([]float32, 8), Combined{}, info); err != nil {
			t.Fatal(err)
		}
		_, err := comp.Encode(1, make([]float32, 8), Combined{Bytes: tc.payload, Workers: 2}, info)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if err := comp.DecodeAdd(Payload{Floats: []float32{1, 2, 3}}, make([]float32, 8), info); err == nil {
		t.Error("DecodeAdd accepted 3 values for k = 2")
	}
}
