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
		ctx := func(step int) Context { return Context{Step: step, Workers: 2, Worker: w} }
		if xs[w], err = NewExchange(cfg, params, members[w], 1, Hyper{}, ctx); err != nil {
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
