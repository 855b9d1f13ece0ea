package compress

import (
	"slices"
	"testing"
)

func randomKConfig(density float64, residual, fp16 bool) Config {
	c := topKConfig(density, residual, fp16)
	c.Name = "randomk"
	return c
}

// randomKIndices returns the positions c drew for its last step, per tensor.
func randomKIndices(c *sender) [][]int32 {
	r := unwrapFeedback(c).(*randomK)
	var out [][]int32
	for ti := range r.tensors {
		out = append(out, slices.Clone(r.idx[r.koff[ti]:r.koff[ti]+r.ks[ti]]))
	}
	return out
}

// checkDrawn fails unless idx holds k increasing positions in [0, n).
func checkDrawn(t *testing.T, idx []int32, k, n int) {
	t.Helper()
	if len(idx) != k {
		t.Fatalf("%d positions, want %d", len(idx), k)
	}
	for j, i := range idx {
		if i < 0 || int(i) >= n || (j > 0 && i <= idx[j-1]) {
			t.Fatalf("positions %v: not increasing within [0, %d)", idx, n)
		}
	}
}

func TestRandomKSameIndicesOnEveryWorker(t *testing.T) {
	// Two tensors of 100 and 60 elements at density 0.1: k = 10 and 6.
	tensors := baselineTensors([]int{10, 10}, []int{6, 10})
	const workers = 3
	cs := make([]*sender, workers)
	for w := range cs {
		cs[w] = baselineBuild(t, "randomk", randomKConfig(0.1, true, false), tensors, w, workers)
	}
	drawn := func(step int) [][]int32 {
		var first [][]int32
		for w, c := range cs {
			g := make([]float32, 160)
			for i := range g {
				g[i] = float32(w*1000 + i) // different gradients on every worker
			}
			if _, err := c.Compress(0, g, Combined{}, StepInfo{Step: step, Worker: w, Workers: workers}); err != nil {
				t.Fatal(err)
			}
			idx := randomKIndices(c)
			checkDrawn(t, idx[0], 10, 100)
			checkDrawn(t, idx[1], 6, 60)
			if w == 0 {
				first = idx
			} else if !slices.EqualFunc(idx, first, slices.Equal) {
				t.Fatalf("step %d: worker %d drew %v, worker 0 %v", step, w, idx, first)
			}
		}
		return first
	}
	s5, s6 := drawn(5), drawn(6)
	if slices.Equal(s5[0], s6[0]) && slices.Equal(s5[1], s6[1]) {
		t.Fatalf("steps 5 and 6 drew the same positions %v", s5)
	}
	// The positions depend on the step alone, not on what ran before: a
	// compressor that starts at step 5 (a resumed run) draws the same.
	late := baselineBuild(t, "randomk", randomKConfig(0.1, true, false), tensors, 0, workers)
	if _, err := late.Compress(0, make([]float32, 160), Combined{}, StepInfo{Step: 5, Workers: workers}); err != nil {
		t.Fatal(err)
	}
	if got := randomKIndices(late); !slices.EqualFunc(got, s5, slices.Equal) {
		t.Fatalf("a fresh compressor drew %v at step 5, want %v", got, s5)
	}
	// Another seed draws other positions.
	otherC, err := newRandomK(randomKConfig(0.1, true, false), tensors, 0, workers, 8, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	other := newSender("randomk", otherC, packedSize(tensors))
	if _, err := other.Compress(0, make([]float32, 160), Combined{}, StepInfo{Step: 5, Workers: workers}); err != nil {
		t.Fatal(err)
	}
	if got := randomKIndices(other); slices.Equal(got[0], s5[0]) {
		t.Fatalf("seeds 7 and 8 drew the same positions %v", got[0])
	}
}

func TestRandomKValuesAreTheWorkersMean(t *testing.T) {
	// Worker w's gradient is i + 100w at position i; the unscaled values
	// summed over 3 workers and divided by 3 are i + 100 at the drawn
	// positions (exact in float32), zero elsewhere.
	tensors := baselineTensors([]int{5, 8}) // 40 elements, k = ceil(40*0.2) = 8
	const workers = 3
	sum := make([]float32, 8)
	cs := make([]*sender, workers)
	info := StepInfo{Step: 3, Workers: workers}
	for w := range cs {
		cs[w] = baselineBuild(t, "randomk", randomKConfig(0.2, false, false), tensors, w, workers)
		g := make([]float32, 40)
		for i := range g {
			g[i] = float32(i + 100*w)
		}
		p, err := cs[w].Compress(0, g, Combined{}, info)
		if err != nil {
			t.Fatal(err)
		}
		if p.Wire != 32 || !slices.Equal(p.TensorWire, []int64{32}) || len(p.Floats) != 8 {
			t.Fatalf("wire %d, per tensor %v, %d floats; want 32, [32], 8", p.Wire, p.TensorWire, len(p.Floats))
		}
		idx := randomKIndices(cs[w])[0]
		for j, i := range idx {
			if p.Floats[j] != float32(int(i)+100*w) {
				t.Fatalf("worker %d sends %v for position %d, want its gradient %d unscaled", w, p.Floats[j], i, int(i)+100*w)
			}
			sum[j] += p.Floats[j]
		}
	}
	idx := randomKIndices(cs[0])[0]
	want := make([]float32, 40)
	for _, i := range idx {
		want[i] = float32(i + 100)
	}
	for _, c := range cs {
		dst := make([]float32, 40)
		// Every worker gets its own copy of the sum, as from an all-reduce.
		if err := c.Decompress(Combined{Floats: slices.Clone(sum), Workers: workers}, dst, info); err != nil {
			t.Fatal(err)
		}
		baselineClose(t, "mean", dst, want, 0)
	}
}

func TestRandomKResidual(t *testing.T) {
	// One 4x5 tensor at density 0.25: k = 5.
	c := baselineBuild(t, "randomk", randomKConfig(0.25, true, false), baselineTensors([]int{4, 5}), 0, 1)
	ef := c.Feedback()
	g := make([]float32, 20)
	for i := range g {
		g[i] = float32(i + 1)
	}
	// Step 0: the values are g at the drawn positions; the residual is g
	// with those positions zeroed.
	p, err := c.Compress(0, slices.Clone(g), Combined{}, StepInfo{Step: 0, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	idx0 := randomKIndices(c)[0]
	wantRes := slices.Clone(g)
	for j, i := range idx0 {
		if p.Floats[j] != g[i] {
			t.Fatalf("step 0 sends %v at %d, want %v", p.Floats[j], i, g[i])
		}
		wantRes[i] = 0
	}
	baselineClose(t, "step 0 residual", ef.Residual(), wantRes, 0)
	// Step 1 with a constant 0.5: compensated = 0.5 + residual, so a position
	// not sent at step 0 carries its old value i+1 with it; one sent at step
	// 0 sends 0.5 alone.
	p, err = c.Compress(0, slices.Repeat([]float32{0.5}, 20), Combined{}, StepInfo{Step: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	idx1 := randomKIndices(c)[0]
	carried := 0
	for j, i := range idx1 {
		want := 0.5 + wantRes[i]
		if p.Floats[j] != want {
			t.Fatalf("step 1 sends %v at %d, want 0.5 + residual %v", p.Floats[j], i, wantRes[i])
		}
		if wantRes[i] != 0 {
			carried++
		}
	}
	if carried == 0 {
		t.Fatalf("steps 0 (%v) and 1 (%v) drew the same positions: the test shows nothing", idx0, idx1)
	}
}

func TestRandomKFP16Values(t *testing.T) {
	// One 4x5 tensor at density 0.25: k = 5 values of 2 bytes.
	c := baselineBuild(t, "randomk", randomKConfig(0.25, true, true), baselineTensors([]int{4, 5}), 0, 1)
	// 0.1 = 1.6*2^-4 in half precision: 0.6*1024 = 614.4 -> 614, so
	// (1+614/1024)/16 = 0.0999755859375; the residual keeps float32(0.1) minus
	// that, 2.4415553e-5.
	p, err := c.Compress(0, slices.Repeat([]float32{0.1}, 20), Combined{}, StepInfo{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Wire != 10 || !slices.Equal(p.TensorWire, []int64{10}) {
		t.Fatalf("wire %d, per tensor %v; want 10, [10]", p.Wire, p.TensorWire)
	}
	baselineClose(t, "values", p.Floats, slices.Repeat([]float32{0.0999755859375}, 5), 0)
	want := slices.Repeat([]float32{0.1}, 20)
	for _, i := range randomKIndices(c)[0] {
		want[i] = 2.4415553e-5
	}
	baselineClose(t, "residual", c.Feedback().Residual(), want, 1e-11)
}

func TestRandomKDrawsUniformly(t *testing.T) {
	// 2000 draws of 10 of 100 positions: each is drawn 200 times on average,
	// with a standard deviation of sqrt(2000*0.1*0.9) = 13.4; a biased draw
	// (say, never the last position) lands far outside 200 +- 70.
	c := baselineBuild(t, "randomk", randomKConfig(0.1, false, false), baselineTensors([]int{10, 10}), 0, 1)
	r := unwrapFeedback(c).(*randomK)
	var count [100]int
	for step := range 2000 {
		r.draw(step)
		for _, i := range r.idx {
			count[i]++
		}
	}
	for i, n := range count {
		if n < 130 || n > 270 {
			t.Fatalf("position %d drawn %d times in 2000 draws, want about 200", i, n)
		}
	}
}

func TestRandomKRejectsBadSums(t *testing.T) {
	c := baselineBuild(t, "randomk", randomKConfig(0.25, true, false), baselineTensors([]int{2, 4}), 0, 2)
	info := StepInfo{Workers: 2}
	if _, err := c.Compress(0, make([]float32, 8), Combined{}, info); err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 8)
	for name, last := range map[string]Combined{
		"short":      {Floats: make([]float32, 1), Workers: 2},
		"long":       {Floats: make([]float32, 3), Workers: 2},
		"no workers": {Floats: make([]float32, 2), Workers: 0},
	} {
		if err := c.Decompress(last, dst, info); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func BenchmarkRandomK(b *testing.B) { benchBaseline(b, "randomk") }
