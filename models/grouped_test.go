package models

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestStepGroupedIsSteps compares StepGrouped over k batches with k calls of
// Step on the same net: batch i's loss and gradient are Step's on batch i
// (float32 rounding apart), also after the parameters moved, with a second k,
// and with Step between grouped steps; Grad is left alone.
func TestStepGroupedIsSteps(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		in    Input
		batch int
	}{
		{Config{Name: "mlp", Hidden: []int{24, 12}}, Input{Shape: []int{1, 6, 6}, Classes: 5, YLen: 1}, 3},
		{Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 3},
		// 32 a batch: the filter gradients' chunks hold several samples.
		{Config{Name: "lenet5"}, Input{Shape: []int{3, 32, 32}, Classes: 10, YLen: 1}, 32},
		{Config{Name: "lstm", Hidden: []int{16}}, Input{Shape: []int{1, 6, 5}, Classes: 4, YLen: 1}, 5},
		{Config{Name: "charlstm", HiddenSize: 12, Layers: 2, EmbedDim: 6}, Input{Shape: []int{7}, Classes: 9, YLen: 7}, 3},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			net, err := New(c.cfg, c.in, c.batch, c.batch, 5)
			if err != nil {
				t.Fatal(err)
			}
			if !net.Groupable() {
				t.Fatal("Groupable is false")
			}
			for s, k := range []int{4, 4, 2} {
				var xs []float32
				var ys []int32
				var want [][]float32
				var wantLoss []float64
				for b := range k {
					x, y := randomBatch(uint64(10*s+b+1), c.batch, c.in, c.cfg.Name == "charlstm")
					xs, ys = append(xs, x...), append(ys, y...)
					l, err := net.Step(x, y)
					if err != nil {
						t.Fatal(err)
					}
					wantLoss = append(wantLoss, l)
					want = append(want, slices.Clone(net.Grad()))
				}
				before := slices.Clone(net.Grad())
				losses := make([]float64, k)
				mean, err := net.StepGrouped(xs, ys, k, losses)
				if err != nil {
					t.Fatal(err)
				}
				var wantMean float64
				for b := range k {
					wantMean += wantLoss[b] / float64(k)
					if math.Abs(losses[b]-wantLoss[b]) > 1e-5*math.Max(1, math.Abs(wantLoss[b])) {
						t.Fatalf("step %d: batch %d's loss %v, Step gives %v", s, b, losses[b], wantLoss[b])
					}
					var scale float64
					for _, v := range want[b] {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i, g := range net.GroupGrad(b) {
						if d := math.Abs(float64(g - want[b][i])); d > 1e-5*scale {
							t.Fatalf("step %d: batch %d's gradient %d is %v, Step gives %v (largest %v)", s, b, i, g, want[b][i], scale)
						}
					}
				}
				if math.Abs(mean-wantMean) > 1e-5*math.Max(1, math.Abs(wantMean)) {
					t.Fatalf("step %d: mean loss %v, expected %v", s, mean, wantMean)
				}
				if !slices.Equal(before, net.Grad()) {
					t.Fatalf("step %d: StepGrouped changed Grad", s)
				}
				// Move the parameters: both graphs must read the same ones.
				for i, g := range want[0] {
					net.Flat()[i] -= 0.1 * g
				}
			}
		})
	}
}

// TestStepGroupedRefuses: BatchNorm's statistics would cover the union of the
// batches, and k and the loss slots must fit.
func TestStepGroupedRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		in  Input
	}{
		{Config{Name: "resnet20"}, Input{Shape: []int{3, 8, 8}, Classes: 10, YLen: 1}},
	} {
		net, err := New(c.cfg, c.in, 2, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		if net.Groupable() {
			t.Fatalf("%s is Groupable", c.cfg.Name)
		}
		x, y := randomBatch(1, 4, c.in, false)
		if _, err := net.StepGrouped(x, y, 2, make([]float64, 2)); err == nil || !strings.Contains(err.Error(), "cannot split") {
			t.Fatalf("StepGrouped on %s: error %v, expected a refusal", c.cfg.Name, err)
		}
	}
	in := Input{Shape: []int{1, 6, 6}, Classes: 5, YLen: 1}
	net, err := New(Config{Name: "mlp", Hidden: []int{8}}, in, 2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if g := net.GroupGrad(0); g != nil {
		t.Errorf("GroupGrad before a grouped step: %d values, expected nil", len(g))
	}
	x, y := randomBatch(1, 4, in, false)
	for _, c := range []struct {
		k, slots int
		want     string
	}{{1, 1, "expected >= 2"}, {2, 3, "3 loss slots for 2"}, {3, 3, "input has"}} {
		if _, err := net.StepGrouped(x, y, c.k, make([]float64, c.slots)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("k %d, %d slots: error %v, expected one with %q", c.k, c.slots, err, c.want)
		}
	}
}
