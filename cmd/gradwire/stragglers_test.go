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
		{[]string{"stragglers", "--workers", "0"}, []string{"--workers 0", "expected 1 to 1048576"}},
		{[]string{"stragglers", "--workers", "1000000000000"}, []string{"--workers 1000000000000", "expected 1 to 1048576"}},
		{[]string{"stragglers", "--slow", "0.5"}, []string{"--slow 0.5"}},
		{[]string{"stragglers", "--delays", "exp,gauss,exp"}, []string{"--delays exp", "given twice"}},
		{[]string{"stragglers", "--workers", "2,4,2"}, []string{"--workers 2", "given twice"}},
		{[]string{"stragglers", "--backups", "1,1"}, []string{"--backups 1", "given twice"}},
		{[]string{"stragglers", "--delays="}, []string{"--delays", "at least one value"}},
		{[]string{"stragglers", "--workers", "2,4", "--backups", "4,5"}, []string{"--backups [4 5] with --workers [2 4]", "no case"}},
	})
}

// TestStragglersOneWorker: a single K makes a one-value log2 axis, which
// gonum/plot widened to 0..2 and the power-of-two ticks then doubled from 0
// for ever. The table names only the delays run.
func TestStragglersOneWorker(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "stragglers", "--delays", "none,exp", "--workers", "1", "--trials", "100", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| none | 1 | 0 | 0.0000 ± 0.0000 | 0.0000 | exact |") || !strings.Contains(out, "Delays: none (X = 0); exp mean 0.1.") {
		t.Errorf("table:\n%s", out)
	}
	if strings.Contains(out, "pareto") || strings.Contains(out, "gauss") {
		t.Errorf("the table describes delays that were not run:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(dir, "stragglers.png")); err != nil || st.Size() == 0 {
		t.Errorf("stragglers.png: %v", err)
	}
}

// TestStragglersPlotsFewestBackups: without b = 0 the plot draws the fewest
// backups run (it drew no series at all) and says so in its title.
func TestStragglersPlotsFewestBackups(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := run(t, "stragglers", "--delays", "exp", "--workers", "2,4", "--backups", "2,1", "--trials", "100", "--out", dir); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "stragglers.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(1 backup)", "exp: simulated"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("stragglers.svg lacks %q", want)
		}
	}
}

func TestLog2Ticks(t *testing.T) {
	if got := (log2Ticks{}).Ticks(0, 2); got != nil {
		t.Errorf("Ticks(0, 2) = %v, want none", got)
	}
	var labels []string
	for _, tk := range (log2Ticks{}).Ticks(1.5, 16) {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, ",") != "2,4,8,16" {
		t.Errorf("Ticks(1.5, 16) labels %v, want 2,4,8,16", labels)
	}
}
