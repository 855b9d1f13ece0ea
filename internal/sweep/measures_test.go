package sweep

import (
	"encoding/json"
	"math"
	"path/filepath"
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
// pairs (a,b) -1, (a,c) +1, (b,c) -1, tau = 2(-1)/6 = -0.333.
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
	for _, want := range []string{"## Measures (gradwire measure)", "| c | 1 | 99.00 | 88.00 | +11.00 | 200 |",
		"over the 3 measured runs: parameter norm -0.333,", "top Hessian eigenvalue 1.000."} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks %q:\n%s", want, res.Table)
		}
	}
}
