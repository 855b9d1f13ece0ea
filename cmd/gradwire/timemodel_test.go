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

// TestTimeModelFitOneRegime: without --split the fit table lists the one fit
// once (the regime over the whole range repeated it).
func TestTimeModelFitOneRegime(t *testing.T) {
	out, _, err := run(t, "timemodel", "fit", "--local", "2", "--sizes", "4KB,64KB,1MB", "--reps", "2", "--split", "", "--out", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "| all sizes | 3 |"); n != 1 {
		t.Errorf("the whole-range fit is listed %d times, want once:\n%s", n, out)
	}
}

func TestTimeModelFitErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"timemodel", "fit", "--local", "2", "--sizes", "1KB,huge"}, []string{`--sizes "1KB,huge"`, `size "huge"`}},
		{[]string{"timemodel", "fit", "--local", "2", "--sizes", "2B"}, []string{`size "2B"`, ">= 4"}},
		{[]string{"timemodel", "fit", "--local", "2", "--reps", "0"}, []string{"--reps 0", ">= 1"}},
		{[]string{"timemodel", "fit", "--local", "2", "--algorithm", "mesh"}, []string{`--algorithm "mesh"`, "ring"}},
		{[]string{"timemodel", "fit", "--local", "2", "--split", "16MB,64KB"}, []string{`--split "16MB,64KB"`, "increasing"}},
		{[]string{"timemodel", "fit", "--local", "2", "--sizes", "1KB,4KB,1000B"}, []string{`size "1000B" is 1KB again`, "each size once"}},
		{[]string{"timemodel", "fit", "--local", "2", "--split", "64KB,64KB"}, []string{`--split "64KB,64KB"`, "increasing"}},
		{[]string{"timemodel", "fit"}, []string{"mpirun", "--local N"}},
	})
}

// TestTimeModelPredict predicts from a summary written by hand: compute 10 ms,
// one all-reduce of 1e6 bytes. Ring on 4 machines at 10 Gbit/s and 50 us:
// comm 6*50e-6 + 1.5*1e6/1.25e9 = 0.0003 + 0.0012 = 1.5 ms, step 11.5 ms,
// speed-up 4*10/11.5 = 3.48x; width 2: max(10, 1.5) = 10 ms, 4.00x.
func TestTimeModelPredict(t *testing.T) {
	dir := t.TempDir()
	summary := `{"model": "mlp", "compressor": "none", "workers": 8, "time_model": {"compute_seconds_per_step": 0.01,
		"bytes_per_worker_step": 1000000, "link_bytes_per_step": 1750000, "topology": "ring", "latency_us": 50,
		"all_reduce_bytes": [1000000], "predictions": []}}`
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "timemodel", "predict", "--run", dir, "--workers", "4", "--gbps", "10", "--algorithms", "ring")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| 4 | 11.50 / 3.48x | 10.00 / 4.00x |") {
		t.Fatalf("table lacks the hand-worked row:\n%s", out)
	}
	for _, f := range []string{"predict.csv", "table.md", "predict.png", "predict.svg"} {
		if st, err := os.Stat(filepath.Join(dir, "timemodel", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	old := t.TempDir()
	os.WriteFile(filepath.Join(old, "summary.json"), []byte(strings.Replace(summary, `"all_reduce_bytes": [1000000], `, "", 1)), 0o644)
	one := t.TempDir()
	os.WriteFile(filepath.Join(one, "summary.json"), []byte(`{"model": "mlp", "workers": 1}`), 0o644)
	wantErrors(t, []errorCase{
		{[]string{"timemodel", "predict"}, []string{"--run"}},
		{[]string{"timemodel", "predict", "--run", old}, []string{"lists no collective calls", "older gradwire"}},
		{[]string{"timemodel", "predict", "--run", one}, []string{"no time_model"}},
		{[]string{"timemodel", "predict", "--run", dir, "--workers", "0"}, []string{"--workers 0"}},
		{[]string{"timemodel", "predict", "--run", dir, "--gbps", "0"}, []string{"--gbps 0"}},
		{[]string{"timemodel", "predict", "--run", dir, "--algorithms", "star"}, []string{`--algorithms "star"`}},
		{[]string{"timemodel", "predict", "--run", dir, "--pipeline", "3"}, []string{"--pipeline 3"}},
		{[]string{"timemodel", "predict", "--run", dir, "--workers", "4,8,4"}, []string{"--workers 4", "given twice"}},
		{[]string{"timemodel", "predict", "--run", dir, "--gbps", "10,10"}, []string{"--gbps 10", "given twice"}},
	})
	// One cluster size: the log2 axis gets an octave either side (gonum/plot
	// widened it to 0..2, and the ticks never ended).
	if _, _, err := run(t, "timemodel", "predict", "--run", dir, "--workers", "1", "--out", t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestTimeModelLayerPar: ResNet-20's nine basic blocks split 4+5 at K = 2 and
// 3+3+3 at K = 3; flags out of range are refused before any stage is built.
func TestTimeModelLayerPar(t *testing.T) {
	out, _, err := run(t, "timemodel", "layerpar", "--serial-seconds-per-example", "0.001", "--stages", "2,3", "--gbps", "10")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | 4+5 |", "| 3 | 3+3+3 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// A fixed limit, so that the too-large input is refused on any machine.
	t.Setenv("GRADWIRE_MEMORY_LIMIT", "16GiB")
	base := []string{"timemodel", "layerpar", "--serial-seconds-per-example", "0.001"}
	cases := []errorCase{
		{[]string{"timemodel", "layerpar"}, []string{"--serial-seconds-per-example: 0"}},
		{append(base[:2:2], "--serial-seconds-per-example", "inf"), []string{"--serial-seconds-per-example: +Inf", "finite"}},
	}
	for _, c := range []struct{ flag, value, want string }{
		{"--classes", "0", "--classes: 0: must be at least 2"},
		{"--input", "0,28,28", "--input: [0 28 28]"},
		{"--input", "1,28", "--input: [1 28]"},
		{"--input", "1,100000,100000", "more than the 16.0 GiB available (GRADWIRE_MEMORY_LIMIT)"},
		{"--latency-us", "-1", "--latency-us: -1"},
		{"--latency-us", "inf", "--latency-us: +Inf"},
		{"--rounds", "0", "--rounds: 0"},
		{"--serial-epochs", "-1", "--serial-epochs: -1"},
		{"--cycles", "0", "--cycles: 0: must be in [1, --rounds 6]"},
		{"--cycles", "7", "--cycles: 7"},
		{"--stages", "2,3,2", "--stages 2: given twice"},
		{"--gbps", "1,1", "--gbps 1: given twice"},
	} {
		cases = append(cases, errorCase{append(append([]string{}, base...), c.flag, c.value), []string{c.want}})
	}
	wantErrors(t, cases)
}
