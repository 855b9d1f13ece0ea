// Package bench times one training step (forward, backward and an SGD update)
// of each model on a fixed random batch: the figures behind `gradwire bench`
// and the side-by-side comparison in experiments/bench.
package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/gradwire/gradwire/models"
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
	return Case{Model: model, Config: cfg, Input: in, Batch: batch}, nil
}

// Result is one case's measurement.
type Result struct {
	Model             string  `json:"model"`
	Batch             int     `json:"batch"`
	Input             []int   `json:"input"`
	Params            int     `json:"params"`
	Steps             int     `json:"steps"`              // timed steps
	MedianSeconds     float64 `json:"median_seconds"`     // per step
	MinSeconds        float64 `json:"min_seconds"`        // fastest step
	SamplesPerSecond  float64 `json:"samples_per_second"` // batch / median
	GFLOPs            float64 `json:"gflop_per_second"`   // model FLOPs per step / median; 0 when unknown
	FLOPsPerStep      int64   `json:"flop_per_step"`
	AllocBytesPerStep float64 `json:"alloc_bytes_per_step"` // Go heap bytes allocated per step
	AllocsPerStep     float64 `json:"allocs_per_step"`
	BLAS              string  `json:"blas"`
	BLASCore          string  `json:"blas_core,omitempty"` // OpenBLAS core type (openblas build)
	Ops               string  `json:"ops"`                 // model.ops: fast or gorgonia
}

// Measure builds the case's model, runs warmup untimed steps, then times steps
// steps one by one. Each step is Net.Step plus a plain SGD update, so that the
// parameters change as in training. Allocation counts cover the timed steps.
func Measure(c Case, steps, warmup int) (Result, error) {
	if steps < 1 || warmup < 0 {
		return Result{}, fmt.Errorf("bench: %d steps and %d warm-up steps, expected >= 1 and >= 0", steps, warmup)
	}
	net, err := models.New(c.Config, c.Input, c.Batch, 1, 1)
	if err != nil {
		return Result{}, err
	}
	x, y := randomBatch(c)
	flat, grad := net.Flat(), net.Grad()
	step := func() error {
		if _, err := net.Step(x, y); err != nil {
			return err
		}
		const lr = 1e-3 // small: the batch is random, the update only has to happen
		for i, g := range grad {
			flat[i] -= lr * g
		}
		return nil
	}
	for range warmup {
		if err := step(); err != nil {
			return Result{}, err
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	times := make([]float64, steps)
	for i := range times {
		t0 := time.Now()
		if err := step(); err != nil {
			return Result{}, err
		}
		times[i] = time.Since(t0).Seconds()
	}
	runtime.ReadMemStats(&after)
	slices.Sort(times)
	med := median(times)
	r := Result{
		Model: c.Model, Batch: c.Batch, Input: c.Input.Shape, Params: net.NumParams(), Steps: steps,
		MedianSeconds: med, MinSeconds: times[0], SamplesPerSecond: float64(c.Batch) / med,
		FLOPsPerStep:      net.TrainFLOPs(),
		AllocBytesPerStep: float64(after.TotalAlloc-before.TotalAlloc) / float64(steps),
		AllocsPerStep:     float64(after.Mallocs-before.Mallocs) / float64(steps),
		BLAS:              models.BLAS,
		BLASCore:          models.BLASCoreType(),
		Ops:               c.Config.Ops,
	}
	if r.Ops == "" {
		r.Ops = models.OpsFast
	}
	if r.FLOPsPerStep > 0 {
		r.GFLOPs = float64(r.FLOPsPerStep) / med / 1e9
	}
	return r, nil
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
