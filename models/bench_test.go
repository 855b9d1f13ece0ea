package models

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// trainStepCases are the models timed by BenchmarkTrainStep: one line per model
// and layer implementation (model.ops) where the model has fast ops.
var trainStepCases = []struct {
	name  string
	cfg   Config
	in    Input
	batch int
}{
	{"mlp/b128/fast", Config{Name: "mlp"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 128},
	{"mlp/b128/gorgonia", Config{Name: "mlp", Ops: OpsGorgonia}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 128},
	{"lenet5/b64/fast", Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 64},
	{"lenet5/b64/gorgonia", Config{Name: "lenet5", Ops: OpsGorgonia}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 64},
	{"resnet20/b64/fast", Config{Name: "resnet20"}, Input{Shape: []int{3, 32, 32}, Classes: 10, YLen: 1}, 64},
	{"resnet20/b64/gorgonia", Config{Name: "resnet20", Ops: OpsGorgonia}, Input{Shape: []int{3, 32, 32}, Classes: 10, YLen: 1}, 64},
	{"lstm/b64/fast", Config{Name: "lstm"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 64},
	{"lstm/b64/gorgonia", Config{Name: "lstm", Ops: OpsGorgonia}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 64},
	{"charlstm/b32/fast", Config{Name: "charlstm"}, Input{Shape: []int{64}, Classes: 65, YLen: 64}, 32},
	{"charlstm/b32/gorgonia", Config{Name: "charlstm", Ops: OpsGorgonia}, Input{Shape: []int{64}, Classes: 65, YLen: 64}, 32},
}

// BenchmarkTrainStep times one forward and backward pass (Net.Step) on a random
// batch, reporting samples/s and allocations per step (B/op); the model.ops
// variants of a model run one after the other, so compare them within one run.
// Select with -bench 'TrainStep/resnet20', and time the OpenBLAS build with
// -tags openblas.
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range trainStepCases {
		b.Run(c.name, func(b *testing.B) {
			n, err := New(c.cfg, c.in, c.batch, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			x, y := randomBatch(1, c.batch, c.in, n.tokens)
			// One untimed step: buffers that ops keep across steps are allocated here.
			if _, err := n.Step(x, y); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := n.Step(x, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.batch*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// randomBatch is a seeded random batch for a model reading in: normal values,
// or token ids for a token model, as inputs, and uniform labels.
func randomBatch(seed uint64, batch int, in Input, tokens bool) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, batch*numel(in.Shape))
	for i := range x {
		if tokens {
			x[i] = float32(rng.IntN(in.Classes))
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	y := make([]int32, batch*in.YLen)
	for i := range y {
		y[i] = int32(rng.IntN(in.Classes))
	}
	return x, y
}

// BenchmarkNew times building a model (both graphs, gradients and
// TapeMachines): Gorgonia's compiler is quadratic in the graph's nodes, which
// the per-step LSTM layers multiply.
func BenchmarkNew(b *testing.B) {
	for _, c := range trainStepCases {
		if !strings.Contains(c.name, "lstm") {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := New(c.cfg, c.in, c.batch, 0, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
