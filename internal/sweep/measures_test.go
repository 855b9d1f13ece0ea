package sweep

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/train"
)

// TestKendall: the paper's definition over ordered pairs, ties 0.
func TestKendall(t *testing.T) {
	for _, c := range []struct {
		mu, gap []float64
		want    float64
	}{
		{[]float64{1, 2, 3}, []float64{10, 20, 30}, 1},
		{[]float64{1, 2, 3}, []float64{30, 20, 10}, -1},
		// The 2x2 grid example: mu (1, 2, 3, 4), gaps (0.1, 0.3, 0.2, 0.4): one
		// discordant pair of 6, tau = (5 - 1)/6.
		{[]float64{1, 2, 3, 4}, []float64{0.1, 0.3, 0.2, 0.4}, 4.0 / 6},
		{[]float64{1, 1}, []float64{1, 2}, 0},
	} {
		if got := kendall(c.mu, c.gap); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("kendall(%v, %v) = %v, want %v", c.mu, c.gap, got, c.want)
		}
	}
	if !math.IsNaN(kendall([]float64{1}, []float64{2})) {
		t.Error("one run has a rank correlation")
	}
}

// TestReportMeasures: runs with measures.json get the measures section.
// Gaps (train - test, pp): a 95-90 = 5, b 92-90 = 2, c 99-88 = 11. The top
// eigenvalues 30, 10, 50 rank like the gaps: tau 1. The norms 100, 300, 200:
// pairs (a,b) -1, (a,c) +1, (b,c) -1, tau = 2(-1)/6 = -0.333. Without
// sweep.yaml there are no hyper-parameters and no psi; the runs (written by
// an older gradwire measure) lack the newer measures, left blank.
func TestReportMeasures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	for _, r := range []struct {
		name             string
		train, test      float64
		norm, eigenvalue float64
	}{{"a", 0.95, 0.90, 100, 30}, {"b", 0.92, 0.90, 300, 10}, {"c", 0.99, 0.88, 200, 50}} {
		writeRun(t, dir, r.name, classifierSummary("none", 1, r.test, 1, 1, 2))
		m := train.Measures{TrainAccuracy: r.train, ParamNorm: r.norm, HessianTop: r.eigenvalue}
		js, _ := json.Marshal(m)
		writeFile(t, filepath.Join(dir, "runs", r.name, "seed-1", measuresFile), string(js))
	}
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Measures (gradwire measure)", "| c | 1 | 99.00 | 88.00 | +11.00 | 200 | - | - |",
		"| measure | runs | tau | Psi |", "| parameter norm | 3 | -0.333 | - |", "| top Hessian eigenvalue | 3 | 1.000 | - |",
		"| Fisher-Rao norm | 0 | - | - |", "3 of the 3 measured runs have no saved initial parameters"} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks %q:\n%s", want, res.Table)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(SharpnessPNG, ".png")+".svg"))
	if err != nil {
		t.Fatalf("no sharpness plot: %v", err)
	}
	for _, want := range []string{"c: eigenvalue 50, gap +11.00", "b: eigenvalue 10, gap +2.00", "a: eigenvalue 30, gap +5.00"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the sharpness plot's legend lacks %q", want)
		}
	}
	// Without measures the plot is not drawn, and an older one is removed.
	for _, r := range []string{"a", "b", "c"} {
		if err := os.Remove(filepath.Join(dir, "runs", r, "seed-1", measuresFile)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Report(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SharpnessPNG)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the measures were removed: %v", SharpnessPNG, err)
	}
}

// TestGranulatedKendallGrid is the worked example of the design notes: a 2x2
// grid (lr x batch), mu (1, 2, 3, 4), gaps (0.10, 0.30, 0.20, 0.40) for
// (lo,lo), (lo,hi), (hi,lo), (hi,hi): tau = 0.667 (one discordant pair of
// six), psi_lr = psi_batch = 1 (each group of two is concordant), Psi = 1.
func TestGranulatedKendallGrid(t *testing.T) {
	rows := []measuredRun{{variation: "lo-lo", gap: 0.10}, {variation: "lo-hi", gap: 0.30}, {variation: "hi-lo", gap: 0.20}, {variation: "hi-hi", gap: 0.40}}
	sets := map[string][]string{
		"lo-lo": {"optim.lr=0.1", "data.global_batch=128"}, "lo-hi": {"optim.lr=0.1", "data.global_batch=8192"},
		"hi-lo": {"optim.lr=0.4", "data.global_batch=128"}, "hi-hi": {"optim.lr=0.4", "data.global_batch=8192"},
	}
	hps := hyperParams(rows, sets)
	if !slices.Equal(hps, []string{"data.global_batch", "optim.lr"}) {
		t.Fatalf("hyper-parameters %v", hps)
	}
	mu := []float64{1, 2, 3, 4}
	has := []bool{true, true, true, true}
	gap := []float64{0.10, 0.30, 0.20, 0.40}
	if tau := kendall(mu, gap); math.Abs(tau-4.0/6) > 1e-12 {
		t.Errorf("tau %v", tau)
	}
	for k := range hps {
		if psi, groups := granulated(rows, mu, has, k); psi != 1 || groups != 2 {
			t.Errorf("psi %s = %v over %d groups, want 1 over 2", hps[k], psi, groups)
		}
	}
}

// TestReportGranulatedKendall: psi on an incomplete grid worked out by hand.
// sweep.yaml sets data.global_batch=8192 for every run (not a hyper-parameter:
// it does not vary) and the variations optim.name, optim.lr and, for one,
// schedule.warmup_epochs=15 (the others: "base"). Runs (mu = parameter norm,
// gap = train - test in points):
//
//	A sgd  0.1 base  mu 10  gap 1     D lamb 0.1 base  mu 40  gap 5
//	B sgd  0.2 base  mu 30  gap 2     E lamb 0.2 base  mu 50  gap 4
//	C sgd  0.4 base  mu 20  gap 3     F sgd  0.2 15    mu 5   gap 0.5
//	G (a variation sweep.yaml does not list) mu 60 gap 6
//
// psi_lr: groups (sgd, base) = {A, B, C}: AB +1, AC +1, BC -1, tau 1/3;
// (lamb, base) = {D, E}: -1; F alone. psi_lr = (1/3 - 1)/2 = -1/3.
// psi_name: (0.1, base) = {A, D} +1, (0.2, base) = {B, E} +1: psi 1.
// psi_warmup: (0.2, sgd) = {B, F} +1: psi 1. Psi = (-1/3 + 1 + 1)/3 = 5/9.
// tau over all seven runs: by mu F A C B D E G, the gaps 0.5 1 3 2 5 4 6
// have two inversions of 21 pairs: (19 - 2)/21 = 0.810. The top Hessian
// eigenvalue is 7 for every run: all ties, tau 0 and psi 0.
func TestReportGranulatedKendall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "grid")
	writeFile(t, filepath.Join(dir, "sweep.yaml"), `name: grid
source: experiments/grid.yaml
base: configs/lenet5-fashion.yaml
set: [data.global_batch=8192]
variations:
  - {name: sgd-0.1, seeds: [1], set: [optim.name=sgd, optim.lr=0.1]}
  - {name: sgd-0.2, seeds: [1], set: [optim.name=sgd, optim.lr=0.2]}
  - {name: sgd-0.4, seeds: [1], set: [optim.name=sgd, optim.lr=0.4]}
  - {name: lamb-0.1, seeds: [1], set: [optim.name=lamb, optim.lr=0.1]}
  - {name: lamb-0.2, seeds: [1], set: [optim.name=lamb, optim.lr=0.2]}
  - {name: sgd-0.2-warm15, seeds: [1], set: [optim.name=sgd, optim.lr=0.2, schedule.warmup_epochs=15]}
`)
	for _, r := range []struct {
		name    string
		mu, gap float64
	}{{"sgd-0.1", 10, 1}, {"sgd-0.2", 30, 2}, {"sgd-0.4", 20, 3}, {"lamb-0.1", 40, 5}, {"lamb-0.2", 50, 4}, {"sgd-0.2-warm15", 5, 0.5}, {"extra", 60, 6}} {
		writeRun(t, dir, r.name, classifierSummary("none", 1, 0.8, 1, 1, 2))
		m := train.Measures{TrainAccuracy: 0.8 + r.gap/100, ParamNorm: r.mu, HessianTop: 7}
		js, _ := json.Marshal(m)
		writeFile(t, filepath.Join(dir, "runs", r.name, "seed-1", measuresFile), string(js))
	}
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| measure | runs | tau | psi optim.lr | psi optim.name | psi schedule.warmup_epochs | Psi |",
		"| parameter norm | 7 | 0.810 | -0.333 | 1.000 | 1.000 | 0.556 |",
		"| top Hessian eigenvalue | 7 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 |",
		"groups of two or more runs: optim.lr 2, optim.name 2, schedule.warmup_epochs 1.",
		"1 measured runs of variations sweep.yaml does not list are left out of psi",
	} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks %q:\n%s", want, res.Table)
		}
	}
}

// TestLog10TicksLabels: under one decade every tick is labelled; over three,
// the powers of ten alone; between, 1, 2 and 5.
func TestLog10TicksLabels(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (log10Ticks{}).Ticks(math.Log10(lo), math.Log10(hi)) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{2.06, 11.1, []string{"3", "4", "5", "6", "7", "8", "9", "10"}},
		{1.5, 300, []string{"2", "5", "10", "20", "50", "100", "200"}},
		{0.5, 5000, []string{"1", "10", "100", "1000"}},
		// Below 1, labels are the decimals (once "0.30000000000000004").
		{0.2, 1.1, []string{"0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1"}},
		{0.0011, 0.12, []string{"0.002", "0.005", "0.01", "0.02", "0.05", "0.1"}},
	} {
		if got := labels(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("%g to %g: labels %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}
