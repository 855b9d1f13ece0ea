package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// TestLabelSmoothingTargets: with smoothing 0.2 over 4 classes, label 2's
// target row is (0.05, 0.05, 0.85, 0.05), worked by hand: 0.2/4 off the label,
// 1 - 0.2 + 0.2/4 on it.
func TestLabelSmoothingTargets(t *testing.T) {
	tt := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2, 4))
	if err := targets(tt, []float32{2, 0}, 4, 0.2); err != nil {
		t.Fatal(err)
	}
	want := []float32{0.05, 0.05, 0.85, 0.05, 0.85, 0.05, 0.05, 0.05}
	for i, v := range tt.Float32s() {
		if math.Abs(float64(v-want[i])) > 1e-7 {
			t.Fatalf("targets = %v, want %v", tt.Float32s(), want)
		}
	}
	if err := targets(tt, []float32{4, 0}, 4, 0.2); err == nil {
		t.Error("class id 4 of 4 classes accepted")
	}
}

// TestLabelSmoothingLoss: the training loss with smoothing e is the
// cross-entropy against the smoothed targets, computed here from the logits
// the evaluation graph gives for the same parameters; both the fast op and
// Gorgonia's reference ops.
func TestLabelSmoothingLoss(t *testing.T) {
	const batch, classes, eps = 5, 4, 0.3
	in := Input{Shape: []int{1, 3, 4}, Classes: classes, YLen: 1}
	for _, ops := range OpsNames() {
		cfg := Config{Name: "mlp", Hidden: []int{7, 5}, Ops: ops, LabelSmoothing: eps}
		n, err := newNet(cfg, in, batch, batch, 3, tensor.Float64, nil)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(4, 5))
		x := make([]float32, batch*12)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := []int32{0, 3, 1, 1, 2}
		logits := make([]float32, batch*classes)
		if err := n.Predict(x, logits); err != nil {
			t.Fatal(err)
		}
		var want, plain float64
		for r := range batch {
			z := logits[r*classes:][:classes]
			var s float64
			for _, v := range z {
				s += math.Exp(float64(v))
			}
			for c, v := range z {
				target := eps / classes
				if c == int(y[r]) {
					target += 1 - eps
					plain -= float64(v) - math.Log(s)
				}
				want -= target * (float64(v) - math.Log(s))
			}
		}
		want /= batch
		plain /= batch
		got, err := n.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		// The logits went through float32: agreement to float32 rounding,
		// far below the difference smoothing makes (5e-3 at this small
		// initialisation, whose softmax is near uniform).
		if math.Abs(got-want) > 1e-5 || math.Abs(want-plain) < 1e-3 {
			t.Errorf("ops %s: loss %.9g, want %.9g (unsmoothed %.9g)", ops, got, want, plain)
		}
	}
}

func TestGradMLPLabelSmoothing(t *testing.T) {
	for _, ops := range OpsNames() {
		t.Run(ops, func(t *testing.T) {
			checkModel(t, Config{Name: "mlp", Hidden: []int{7, 5}, Ops: ops, LabelSmoothing: 0.2}, Input{Shape: []int{1, 3, 4}, Classes: 4, YLen: 1}, 3, 30)
		})
	}
}

func TestGradLeNet5LabelSmoothing(t *testing.T) {
	checkModel(t, Config{Name: "lenet5", LabelSmoothing: 0.1}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 2, 6)
}
