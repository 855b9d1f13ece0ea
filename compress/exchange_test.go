package compress

import (
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
)

// With dense_fp16 the dense tensors cost 2 bytes a value and arrive rounded to
// half precision: 1/3 is 0.333251953125 in float16.
func TestExchangeDenseFP16(t *testing.T) {
	members, err := dist.NewLocal(2)
	if err != nil {
		t.Fatal(err)
	}
	params := conformanceParams()
	cfg := conformanceConfig("topk")
	cfg.DenseFP16 = true
	xs := make([]*Exchange, 2)
	for w := range xs {
		info := func(step int) StepInfo { return StepInfo{Step: step, Workers: 2, Worker: w} }
		if xs[w], err = NewExchange(cfg, params, members[w], 1, Hyper{}, info); err != nil {
			t.Fatal(err)
		}
	}
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	outs := make([][]float32, 2)
	var wg sync.WaitGroup
	for w := range xs {
		outs[w] = make([]float32, size)
		for i := range outs[w] {
			outs[w][i] = 1.0 / 3
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := xs[w].Exchange(outs[w], 0); err != nil {
				t.Error(err)
			}
		}(w)
	}
	wg.Wait()
	denseValues := len(xs[0].dbuf)
	tr := xs[0].Traffic()
	if tr.DenseStep != int64(2*denseValues) {
		t.Fatalf("dense step %d bytes, want 2 x %d", tr.DenseStep, denseValues)
	}
	d := xs[0].dense[0]
	if got := outs[0][d.FlatOffset]; got != 0.333251953125 {
		t.Fatalf("dense value %v, want 1/3 rounded to float16 (0.333251953125)", got)
	}
}

// Float64 gradients travel dense at 8 bytes a value; the mean of 1e8, 1,
// -1e8 and 1 is 0.5 in float64 (float32 would lose the ones).
func TestExchange64(t *testing.T) {
	const n = 4
	members, err := dist.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	params := conformanceParams()
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	data := []float64{1e8, 1, -1e8, 1}
	var wg sync.WaitGroup
	xs := make([]*Exchange, n)
	for w := range xs {
		info := func(step int) StepInfo { return StepInfo{Step: step, Workers: n, Worker: w} }
		if xs[w], err = NewExchange(DefaultConfig(), params, members[w], 1, Hyper{}, info); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			g := make([]float64, size)
			for i := range g {
				g[i] = data[w]
			}
			if err := xs[w].Exchange64(g, 0); err != nil {
				t.Error(err)
			}
			for i, v := range g {
				if v != 0.5 {
					t.Errorf("worker %d: mean [%d] = %v, want 0.5", w, i, v)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if tr := xs[0].Traffic(); tr.Wire != int64(8*size) || tr.Dense != int64(4*size) {
		t.Fatalf("traffic %+v: want %d bytes sent (8 a value) against %d dense float32", tr, 8*size, 4*size)
	}
	topk, err := NewExchange(conformanceConfig("topk"), params, members[0], 1, Hyper{}, func(int) StepInfo { return StepInfo{} })
	if err != nil {
		t.Fatal(err)
	}
	if err := topk.Exchange64(make([]float64, size), 0); err == nil {
		t.Fatal("a compressing exchange took float64 gradients")
	}
}

// TestExchangeCodecSeconds: the compressor's own time is counted in steady
// steps with others (top-k on two workers), not without a compressor and not
// for a lone worker.
func TestExchangeCodecSeconds(t *testing.T) {
	params := conformanceParams()
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	run := func(name string, workers int) float64 {
		members, err := dist.NewLocal(workers)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]*Exchange, workers)
		for w := range xs {
			info := func(step int) StepInfo { return StepInfo{Step: step, Workers: workers, Worker: w} }
			if xs[w], err = NewExchange(conformanceConfig(name), params, members[w], 1, Hyper{}, info); err != nil {
				t.Fatal(err)
			}
		}
		for step := range 3 {
			var wg sync.WaitGroup
			for w := range xs {
				g := make([]float32, size)
				for i := range g {
					g[i] = float32(i%7) - 3
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := xs[w].Exchange(g, step); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		return xs[0].CodecSeconds()
	}
	if s := run("topk", 2); !(s > 0) {
		t.Errorf("top-k on 2 workers: codec %v s a step, want > 0", s)
	}
	if s := run("none", 2); s != 0 {
		t.Errorf("no compressor: codec %v s a step, want 0", s)
	}
	if s := run("topk", 1); s != 0 {
		t.Errorf("one worker: codec %v s a step, want 0 (nothing is exchanged)", s)
	}
}
