package sweep

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLearningRateGrids: the variations of one optimizer and batch that
// differ in optim.lr alone form a grid; the pick is the best mean validation
// figure, a pick at either end of the grid is flagged, a failed rate counts
// as tried (so a best rate just below a failed one is bracketed), variations
// with other settings form grids of their own, and a single rate with other
// settings beside a grid of its optimizer and batch is a trial.
func TestLearningRateGrids(t *testing.T) {
	groups, failed := probeGroups()
	md := learningRateTable(groups, failed, []metric{accuracyMetric})
	for _, want := range []string{
		"| optimizer | global batch | settings | validation accuracy (%) by optim.lr | pick | test accuracy (%) of the pick | inside the grid |",
		"| sgd | 8192 |  | 0.05: 88.00, 0.1: 89.50, 0.2: 88.50 | 0.1 (sgd-0.1) | 89.00 ± 1.41 | yes |",
		"| lars | 8192 |  | 2: 90.00, 10: 92.00 | 10 (lars-10) | 91.00 | no: the highest rate is best |",
		"| lars | 8192 | optim.adapt_norm_bias=true | 3: 93.00, 30: 81.00 | 3 (lars-3-adapt) | 92.00 | no: the lowest rate is best |",
		"| lamb | 8192 |  | 0.015: 91.00, 0.05: 92.50, 0.15: failed | 0.05 (lamb-0.05) | 92.00 | yes |",
		"| lamb | 8192 | schedule.warmup_epochs=15 | 0.05: 93.00 | 0.05 (lamb-0.05-warm15) | 92.40 | one rate: a trial beside the grid |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("lacks\n%s\nin\n%s", want, md)
		}
	}
	if strings.Contains(md, "| lamb | 128 |") || strings.Count(md, "\n| ") != 6 {
		t.Errorf("a single rate is no grid, nor a trial without a grid of its optimizer and batch; want the header, 4 grids and 1 trial:\n%s", md)
	}
	// A grid whose every rate failed is a row too: where a rule breaks is a result.
	allFailed := append(slices.Clone(failed),
		failedRun{variation: "sgd-6.4", seed: 1, optimizer: "sgd", globalBatch: 4096, sets: []string{"train.epochs=50", "optim.name=sgd", "optim.lr=6.4"}},
		failedRun{variation: "sgd-12.8", seed: 1, optimizer: "sgd", globalBatch: 4096, sets: []string{"train.epochs=50", "optim.name=sgd", "optim.lr=12.8"}})
	if md := learningRateTable(groups, allFailed, []metric{accuracyMetric}); !strings.Contains(md, "| sgd | 4096 |  | 6.4: failed, 12.8: failed | none | — | no: every rate failed |") {
		t.Errorf("a grid of failed rates is missing:\n%s", md)
	}
	// A grid whose runs finished without a validation figure has no pick either.
	noVal := slices.Clone(groups)
	for _, rate := range []string{"0.1", "1"} {
		sum := classifierSummary("none", 1, 0.9, 1, 1, 2)
		sum.Optimizer, sum.GlobalBatch, sum.ValAccuracy = "adam", 8192, nil
		noVal = append(noVal, group{name: "adam-" + rate, listed: true, sets: []string{"train.epochs=50", "optim.name=adam", "optim.lr=" + rate},
			runs: []*runData{{variation: "adam-" + rate, seed: 1, sum: &sum}}})
	}
	if md := learningRateTable(noVal, failed, []metric{accuracyMetric}); !strings.Contains(md, "| adam | 8192 |  | 0.1: —, 1: — | none | — | no: no rate has a validation figure |") {
		t.Errorf("a grid without validation figures is missing:\n%s", md)
	}
	// A trial listed first still follows its grid, and the other optimizers stay in their order.
	trialFirst := append([]group{groups[len(groups)-2]}, groups...)
	trialFirst = slices.Delete(trialFirst, len(trialFirst)-2, len(trialFirst)-1)
	md2 := learningRateTable(trialFirst, failed, []metric{accuracyMetric})
	if i, j, k := strings.Index(md2, "| lamb | 8192 |  |"), strings.Index(md2, "(lamb-0.05-warm15)"), strings.Index(md2, "| sgd | 8192 |"); i < 0 || j < i || k < j {
		t.Errorf("want lamb's grid first (it appears first), then its trial, then sgd:\n%s", md2)
	}
	// A sweep without a grid has no trials either.
	if md := learningRateTable(groups[len(groups)-2:], nil, []metric{accuracyMetric}); md != "" {
		t.Errorf("trials without a grid:\n%s", md)
	}
	// Without validation figures, no pick: the test split never picks a rate.
	for _, g := range groups {
		for _, r := range g.runs {
			r.sum.ValAccuracy, r.sum.ValLoss = nil, nil
		}
	}
	if md := learningRateTable(groups, failed, []metric{accuracyMetric}); md != "" {
		t.Errorf("a section without validation figures:\n%s", md)
	}
}

// TestLearningRateTies: rates whose validation figures print the same tie,
// whichever is ahead beyond the printed digits, and the tie goes to the lower
// rate; a pick tied with the grid's highest rate is not bracketed (a higher
// rate might do better still), while a tie inside the grid is.
func TestLearningRateTies(t *testing.T) {
	grid := func(opt string, vals map[string]float64) []group {
		var groups []group
		for _, rate := range []string{"0.05", "0.1", "0.2", "0.4"} {
			v, ok := vals[rate]
			if !ok {
				continue
			}
			s := classifierSummary("none", 1, v-0.001, 1, 1, 2)
			s.Optimizer, s.GlobalBatch, s.ValAccuracy = opt, 128, ptr(v)
			name := opt + "-" + rate
			groups = append(groups, group{name: name, listed: true, sets: []string{"optim.name=" + opt, "optim.lr=" + rate},
				runs: []*runData{{variation: name, seed: 1, sum: &s}}})
		}
		return groups
	}
	for _, c := range []struct {
		vals map[string]float64
		want string
	}{
		// 0.4 is ahead by 1e-6, below the printed digits: a tie at the top.
		{map[string]float64{"0.1": 0.9378, "0.2": 0.9396, "0.4": 0.939601},
			"| sgd | 128 |  | 0.1: 93.78, 0.2: 93.96, 0.4: 93.96 | 0.2 (sgd-0.2) | 93.86 | no: the highest rate ties the best |"},
		{map[string]float64{"0.05": 0.92, "0.1": 0.9396, "0.2": 0.939601, "0.4": 0.93},
			"| sgd | 128 |  | 0.05: 92.00, 0.1: 93.96, 0.2: 93.96, 0.4: 93.00 | 0.1 (sgd-0.1) | 93.86 | yes |"},
		{map[string]float64{"0.05": 0.9396, "0.1": 0.9396, "0.2": 0.93},
			"| sgd | 128 |  | 0.05: 93.96, 0.1: 93.96, 0.2: 93.00 | 0.05 (sgd-0.05) | 93.86 | no: the lowest rate is best |"},
	} {
		md := learningRateTable(grid("sgd", c.vals), nil, []metric{accuracyMetric})
		if !strings.Contains(md, c.want) {
			t.Errorf("lacks\n%s\nin\n%s", c.want, md)
		}
	}
}

// TestReportLearningRates: the report reads the grids' rates from the runs'
// config.yaml, so that a variation leaving the rate to the base config (lr-base)
// joins its grid, and from sweep.yaml where a run has no config.yaml.
func TestReportLearningRates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "probe")
	writeFile(t, filepath.Join(dir, "sweep.yaml"), `name: probe
source: experiments/probe.yaml
base: configs/lenet5-fashion.yaml
set: [data.validation=5000]
variations:
  - name: lr-low
    seeds: [1]
    set: [optim.lr=0.01]
  - name: lr-high
    seeds: [1]
    set: [optim.lr=0.1]
  - name: lr-mid
    seeds: [1]
    set: [optim.lr=0.03]
  - name: lr-base
    seeds: [1]
    set: []
`)
	for _, r := range []struct {
		name      string
		test, val float64
	}{{"lr-low", 0.85, 0.86}, {"lr-high", 0.80, 0.81}, {"lr-mid", 0.88, 0.89}, {"lr-base", 0.87, 0.875}} {
		s := classifierSummary("none", 1, r.test, 1, 1, 2)
		s.ValAccuracy = ptr(r.val)
		writeRun(t, dir, r.name, s)
	}
	writeFile(t, filepath.Join(dir, "runs", "lr-base", "seed-1", "config.yaml"), "optim:\n  name: sgd\n  lr: 0.05\n")
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| sgd | 256 |  | 0.01: 86.00, 0.03: 89.00, 0.05: 87.50, 0.1: 81.00 | 0.03 (lr-mid) | 88.00 | yes |"; !strings.Contains(res.Table, want) {
		t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
	}
}

// probeGroups are the grids of TestLearningRateGrids: sgd inside its grid,
// lars at its highest rate, lars with another setting at its lowest, lamb
// inside thanks to a failed rate above its best, lamb at 128 alone.
func probeGroups() ([]group, []failedRun) {
	run := func(v, opt string, batch int, seed int64, test, val float64) *runData {
		s := classifierSummary("none", seed, test, 1, 1, 2)
		s.Optimizer, s.GlobalBatch, s.ValAccuracy = opt, batch, ptr(val)
		return &runData{variation: v, seed: seed, sum: &s}
	}
	common := []string{"train.epochs=50", "optim.lr=9"} // the sweep's set:, overridden by each variation
	g := func(name string, sets []string, runs ...*runData) group {
		return group{name: name, runs: runs, sets: append(append([]string{}, common...), sets...), listed: true}
	}
	groups := []group{
		// sgd: 0.1 (mean 0.895 of two seeds) beats 0.05 and 0.2: inside.
		g("sgd-0.05", []string{"optim.name=sgd", "optim.lr=0.05"}, run("sgd-0.05", "sgd", 8192, 1, 0.86, 0.88)),
		g("sgd-0.1", []string{"optim.name=sgd", "optim.lr=0.1"}, run("sgd-0.1", "sgd", 8192, 1, 0.88, 0.89), run("sgd-0.1", "sgd", 8192, 2, 0.90, 0.90)),
		g("sgd-0.2", []string{"optim.name=sgd", "optim.lr=0.2"}, run("sgd-0.2", "sgd", 8192, 1, 0.87, 0.885)),
		// lars: the highest rate is best.
		g("lars-2", []string{"optim.name=lars", "optim.lr=2"}, run("lars-2", "lars", 8192, 1, 0.90, 0.90)),
		g("lars-10", []string{"optim.name=lars", "optim.lr=10"}, run("lars-10", "lars", 8192, 1, 0.91, 0.92)),
		// lars with another setting: a grid of its own, the lowest rate best.
		g("lars-3-adapt", []string{"optim.name=lars", "optim.lr=3", "optim.adapt_norm_bias=true"}, run("lars-3-adapt", "lars", 8192, 1, 0.92, 0.93)),
		g("lars-30-adapt", []string{"optim.name=lars", "optim.lr=30", "optim.adapt_norm_bias=true"}, run("lars-30-adapt", "lars", 8192, 1, 0.80, 0.81)),
		// lamb at 8192: 0.05 best, 0.15 failed above it: inside.
		g("lamb-0.015", []string{"optim.name=lamb", "optim.lr=0.015"}, run("lamb-0.015", "lamb", 8192, 1, 0.91, 0.91)),
		g("lamb-0.05", []string{"optim.name=lamb", "optim.lr=0.05"}, run("lamb-0.05", "lamb", 8192, 1, 0.92, 0.925)),
		// lamb at 8192 with a longer warm-up at the grid's pick: a trial.
		g("lamb-0.05-warm15", []string{"optim.name=lamb", "optim.lr=0.05", "schedule.warmup_epochs=15"}, run("lamb-0.05-warm15", "lamb", 8192, 1, 0.924, 0.93)),
		// lamb at 128: one rate, no grid at its batch, so no trial either.
		g("lamb-b128", []string{"optim.name=lamb", "optim.lr=0.003"}, run("lamb-b128", "lamb", 128, 1, 0.9, 0.9)),
	}
	failed := []failedRun{{variation: "lamb-0.15", seed: 1, optimizer: "lamb", globalBatch: 8192,
		sets: append(append([]string{}, common...), "optim.name=lamb", "optim.lr=0.15")}}
	return groups, failed
}

// TestPlotValidationVsRate: one curve per grid, named with its settings; a
// rate more than 20 points below the best (lars-100-adapt's 9.62% against
// 93%) is drawn at the axis edge and named in the legend with its figure, a
// failed rate named too and marked "failed" on the plot; no plot without grids.
func TestPlotValidationVsRate(t *testing.T) {
	groups, failed := probeGroups()
	groups = append(groups, group{name: "lars-100-adapt", listed: true, runs: []*runData{func() *runData {
		s := classifierSummary("none", 1, 0.1, 1, 1, 2)
		s.Optimizer, s.GlobalBatch, s.ValAccuracy = "lars", 8192, ptr(0.0962)
		return &runData{variation: "lars-100-adapt", seed: 1, sum: &s}
	}()}, sets: []string{"train.epochs=50", "optim.name=lars", "optim.lr=100", "optim.adapt_norm_bias=true"}})
	fig, err := plotValidationVsRate("probe", groups, failed)
	if err != nil || fig == nil {
		t.Fatalf("no plot: %v", err)
	}
	svg := string(fig.svg)
	for _, want := range []string{
		"probe: validation accuracy (%) against the learning rate",
		">sgd @ 8192<",
		">lars @ 8192 (optim.adapt_norm_bias=true); off the axis 100: 9.62<",
		">lamb @ 8192; failed at 0.15<",
		">lamb @ 8192 (schedule.warmup_epochs=15) at 0.05<",
		">below the dashed line: failed runs and values off the axis, not to scale<",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	// The failed rate is marked on the plot too, in the strip below the band.
	if n := strings.Count(svg, ">failed</text>"); n != 1 {
		t.Errorf("%d failed marks on the plot, want 1", n)
	}
	if fig, err := plotValidationVsRate("one", groups[:1], nil); err != nil || fig != nil {
		t.Errorf("a plot without a grid: %v", err)
	}
}
