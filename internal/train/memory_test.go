package train

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// TestCheckMemory: 1,000 parameters; 2 replicas of 16,000 + 50,000 bytes;
// evaluation 30,000; optimizer 4 bytes a parameter: 4,000; 4 workers of
// 1,000 x (4 + 8): 48,000. In all 132,000 + 30,000 + 4,000 + 48,000 = 214,000.
func TestCheckMemory(t *testing.T) {
	est := models.Estimate{Params: 1000, ParamBytes: 4000, ReplicaBytes: 16000, TrainBytes: 50000, EvalBytes: 30000}
	if need, err := checkMemory(est, 2, 4, 4, 8, 214000); err != nil || need != 214000 {
		t.Errorf("exactly enough memory: need %v, error %v; expected 214000 and none", need, err)
	}
	_, err := checkMemory(est, 2, 4, 4, 8, 213999)
	if err == nil {
		t.Fatal("one byte short: no error")
	}
	for _, want := range []string{
		"not enough memory: the run needs about 209.0 KiB, more than the 209.0 KiB available",
		"model replicas (dist.replicas): 2 x 64.5 KiB = 128.9 KiB (1,000 parameters: 15.6 KiB for parameters and gradients, 48.8 KiB for training activations)",
		"evaluation activations (data.eval_batch_size): 29.3 KiB",
		"optimizer state: 3.9 KiB (4 bytes a parameter)",
		"workers (dist.workers): 4 x 11.7 KiB = 46.9 KiB (gradient, exchange buffers and compressor state: 12 bytes a parameter)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nlacks %q", err, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]uint64{
		"123": 123, "512MiB": 512 << 20, "8GiB": 8 << 30, "8G": 8 << 30, "2GB": 2e9, "1.5TiB": 3 << 39, " 64 KiB ": 64 << 10, "7B": 7,
	} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "lots", "8 parsecs", "-1GiB", "1e30TB"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("parseBytes(%q): no error", s)
		}
	}
}

// TestOptimStateBytesPerParam: a momentum buffer is 4 bytes a parameter;
// Adam's and LAMB's two moments 8; NovoGrad's first moment 4 plus one
// second-moment value per tensor (4 bytes per the probe's 1,024 values).
func TestOptimStateBytesPerParam(t *testing.T) {
	for _, tc := range []struct {
		c    optim.Config
		want float64
	}{
		{optim.Config{Name: "sgd", LR: 0.1, Momentum: 0.9}, 4},
		{optim.Config{Name: "sgd", LR: 0.1}, 0},
		{optim.Config{Name: "adam", LR: 1e-3}, 8},
		{optim.Config{Name: "adamw", LR: 1e-3, WeightDecay: 0.01}, 8},
		{optim.Config{Name: "lamb", LR: 1e-3}, 8},
		{optim.Config{Name: "lars", LR: 0.1, Momentum: 0.9}, 4},
		{optim.Config{Name: "novograd", LR: 1e-3}, 4 + 4.0/1024},
	} {
		tc.c.ApplyDefaults()
		got, err := optimStateBytesPerParam(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: %g bytes a parameter, want %g", tc.c.Name, got, tc.want)
		}
	}
}

// TestWorkerExtraBytesMatchesHeap runs two workers' exchanges with every
// compressor on a million-parameter tensor and compares the heap they hold
// after three steps with workerExtraBytesPerParam (plus the 4-byte gradient
// the caller owns here).
func TestWorkerExtraBytesMatchesHeap(t *testing.T) {
	const workers, rows, cols = 2, 1024, 1024
	n := rows * cols
	params := []optim.Param{{Name: "fc.w", Kind: optim.KindLinear, Shape: []int{rows, cols}, Value: make([]float32, n), Grad: make([]float32, n)}}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range params[0].Value {
		params[0].Value[i] = float32(rng.NormFloat64())
	}
	var configs []compress.Config
	for _, name := range compress.Names() {
		c := compress.DefaultConfig()
		c.Name = name
		c.DGC.WarmupEpochs, c.PowerSGD.StartIter = 0, 0 // compress from the first step
		configs = append(configs, c)
	}
	noResidual := compress.DefaultConfig()
	noResidual.Name, noResidual.Residual = "topk", false
	for _, c := range append(configs, noResidual) {
		grads := make([][]float32, workers)
		for w := range grads {
			grads[w] = make([]float32, n)
		}
		before := liveHeap()
		members, err := dist.NewLocal(workers)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]*compress.Exchange, workers)
		for w := range xs {
			ctx := func(step int) compress.StepInfo {
				return compress.StepInfo{Step: step, StepsPerEpoch: 100, Worker: w, Workers: workers, Params: params[0].Value}
			}
			if xs[w], err = compress.NewExchange(c, params, members[w], 1, compress.Hyper{Momentum: 0.9}, ctx); err != nil {
				t.Fatal(err)
			}
		}
		for step := range 3 {
			var wg sync.WaitGroup
			for w := range xs {
				for i := range grads[w] {
					grads[w][i] = float32(rng.NormFloat64())
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := xs[w].Exchange(grads[w], step); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		measured := float64(liveHeap()-before) / float64(workers*n)
		runtime.KeepAlive(xs)
		runtime.KeepAlive(members)
		runtime.KeepAlive(grads)
		want := workerExtraBytesPerParam(c)
		t.Logf("%s (residual %v): %.2f bytes a parameter a worker, table %.2f", c.Name, c.Residual, measured, want)
		listed := want != workerExtraBytesPerParam(compress.Config{Name: "unlisted", Density: c.Density})
		if !listed && measured <= want+1 {
			continue // a new compressor before its row: the estimate only has to err high
		}
		if measured < want-1 || measured > want+1 {
			t.Errorf("%s (residual %v): the exchange holds %.2f bytes a parameter a worker, workerExtraBytesPerParam says %.2f", c.Name, c.Residual, measured, want)
		}
	}
}

// liveHeap is the bytes of live heap objects after collecting garbage.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCheckRunMemory: with GRADWIRE_MEMORY_LIMIT at 8 GiB, the MLP with two
// hidden layers of 100,000 units (784x1e5 + 1e5 + 1e5x1e5 + 1e5 + 1e5x10 + 10
// = 10,079,600,010 parameters, 40 GB each copy) is refused before anything is
// built; the quick-start LeNet-5 passes.
func TestCheckRunMemory(t *testing.T) {
	t.Setenv(memoryLimitEnv, "8GiB")
	fashion := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	big, err := configs.Load("", []string{"model.name=mlp", "model.hidden=100000,100000"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = checkRunMemory(big, fashion, 256, 2, 1)
	if err == nil {
		t.Fatal("a 40 GB model passes an 8 GiB limit")
	}
	for _, want := range []string{"not enough memory", "more than the 8.0 GiB available", "10,079,600,010 parameters", "the limit GRADWIRE_MEMORY_LIMIT sets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nlacks %q", err, want)
		}
	}
	small, err := configs.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkRunMemory(small, fashion, 256, 2, 1); err != nil {
		t.Errorf("LeNet-5 under 8 GiB: %v", err)
	}
	// Many workers of a mid-size model: the workers' buffers are what does not fit.
	many, err := configs.Load("", []string{"model.name=mlp", "model.hidden=4096,4096", "dist.workers=4096", "data.batch_size=1", "compress.name=dgc", "optim.momentum=0.9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkRunMemory(many, fashion, 256, 2, 4096); err == nil || !strings.Contains(err.Error(), "workers (dist.workers): 4096 x") {
		t.Errorf("4096 DGC workers of a 20M-parameter model under 8 GiB: %v", err)
	}
	t.Setenv(memoryLimitEnv, "lots")
	if _, err := checkRunMemory(small, fashion, 256, 2, 1); err == nil || !strings.Contains(err.Error(), `GRADWIRE_MEMORY_LIMIT: "lots"`) {
		t.Errorf("malformed limit: %v", err)
	}
}

// TestFusedPassesNeedMemory: the graphs of fused or grouped passes count
// against the memory available; where they do not fit beside the run, the
// replicas compute their workers one by one and the log says why.
func TestFusedPassesNeedMemory(t *testing.T) {
	cfg := smallConfig(t, "lenet5", "compress.name=dgc", "dist.workers=4", "dist.replicas=2", "train.epochs=1")
	fashion := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	t.Setenv(memoryLimitEnv, "8GiB")
	plan, err := checkRunMemory(cfg, fashion, 256, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	fits, extra, err := plan.fitsFusedPasses(cfg, fashion, 256, 2, 2, true)
	if err != nil || !fits || extra <= 0 {
		t.Fatalf("8 GiB: fits %v, %v bytes, error %v", fits, extra, err)
	}
	// Two replicas, each a training graph over 2 x 16 examples and 2 gradients.
	est, err := models.EstimateMemory(cfg.Model, fashion, 32, 256)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * (float64(est.TrainBytes) + 2*4*float64(est.Params)); extra != want {
		t.Errorf("the grouped passes' graphs: %v bytes, expected %v", extra, want)
	}
	for _, c := range []struct {
		limit float64
		want  string
	}{{plan.need + extra, "passes=grouped"}, {plan.need + extra/2, `passes="one by one"`}} {
		t.Setenv(memoryLimitEnv, fmt.Sprintf("%.0f", c.limit))
		var log strings.Builder
		if _, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
			t.Fatalf("limit %.0f: %v", c.limit, err)
		}
		if !strings.Contains(log.String(), c.want) {
			t.Errorf("limit %.0f bytes (the run %.0f, the fused graphs %.0f): the log lacks %q:\n%s", c.limit, plan.need, extra, c.want, log.String())
		}
		warned := strings.Contains(log.String(), "passes one by one: the graphs over each replica's workers at once would need")
		if warned != (c.want != "passes=grouped") {
			t.Errorf("limit %.0f: the fallback warning is logged: %v", c.limit, warned)
		}
	}
	if fits, _, err := (memoryPlan{}).fitsFusedPasses(cfg, fashion, 256, 2, 2, true); err != nil || !fits {
		t.Errorf("memory available unknown: fits %v, error %v; expected it to fit", fits, err)
	}
}
