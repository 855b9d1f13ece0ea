package bench

import (
	"strings"
	"testing"

	"github.com/gradwire/gradwire/models"
)

func TestMeasure(t *testing.T) {
	c, err := NewCase("lenet5", 4, models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(c, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 4 examples x 833,040 forward FLOPs x 3 (see models.TestTrainFLOPs).
	if r.FLOPsPerStep != 4*833_040*3 || r.Params != 61706 || r.Steps != 3 || r.Ops != "fast" {
		t.Errorf("result %+v", r)
	}
	if r.MedianSeconds <= 0 || r.MinSeconds > r.MedianSeconds || r.SamplesPerSecond != 4/r.MedianSeconds {
		t.Errorf("times: median %v, min %v, samples/s %v", r.MedianSeconds, r.MinSeconds, r.SamplesPerSecond)
	}
	if want := float64(r.FLOPsPerStep) / r.MedianSeconds / 1e9; r.GFLOPs != want {
		t.Errorf("GFLOP/s %v, want %v", r.GFLOPs, want)
	}
}

func TestCaseErrors(t *testing.T) {
	if _, err := NewCase("vgg", 4, models.Config{}); err == nil || !strings.Contains(err.Error(), "mlp") {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := NewCase("mlp", 0, models.Config{}); err == nil {
		t.Error("batch 0 accepted")
	}
	c, _ := NewCase("mlp", 2, models.Config{Ops: "turbo"})
	if _, err := Measure(c, 1, 0); err == nil || !strings.Contains(err.Error(), "model.ops") {
		t.Errorf("bad ops: %v", err)
	}
	c, _ = NewCase("mlp", 2, models.Config{})
	if _, err := Measure(c, 0, 0); err == nil {
		t.Error("0 steps accepted")
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{1, 2, 10}); m != 2 {
		t.Errorf("odd: %v", m)
	}
	if m := median([]float64{1, 2, 4, 10}); m != 3 {
		t.Errorf("even: %v", m)
	}
}
