package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSweepAndReportHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"sweep", "--help"}, []string{"--config", "--results", "--dry-run", "--only", "experiments/results", "seed-k", "summary.json", "variations"}},
		{[]string{"report", "--help"}, []string{"report DIR", "runs.csv", "table.md", "test_metric.png", "accuracy_vs_compression.png", "train_loss.png", "sweep.yaml"}},
	} {
		out, _, err := run(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v does not mention %s", tc.args, w)
			}
		}
	}
}

func TestSweepAndReportErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("base: nowhere.yaml\nvariatons: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErrors(t, []errorCase{
		{[]string{"report"}, []string{"report needs one argument", "DIR"}},
		{[]string{"report", "a", "b"}, []string{"report needs one argument"}},
		{[]string{"report", filepath.Join(dir, "missing")}, []string{filepath.Join(dir, "missing"), "not a folder"}},
		{[]string{"report", dir}, []string{dir, "no finished run"}},
		{[]string{"sweep"}, []string{"--config FILE is required"}},
		{[]string{"sweep", "--config", filepath.Join(dir, "none.yaml")}, []string{filepath.Join(dir, "none.yaml")}},
		{[]string{"sweep", "--config", bad}, []string{bad, `unknown key "variatons"`}},
	})
}
