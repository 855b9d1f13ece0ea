package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStragglers(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "stragglers", "--delays", "exp,none", "--workers", "2,8", "--backups", "0,2", "--trials", "4000", "--slow", "2", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	// exp mean 0.1, 8 workers: 0.1 H_8 = 0.27179; with 2 backups 0.1 (H_8 - H_2) = 0.12179.
	for _, want := range []string{"| exp | 8 | 0 |", "| 0.2718 | mean (H_K - H_b) |", "| exp | 8 | 2 |", "| 0.1218 | mean (H_K - H_b) |",
		"| none | 2 | 0 | 0.0000 ± 0.0000 | 0.0000 | exact |", "| exp, worker 0 x2 | 8 | 0 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| exp | 2 | 2 |") {
		t.Error("a case with as many backups as workers was simulated")
	}
	for _, f := range []string{"table.md", "stragglers.csv", "stragglers.png", "stragglers.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	wantErrors(t, []errorCase{
		{[]string{"stragglers", "--delays", "weibull"}, []string{"--delays weibull", "unknown delay"}},
		{[]string{"stragglers", "--delays", "pareto", "--shape", "1"}, []string{"--delays pareto", "shape a > 1"}},
		{[]string{"stragglers", "--trials", "1"}, []string{"--trials 1"}},
		{[]string{"stragglers", "--workers", "0"}, []string{"--workers 0"}},
		{[]string{"stragglers", "--slow", "0.5"}, []string{"--slow 0.5"}},
	})
}
