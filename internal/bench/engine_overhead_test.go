package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// stubReplica stands in for a model in the engine: its Step copies one of a
// few fixed gradients (x[0] says which), so that what a step costs beyond
// the copy is the engine's, the exchanges' and the collective's alone.
type stubReplica struct {
	flat, grad []float32
	per        [][]float32 // gradient of each worker
}

func (s *stubReplica) Step(x []float32, _ []int32) (float64, error) {
	copy(s.grad, s.per[int(x[0])])
	return 1, nil
}
func (s *stubReplica) Grad() []float32 { return s.grad }
func (s *stubReplica) Flat() []float32 { return s.flat }

// stubEngine is the engine of a run of the model's tensors over stub replicas
// with the compressor and SGD, as newEngineRun builds it.
type stubEngine struct {
	engine *dist.Engine
	params []optim.Param
	opt    optim.Optimizer
	xs     [][]float32
}

func newStubEngine(tb testing.TB, model string, workers, replicas int, comp string) *stubEngine {
	c, err := NewCase(model, 1, models.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	net, err := models.New(c.Config, c.Input, 1, 1, 1)
	if err != nil {
		tb.Fatal(err)
	}
	n := net.NumParams()
	rng := rand.New(rand.NewPCG(3, 4))
	per := make([][]float32, workers)
	for w := range per {
		per[w] = make([]float32, n)
		for i := range per[w] {
			per[w][i] = float32(rng.NormFloat64())
		}
	}
	reps := make([]dist.Replica, replicas)
	for r := range reps {
		s := &stubReplica{flat: make([]float32, n), grad: make([]float32, n), per: per}
		copy(s.flat, net.Flat())
		reps[r] = s
	}
	// Replica 0's tensors, as optim.Params over its buffers.
	params := net.Params()
	flat0, grad0 := reps[0].Flat(), reps[0].Grad()
	off := 0
	for i := range params {
		l := len(params[i].Value)
		params[i].Value, params[i].Grad = flat0[off:off+l], grad0[off:off+l]
		off += l
	}
	cfg := engineConfig(c, Scenario{Workers: workers, Replicas: replicas, Compress: comp}).Compress
	members, err := dist.NewLocal(workers)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	o := optim.DefaultConfig()
	hyper := compress.Hyper{Momentum: o.Momentum, WeightDecay: o.WeightDecay}
	ex := make([]dist.Exchanger, workers)
	var first *compress.Exchange
	for w, m := range members {
		info := func(step int) compress.StepInfo {
			return compress.StepInfo{Step: step, StepsPerEpoch: 1000, Worker: w, Workers: workers, Params: flat0}
		}
		x, err := compress.NewExchange(cfg, params, m, 1, hyper, info)
		if err != nil {
			tb.Fatal(err)
		}
		if w == 0 {
			first = x
		}
		ex[w] = x
	}
	e, err := dist.NewEngine(members, reps, ex)
	if err != nil {
		tb.Fatal(err)
	}
	opt, err := optim.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	if comp := first.Compressor(); comp != nil && comp.Needs().OwnsMomentum {
		for _, t := range first.CompressedTensors() {
			opt.(*optim.SGD).PlainSteps(t.Name)
		}
	}
	xs := make([][]float32, workers)
	for w := range xs {
		xs[w] = []float32{float32(w)}
	}
	return &stubEngine{engine: e, params: params, opt: opt, xs: xs}
}

// step is a training step; worker w gets gradient (w+i) mod workers, so
// that every worker's gradient changes from step to step.
func (s *stubEngine) step(tb testing.TB, i int) {
	for w, x := range s.xs {
		x[0] = float32((w + i) % len(s.xs))
	}
	if _, err := s.engine.Step(i, func(w int) ([]float32, []int32) { return s.xs[w], nil }); err != nil {
		tb.Fatal(err)
	}
	if err := s.opt.Step(s.params, 1e-3); err != nil {
		tb.Fatal(err)
	}
	s.engine.SyncReplicas()
}

// BenchmarkEngineOverhead times a training step whose gradients cost only a
// copy: the engine, the exchanges, the in-process collective and SGD.
func BenchmarkEngineOverhead(b *testing.B) {
	for _, model := range []string{"mlp", "resnet20"} {
		for _, sc := range []Scenario{{1, 1, "none", false}, {8, 2, "none", false}, {8, 2, "dgc", false}, {8, 2, "powersgd", false}} {
			b.Run(fmt.Sprintf("%s/%d-%d-%s", model, sc.Workers, sc.Replicas, sc.Compress), func(b *testing.B) {
				s := newStubEngine(b, model, sc.Workers, sc.Replicas, sc.Compress)
				s.step(b, 0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					s.step(b, i+1)
				}
			})
		}
	}
}

// TestEngineStepAllocations bounds what a training step of the engine, the
// exchanges and SGD allocates once warmed up: the goroutines of a step, not
// buffers the size of the model (mlp: 2 MB of gradient). DGC is left out:
// over stub gradients that never shrink, its velocity, and with it the set
// of candidates its selection collects, grow step after step, and so do the
// selection's buffers (to the largest set met, as they should).
func TestEngineStepAllocations(t *testing.T) {
	for _, comp := range []string{"none", "powersgd"} {
		s := newStubEngine(t, "mlp", 8, 2, comp)
		for i := range 30 {
			s.step(t, i)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const steps = 20
		for i := range steps {
			s.step(t, 30+i)
		}
		runtime.ReadMemStats(&after)
		perStep := float64(after.TotalAlloc-before.TotalAlloc) / steps
		t.Logf("%s: %.0f bytes, %.1f allocations per step", comp, perStep, float64(after.Mallocs-before.Mallocs)/steps)
		if perStep > 64<<10 {
			t.Errorf("%s: %.0f bytes allocated per step, want at most 64 KiB", comp, perStep)
		}
	}
}
