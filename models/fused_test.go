package models

import (
	"math"
	"strings"
	"testing"
)

// TestStepFusedIsMeanOfSteps compares StepFused over k batches with k calls of
// Step on the same net: the loss is the mean of the k losses and the gradient
// the mean of the k gradients (float32 rounding apart), also after the
// parameters moved, and Step still works between fused steps.
func TestStepFusedIsMeanOfSteps(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		in  Input
	}{
		{Config{Name: "mlp", Hidden: []int{24, 12}}, Input{Shape: []int{1, 6, 6}, Classes: 5, YLen: 1}},
		{Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
		{Config{Name: "lstm", Hidden: []int{16}}, Input{Shape: []int{1, 6, 5}, Classes: 4, YLen: 1}},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			const batch, k = 3, 4
			net, err := New(c.cfg, c.in, batch, batch, 5)
			if err != nil {
				t.Fatal(err)
			}
			if !net.Fusable() {
				t.Fatal("Fusable is false")
			}
			for s := range 2 {
				var xs []float32
				var ys []int32
				var lossSum float64
				sum := make([]float64, len(net.Grad()))
				for b := range k {
					x, y := randomBatch(uint64(10*s+b+1), batch, c.in, false)
					xs, ys = append(xs, x...), append(ys, y...)
					l, err := net.Step(x, y)
					if err != nil {
						t.Fatal(err)
					}
					lossSum += l
					for i, g := range net.Grad() {
						sum[i] += float64(g)
					}
				}
				loss, err := net.StepFused(xs, ys, k)
				if err != nil {
					t.Fatal(err)
				}
				if want := lossSum / k; math.Abs(loss-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("step %d: fused loss %v, mean of the batches' losses %v", s, loss, want)
				}
				var scale float64
				for _, v := range sum {
					scale = math.Max(scale, math.Abs(v/k))
				}
				for i, g := range net.Grad() {
					if want := sum[i] / k; math.Abs(float64(g)-want) > 1e-4*scale {
						t.Fatalf("step %d: fused gradient %d is %v, the mean of the batches' gradients %v (largest %v)", s, i, g, want, scale)
					}
				}
				// Move the parameters: both graphs must read the same ones.
				for i, g := range net.Grad() {
					net.Flat()[i] -= 0.1 * g
				}
			}
		})
	}
}

// TestStepFusedRefusesBatchNorm: ResNet's BatchNorm statistics would cover
// the union of the batches, so fusing is refused.
func TestStepFusedRefusesBatchNorm(t *testing.T) {
	in := Input{Shape: []int{3, 8, 8}, Classes: 10, YLen: 1}
	net, err := New(Config{Name: "resnet20"}, in, 2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if net.Fusable() {
		t.Fatal("resnet20 is Fusable")
	}
	x, y := randomBatch(1, 4, in, false)
	if _, err := net.StepFused(x, y, 2); err == nil || !strings.Contains(err.Error(), "interact") {
		t.Fatalf("StepFused on resnet20: error %v, expected a refusal", err)
	}
}
