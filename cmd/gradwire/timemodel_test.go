package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTimeModelFitLocal(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "timemodel", "fit", "--local", "2", "--sizes", "4KB,16KB,1MB,4MB", "--reps", "2", "--split", "64KB", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"in-process group of 2 members", "| 4KB |", "| 4MB |", "| all sizes | 4 |", "| <= 64KB | 2 |", "| > 64KB | 2 |", "ring on 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"table.md", "fit.csv", "fit.png", "fit.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "fit.csv"))
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 5 ||
		lines[0] != "bytes,best_seconds,median_seconds,fit_all_seconds,fit_regime1_seconds,fit_regime2_seconds" || !strings.HasPrefix(lines[1], "4000,") {
		t.Errorf("fit.csv:\n%s", csv)
	}
}

func TestTimeModelFitErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"timemodel", "fit", "--local", "2", "--sizes", "1KB,huge"}, []string{`--sizes "1KB,huge"`, `size "huge"`}},
		{[]string{"timemodel", "fit", "--local", "2", "--sizes", "2B"}, []string{`size "2B"`, ">= 4"}},
		{[]string{"timemodel", "fit", "--local", "2", "--reps", "0"}, []string{"--reps 0", ">= 1"}},
		{[]string{"timemodel", "fit", "--local", "2", "--algorithm", "mesh"}, []string{`--algorithm "mesh"`, "ring"}},
		{[]string{"timemodel", "fit", "--local", "2", "--split", "16MB,64KB"}, []string{`--split "16MB,64KB"`, "increasing"}},
		{[]string{"timemodel", "fit"}, []string{"mpirun", "--local N"}},
	})
}
