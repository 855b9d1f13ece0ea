package bench

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
)

func TestMeasure(t *testing.T) {
	c, err := NewCase("lenet5", 4, models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(c, 3, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	// 4 examples x 833,040 forward FLOPs x 3 (see models.TestTrainFLOPs).
	if r.FLOPsPerStep != 4*833_040*3 || r.Params != 61706 || r.Steps != 3 || r.Warmup != 1 || r.Trials != 4 || r.Ops != "fast" {
		t.Errorf("result %+v", r)
	}
	if len(r.TrialSeconds) != 4 {
		t.Fatalf("%d trial times, want 4", len(r.TrialSeconds))
	}
	// The summary is of the trials reported, and each trial's median is no
	// faster than the fastest single step.
	if s := Summarize(r.TrialSeconds); s.Best != r.BestSeconds || s.Median != r.MedianSeconds || s.Spread != r.Spread {
		t.Errorf("summary %+v, result best %v median %v spread %v", s, r.BestSeconds, r.MedianSeconds, r.Spread)
	}
	if r.MinSeconds <= 0 || r.MinSeconds > r.BestSeconds || r.BestSeconds > r.MedianSeconds {
		t.Errorf("times: min step %v, best trial %v, median trial %v", r.MinSeconds, r.BestSeconds, r.MedianSeconds)
	}
	if r.SamplesPerSecond != 4/r.MedianSeconds || r.BestSamplesPerSecond != 4/r.BestSeconds {
		t.Errorf("samples/s %v at the median, %v at the best", r.SamplesPerSecond, r.BestSamplesPerSecond)
	}
	if want := float64(r.FLOPsPerStep) / r.MedianSeconds / 1e9; r.GFLOPs != want {
		t.Errorf("GFLOP/s %v, want %v", r.GFLOPs, want)
	}
	if want := float64(r.FLOPsPerStep) / r.BestSeconds / 1e9; r.BestGFLOPs != want {
		t.Errorf("best GFLOP/s %v, want %v", r.BestGFLOPs, want)
	}
}

func TestCaseErrors(t *testing.T) {
	if _, err := NewCase("vgg", 4, models.Config{}); err == nil || !strings.Contains(err.Error(), "mlp") {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := NewCase("mlp", 0, models.Config{}); err == nil {
		t.Error("batch 0 accepted")
	}
	// A batch far beyond any machine's memory is refused before anything
	// is allocated (it ended the process with "runtime: out of memory").
	if _, _, ok := version.AvailableMemory(); ok {
		if _, err := NewCase("mlp", 1<<30, models.Config{}); err == nil || !strings.Contains(err.Error(), "GiB available") {
			t.Errorf("batch 2^30: %v", err)
		}
	}
	// The limit a run honours applies here too.
	t.Setenv("GRADWIRE_MEMORY_LIMIT", "1MiB")
	if _, err := NewCase("mlp", 64, models.Config{}); err == nil || !strings.Contains(err.Error(), "(GRADWIRE_MEMORY_LIMIT)") {
		t.Errorf("mlp under a 1 MiB limit: %v", err)
	}
	t.Setenv("GRADWIRE_MEMORY_LIMIT", "")
	if _, err := NewCase("mlp", 64, models.Config{}); err == nil || !strings.Contains(err.Error(), "GRADWIRE_MEMORY_LIMIT") {
		t.Errorf("a malformed limit: %v", err)
	}
	os.Unsetenv("GRADWIRE_MEMORY_LIMIT")
	c, _ := NewCase("mlp", 2, models.Config{Ops: "turbo"})
	if _, err := Measure(c, 1, 0, 1); err == nil || !strings.Contains(err.Error(), "model.ops") {
		t.Errorf("bad ops: %v", err)
	}
	c, _ = NewCase("mlp", 2, models.Config{})
	if _, err := Measure(c, 0, 0, 1); err == nil {
		t.Error("0 steps accepted")
	}
	if _, err := Measure(c, 1, 0, 0); err == nil || !strings.Contains(err.Error(), "0 trials") {
		t.Errorf("0 trials: %v", err)
	}
	if _, err := Measure(c, 1, -1, 1); err == nil || !strings.Contains(err.Error(), "-1 warm-up") {
		t.Errorf("negative warm-up: %v", err)
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

func TestSummarize(t *testing.T) {
	// Worked by hand. Trials 0.30, 0.10, 0.20, 0.12 s: sorted 0.10, 0.12,
	// 0.20, 0.30; best 0.10; median (0.12+0.20)/2 = 0.16; spread 0.30/0.10 = 3.
	s := Summarize([]float64{0.30, 0.10, 0.20, 0.12})
	if math.Abs(s.Best-0.10) > 1e-15 || math.Abs(s.Median-0.16) > 1e-15 || math.Abs(s.Spread-3) > 1e-12 {
		t.Errorf("even count: %+v, want best 0.10, median 0.16, spread 3", s)
	}
	// Odd count, one slow outlier: 5, 4, 40 ms sorted 4, 5, 40; best 4, median
	// 5 (the outlier does not move it), spread 40/4 = 10.
	s = Summarize([]float64{0.005, 0.004, 0.040})
	if s.Best != 0.004 || s.Median != 0.005 || math.Abs(s.Spread-10) > 1e-12 {
		t.Errorf("odd count: %+v, want best 0.004, median 0.005, spread 10", s)
	}
	// One trial: it is best and median, spread 1.
	in := []float64{0.25}
	if s = Summarize(in); s != (TrialStats{Best: 0.25, Median: 0.25, Spread: 1}) {
		t.Errorf("one trial: %+v", s)
	}
	// The caller's run order is kept.
	order := []float64{0.3, 0.1, 0.2}
	Summarize(order)
	if order[0] != 0.3 || order[1] != 0.1 {
		t.Errorf("input reordered: %v", order)
	}
}
