package train

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
)

// BenchmarkReplicas measures one data-parallel step (2 logical workers, batch 64
// each, gradient all-reduce included) on 1 and on 2 replicas, for the speed-up
// that running replicas in parallel gives on the cores.
func BenchmarkReplicas(b *testing.B) {
	for _, tc := range []struct {
		model string
		in    models.Input
	}{
		{"lenet5", models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
		{"lstm", models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
	} {
		for _, replicas := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/replicas=%d", tc.model, replicas), func(b *testing.B) {
				const workers, batch = 2, 64
				members, err := dist.NewLocal(workers)
				if err != nil {
					b.Fatal(err)
				}
				reps := make([]dist.Replica, replicas)
				for r := range reps {
					net, err := models.New(models.Config{Name: tc.model}, tc.in, batch, 0, 1)
					if err != nil {
						b.Fatal(err)
					}
					reps[r] = net
				}
				dense := compress.DefaultConfig() // none: every tensor all-reduced dense
				ex := make([]dist.Exchanger, workers)
				for w, m := range members {
					step := func(step int) compress.StepInfo { return compress.StepInfo{Step: step, Worker: w, Workers: workers} }
					if ex[w], err = compress.NewExchange(dense, reps[0].(*models.Net).Params(), m, 1, compress.Hyper{}, step); err != nil {
						b.Fatal(err)
					}
				}
				e, err := dist.NewEngine(members, reps, ex)
				if err != nil {
					b.Fatal(err)
				}
				x, y := randomImages(batch)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := e.Step(i, func(int) ([]float32, []int32) { return x, y }); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(workers*batch*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// timedCompressor measures the time a worker spends compressing and
// decompressing (not waiting in the collective).
type timedCompressor struct {
	compress.Compressor
	spent *time.Duration
}

func (t timedCompressor) Encode(r int, g []float32, prev compress.Combined, ctx compress.StepInfo) (compress.Payload, error) {
	t0 := time.Now()
	p, err := t.Compressor.Encode(r, g, prev, ctx)
	*t.spent += time.Since(t0)
	return p, err
}

func (t timedCompressor) DecodeAdd(p compress.Payload, dst []float32, ctx compress.StepInfo) error {
	t0 := time.Now()
	err := t.Compressor.DecodeAdd(p, dst, ctx)
	*t.spent += time.Since(t0)
	return err
}

// timedWhole times a compressor that decodes the combined result itself.
type timedWhole struct{ timedCompressor }

func (t timedWhole) DecodeMean(last compress.Combined, dst []float32, ctx compress.StepInfo) error {
	t0 := time.Now()
	err := t.Compressor.(compress.CombinedDecoder).DecodeMean(last, dst, ctx)
	*t.spent += time.Since(t0)
	return err
}

// BenchmarkCompressionShare measures the share of a lenet5 training step (8
// workers of batch 32 on 2 replicas, every weight tensor compressed) that the
// compressors' own work takes: compress and decompress time summed over the
// workers, against the step time summed over the 2 cores.
func BenchmarkCompressionShare(b *testing.B) {
	in := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	for _, name := range []string{"dgc", "topk", "adacomp", "powersgd", "onebit"} {
		b.Run(name, func(b *testing.B) {
			const workers, batch, replicas = 8, 32, 2
			members, err := dist.NewLocal(workers)
			if err != nil {
				b.Fatal(err)
			}
			reps := make([]dist.Replica, replicas)
			var net0 *models.Net
			for r := range reps {
				net, err := models.New(models.Config{Name: "lenet5"}, in, batch, 0, 1)
				if err != nil {
					b.Fatal(err)
				}
				reps[r] = net
				if r == 0 {
					net0 = net
				}
			}
			spent := make([]time.Duration, workers)
			timed := "timed-" + name
			build := compress.Registry[name]
			compress.Registry[timed] = func(c compress.Config, ts []compress.Tensor, w, n int, seed int64, h compress.Hyper) (compress.Compressor, error) {
				inner, err := build(c, ts, w, n, seed, h)
				if _, ok := inner.(compress.CombinedDecoder); ok {
					return timedWhole{timedCompressor{inner, &spent[w]}}, err
				}
				return timedCompressor{inner, &spent[w]}, err
			}
			defer delete(compress.Registry, timed)
			cfg := compress.DefaultConfig()
			cfg.Name, cfg.MinSize, cfg.DGC.WarmupEpochs, cfg.PowerSGD.StartIter, cfg.PowerSGD.Rank = timed, 0, 0, 0, 2
			ex := make([]dist.Exchanger, workers)
			for w, m := range members {
				ctx := func(step int) compress.StepInfo {
					return compress.StepInfo{Step: step, StepsPerEpoch: 1000, Worker: m.Rank(), Workers: workers, Params: net0.Flat()}
				}
				if ex[w], err = compress.NewExchange(cfg, net0.Params(), m, 1, compress.Hyper{Momentum: 0.9}, ctx); err != nil {
					b.Fatal(err)
				}
			}
			e, err := dist.NewEngine(members, reps, ex)
			if err != nil {
				b.Fatal(err)
			}
			x, y := randomImages(batch)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Step(i, func(int) ([]float32, []int32) { return x, y }); err != nil {
					b.Fatal(err)
				}
			}
			var total time.Duration
			for _, d := range spent {
				total += d
			}
			b.ReportMetric(float64(workers*batch*b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(total.Seconds()*1e3/float64(workers*b.N), "compress-ms/worker-step")
			b.ReportMetric(100*total.Seconds()/(replicas*b.Elapsed().Seconds()), "compress-%-of-step")
		})
	}
}

// randomImages is a fixed random batch of 1x28x28 inputs with labels in [0, 10).
func randomImages(batch int) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, batch*784)
	y := make([]int32, batch)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range y {
		y[i] = int32(rng.IntN(10))
	}
	return x, y
}
