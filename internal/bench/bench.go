// Package bench times one training step (forward, backward and an SGD update)
// of each model on a fixed random batch: the figures behind `gradwire bench`
// and the side-by-side comparison in experiments/bench.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/gradwire/gradwire/internal/train"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Case is one model at one batch size with the input shape it is timed on.
type Case struct {
	Model  string
	Config models.Config
	Input  models.Input
	Batch  int
}

// inputs are the shapes each model is timed on: the data sets it trains on in
// the shipped configs (Fashion-MNIST 1x28x28 for mlp, lenet5 and lstm; CIFAR
// 3x32x32 for resnet20; 64-character windows of a 65-symbol vocabulary for
// charlstm). experiments/bench/pytorch_bench.py uses the same shapes.
var inputs = map[string]models.Input{
	"mlp":      {Shape: []int{1, 28, 28}, Classes: 10, YLen: 1},
	"lenet5":   {Shape: []int{1, 28, 28}, Classes: 10, YLen: 1},
	"resnet20": {Shape: []int{3, 32, 32}, Classes: 10, YLen: 1},
	"lstm":     {Shape: []int{1, 28, 28}, Classes: 10, YLen: 1},
	"charlstm": {Shape: []int{64}, Classes: 65, YLen: 64},
}

// Models are the models `gradwire bench` times by default, in table order.
var Models = []string{"mlp", "lenet5", "resnet20", "lstm", "charlstm"}

// NewCase is the named model at the given batch with its default sizes.
func NewCase(model string, batch int, cfg models.Config) (Case, error) {
	in, ok := inputs[model]
	if !ok {
		return Case{}, fmt.Errorf("bench: unknown model %q (valid: %v)", model, Models)
	}
	if batch < 1 {
		return Case{}, fmt.Errorf("bench: batch %d, expected >= 1", batch)
	}
	cfg.Name = model
	if err := train.CheckModelMemory(fmt.Sprintf("bench: %s at batch %d", model, batch), "expected a smaller batch", cfg, in, batch, 1); err != nil {
		return Case{}, err
	}
	return Case{Model: model, Config: cfg, Input: in, Batch: batch}, nil
}

// Result is one case's measurement: trials timed blocks of Steps steps each,
// in one process, after Warmup untimed steps.
type Result struct {
	Model                string    `json:"model"`
	Batch                int       `json:"batch"`
	Input                []int     `json:"input"`
	Params               int       `json:"params"`
	Warmup               int       `json:"warmup"`                  // untimed steps before the first trial
	Steps                int       `json:"steps"`                   // timed steps per trial
	Trials               int       `json:"trials"`                  // timed blocks
	TrialSeconds         []float64 `json:"trial_seconds"`           // median step of each trial, in run order
	BestSeconds          float64   `json:"best_seconds"`            // fastest trial's median step
	MedianSeconds        float64   `json:"median_seconds"`          // median over trials of the trial medians
	Spread               float64   `json:"spread"`                  // slowest trial / fastest trial
	MinSeconds           float64   `json:"min_seconds"`             // fastest single step of all trials
	BestSamplesPerSecond float64   `json:"best_samples_per_second"` // batch / best
	SamplesPerSecond     float64   `json:"samples_per_second"`      // batch / median
	BestGFLOPs           float64   `json:"best_gflop_per_second"`   // FLOPs per step / best; 0 when unknown
	GFLOPs               float64   `json:"gflop_per_second"`        // FLOPs per step / median; 0 when unknown
	FLOPsPerStep         int64     `json:"flop_per_step"`
	AllocBytesPerStep    float64   `json:"alloc_bytes_per_step"` // Go heap bytes allocated per timed step
	AllocsPerStep        float64   `json:"allocs_per_step"`
	BLAS                 string    `json:"blas"`
	BLASCore             string    `json:"blas_core,omitempty"` // OpenBLAS core type (openblas build)
	Ops                  string    `json:"ops"`                 // model.ops: fast or gorgonia
	GOMAXPROCS           int       `json:"gomaxprocs"`
	Machine              string    `json:"machine"` // CPU model, CPUs, memory, vector instructions (version.Machine)
}

// Measure builds the case's model, runs warmup untimed steps, then trials
// timed blocks of steps steps, each step timed on its own. Each step is
// Net.Step plus a plain SGD update (optim.SGD, as training runs it), so that
// the parameters change as in training. A trial's figure is its median step: one slow step (a GC, another
// job on the machine) does not move it. Repeating the block in the same
// process shows how far one block's median can be trusted (Spread); the
// fastest trial is the least disturbed one. The heap is collected before each
// trial, outside the timing, so that every trial starts alike; allocation
// counts cover all timed steps.
func Measure(c Case, steps, warmup, trials int) (Result, error) {
	if steps < 1 || warmup < 0 || trials < 1 {
		return Result{}, fmt.Errorf("bench: %d steps, %d warm-up steps and %d trials, expected steps >= 1, warmup >= 0, trials >= 1", steps, warmup, trials)
	}
	net, err := models.New(c.Config, c.Input, c.Batch, 1, 1)
	if err != nil {
		return Result{}, err
	}
	x, y := randomBatch(c)
	// Training's own optimizer, plain SGD as PyTorch's side runs it; the
	// learning rate is small: the batch is random, the update only has to
	// happen.
	const lr = 1e-3
	opt, err := optim.NewSGD(optim.Config{Name: "sgd", LR: lr})
	if err != nil {
		return Result{}, err
	}
	params := net.Params()
	step := func() error {
		if _, err := net.Step(x, y); err != nil {
			return err
		}
		return opt.Step(params, lr)
	}
	for range warmup {
		if err := step(); err != nil {
			return Result{}, err
		}
	}
	var allocBytes, allocs uint64
	trialSeconds := make([]float64, trials)
	minStep := math.Inf(1)
	times := make([]float64, steps)
	for tr := range trialSeconds {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range times {
			t0 := time.Now()
			if err := step(); err != nil {
				return Result{}, err
			}
			times[i] = time.Since(t0).Seconds()
		}
		runtime.ReadMemStats(&after)
		allocBytes += after.TotalAlloc - before.TotalAlloc
		allocs += after.Mallocs - before.Mallocs
		slices.Sort(times)
		trialSeconds[tr] = median(times)
		minStep = min(minStep, times[0])
	}
	s := Summarize(trialSeconds)
	timed := float64(steps * trials)
	r := Result{
		Model: c.Model, Batch: c.Batch, Input: c.Input.Shape, Params: net.NumParams(),
		Warmup: warmup, Steps: steps, Trials: trials, TrialSeconds: trialSeconds,
		BestSeconds: s.Best, MedianSeconds: s.Median, Spread: s.Spread, MinSeconds: minStep,
		BestSamplesPerSecond: float64(c.Batch) / s.Best, SamplesPerSecond: float64(c.Batch) / s.Median,
		FLOPsPerStep:      net.TrainFLOPs(),
		AllocBytesPerStep: float64(allocBytes) / timed,
		AllocsPerStep:     float64(allocs) / timed,
		BLAS:              models.BLAS,
		BLASCore:          models.BLASCoreType(),
		Ops:               c.Config.Ops,
		GOMAXPROCS:        runtime.GOMAXPROCS(0),
		Machine:           version.Machine(),
	}
	if r.Ops == "" {
		r.Ops = models.OpsFast
	}
	if r.FLOPsPerStep > 0 {
		r.BestGFLOPs = float64(r.FLOPsPerStep) / s.Best / 1e9
		r.GFLOPs = float64(r.FLOPsPerStep) / s.Median / 1e9
	}
	return r, nil
}

// TrialStats summarises the per-trial step times of one measurement.
type TrialStats struct {
	Best   float64 // fastest trial
	Median float64 // median trial (mean of the middle two for an even count)
	Spread float64 // slowest / fastest; 1 when all trials agree
}

// Summarize is the best, median and spread of per-trial step times (seconds,
// any order, at least one). experiments/bench/benchstats.py computes the same
// figures over the trials of several processes.
func Summarize(trials []float64) TrialStats {
	sorted := slices.Sorted(slices.Values(trials))
	return TrialStats{Best: sorted[0], Median: median(sorted), Spread: sorted[len(sorted)-1] / sorted[0]}
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// randomBatch is a fixed random batch: normal pixels or uniform token ids, and
// uniform labels.
func randomBatch(c Case) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(1, 2))
	size := c.Batch
	for _, d := range c.Input.Shape {
		size *= d
	}
	x := make([]float32, size)
	tokens := c.Input.YLen > 1
	for i := range x {
		if tokens {
			x[i] = float32(rng.IntN(c.Input.Classes))
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	y := make([]int32, c.Batch*c.Input.YLen)
	for i := range y {
		y[i] = int32(rng.IntN(c.Input.Classes))
	}
	return x, y
}
