package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/version"
)

func TestBenchFormats(t *testing.T) {
	out, stderr, err := run(t, "bench", "--model", "mlp", "--batch", "2", "--steps", "1", "--warmup", "0", "--trials", "3", "--format", "csv")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[0]) != len(rows[1]) || rows[0][0] != "model" || rows[1][0] != "mlp" || rows[1][1] != "2" || rows[1][2] != "535818" {
		t.Fatalf("csv: %v %q", err, out)
	}
	col := map[string]string{}
	for i, h := range rows[0] {
		col[h] = rows[1][i]
	}
	if col["warmup"] != "0" || col["steps"] != "1" || col["trials"] != "3" {
		t.Errorf("csv counts: %v", col)
	}
	if col["machine"] != version.Machine() || col["gomaxprocs"] != strconv.Itoa(runtime.GOMAXPROCS(0)) {
		t.Errorf("csv machine %q, gomaxprocs %q; want %q, %d", col["machine"], col["gomaxprocs"], version.Machine(), runtime.GOMAXPROCS(0))
	}
	// Three trials of one step each; the best is the fastest of them.
	trials := strings.Split(col["trial_seconds"], ";")
	best, _ := strconv.ParseFloat(col["best_seconds"], 64)
	if len(trials) != 3 {
		t.Fatalf("trial_seconds %q, want 3 values", col["trial_seconds"])
	}
	for _, s := range trials {
		if v, err := strconv.ParseFloat(s, 64); err != nil || v < best {
			t.Errorf("trial %q (%v) below best %v", s, err, best)
		}
	}
	if spread, err := strconv.ParseFloat(col["spread"], 64); err != nil || spread < 1 {
		t.Errorf("spread %q: %v", col["spread"], err)
	}

	out, _, err = run(t, "bench", "--model", "lenet5", "--batch", "2", "--steps", "1", "--warmup", "1", "--trials", "2", "--ops", "gorgonia", "--format", "json")
	var rs []struct {
		Model  string    `json:"model"`
		Ops    string    `json:"ops"`
		FLOPs  int64     `json:"flop_per_step"`
		Trials []float64 `json:"trial_seconds"`
		Best   float64   `json:"best_seconds"`
		Median float64   `json:"median_seconds"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rs) != nil || len(rs) != 1 || rs[0].Ops != "gorgonia" || rs[0].FLOPs != 2*3*833_040 {
		t.Fatalf("json: %v %q", err, out)
	}
	// Two trials: the median is their mean, the best the smaller.
	if tr := rs[0].Trials; len(tr) != 2 || rs[0].Best != min(tr[0], tr[1]) || rs[0].Median != (tr[0]+tr[1])/2 {
		t.Errorf("json trials %v, best %v, median %v", tr, rs[0].Best, rs[0].Median)
	}

	out, _, err = run(t, "bench", "--model", "mlp", "--batch", "2", "--steps", "1", "--warmup", "0", "--trials", "2")
	if err != nil || !strings.Contains(out, "| mlp | 2 | 535818 | 2 x 1 |") || !strings.Contains(out, "| spread |") ||
		!strings.HasPrefix(out, version.Machine()+"; GOMAXPROCS ") {
		t.Fatalf("table: %v %q", err, out)
	}
}

func TestBenchErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"bench", "--model", "vgg"}, []string{"--model vgg"}},
		{[]string{"bench", "--model", "mlp", "--format", "xml"}, []string{`--format "xml"`}},
		{[]string{"bench", "--model", "mlp", "--ops", "turbo"}, []string{`--ops "turbo"`, "fast, gorgonia"}},
		{[]string{"bench", "--engine", "--model", "mlp", "--ops", "turbo"}, []string{`--ops "turbo"`, "fast, gorgonia"}},
		{[]string{"bench", "--model", "mlp,lenet5,mlp"}, []string{"--model mlp", "given twice"}},
		{[]string{"bench", "--model", "mlp", "--steps", "0"}, []string{"--steps 0", ">= 1"}},
		{[]string{"bench", "--model", "mlp", "--trials", "0"}, []string{"--trials 0", ">= 1"}},
		{[]string{"bench", "--model", "mlp", "--warmup", "-1"}, []string{"--warmup -1", ">= 0"}},
		{[]string{"bench", "--model", "mlp", "--batch", "0"}, []string{"batch 0"}},
		{[]string{"bench", "--model", "mlp", "--batch", "2", "extra1"}, []string{`bench takes no arguments (got "extra1")`}},
	})
}

func TestBenchEngine(t *testing.T) {
	out, stderr, err := run(t, "bench", "--engine", "--model", "lenet5", "--batch", "8", "--steps", "1", "--warmup", "1", "--trials", "2",
		"--scenario", "1/1/none", "--scenario", "4/2/none,4/2/dgc", "--format", "csv")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("csv: %v %q", err, out)
	}
	col := func(r int, name string) string {
		for i, h := range rows[0] {
			if h == name {
				return rows[r][i]
			}
		}
		t.Fatalf("no column %q in %v", name, rows[0])
		return ""
	}
	for r, want := range []struct{ scenario, workerBatch, overhead string }{{"1/1/none", "8", ""}, {"4/2/none", "2", ""}, {"4/2/dgc", "2", "x"}} {
		if col(r+1, "model") != "lenet5" || col(r+1, "scenario") != want.scenario || col(r+1, "worker_batch") != want.workerBatch || col(r+1, "global_batch") != "8" {
			t.Errorf("row %d: %v", r+1, rows[r+1])
		}
		if got := col(r+1, "best_overhead_percent"); (got == "") != (want.overhead == "") {
			t.Errorf("row %d: overhead %q", r+1, got)
		}
	}
	if col(1, "best_ratio") != "1.000" || len(strings.Split(col(2, "trial_seconds"), ";")) != 2 {
		t.Errorf("first row %v", rows[1])
	}

	out, _, err = run(t, "bench", "--engine", "--model", "mlp", "--batch", "4", "--steps", "1", "--warmup", "0", "--trials", "1",
		"--scenario", "2/1/none", "--format", "json")
	var rs []struct {
		Model       string `json:"model"`
		GlobalBatch int    `json:"global_batch"`
		Scenarios   []struct {
			Scenario string  `json:"scenario"`
			Passes   string  `json:"passes"`
			Best     float64 `json:"best_seconds"`
		} `json:"scenarios"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rs) != nil || len(rs) != 1 || rs[0].GlobalBatch != 4 || len(rs[0].Scenarios) != 1 ||
		rs[0].Scenarios[0].Scenario != "2/1/none" || rs[0].Scenarios[0].Passes != "fused" || rs[0].Scenarios[0].Best <= 0 {
		t.Fatalf("json: %v %q", err, out)
	}

	out, _, err = run(t, "bench", "--engine", "--model", "mlp", "--batch", "4", "--steps", "1", "--warmup", "0", "--trials", "1", "--scenario", "1/1/none")
	if err != nil || !strings.Contains(out, "| mlp | 4 | 1/1/none | one by one | 4 |") || !strings.Contains(out, "GOMAXPROCS") {
		t.Fatalf("table: %v %q", err, out)
	}
}

func TestBenchEngineErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"bench", "--scenario", "8/2/dgc"}, []string{"--scenario 8/2/dgc", "only with --engine"}},
		{[]string{"bench", "--engine", "--model", "mlp", "--scenario", "8/2"}, []string{"--scenario", "WORKERS/REPLICAS/COMPRESSOR"}},
		{[]string{"bench", "--engine", "--model", "mlp", "--scenario", "8/2/zip"}, []string{"--scenario", `unknown compressor "zip"`}},
		{[]string{"bench", "--engine", "--model", "mlp", "--batch", "12"}, []string{"--batch 12", "8 workers"}},
		{[]string{"bench", "--engine", "--model", "vgg"}, []string{"--model vgg"}},
		{[]string{"bench", "--engine", "--model", "mlp", "--format", "xml"}, []string{`--format "xml"`}},
	})
}

func TestBenchCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if _, stderr, err := run(t, "bench", "--model", "mlp", "--batch", "2", "--steps", "1", "--warmup", "0", "--trials", "1", "--cpuprofile", path); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// A profile is gzip data: it starts with the gzip magic bytes.
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile: %v, %d bytes", err, len(b))
	}
	wantErrors(t, []errorCase{{[]string{"bench", "--model", "mlp", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir")}, []string{"--cpuprofile"}}})
}
