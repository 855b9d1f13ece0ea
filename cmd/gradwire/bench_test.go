package main

import (
	"encoding/csv"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
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
	if err != nil || !strings.Contains(out, "| mlp | 2 | 535818 | 2 x 1 |") || !strings.Contains(out, "| spread |") {
		t.Fatalf("table: %v %q", err, out)
	}
}

func TestBenchErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"bench", "--model", "vgg"}, []string{"--model vgg"}},
		{[]string{"bench", "--model", "mlp", "--format", "xml"}, []string{`--format "xml"`}},
		{[]string{"bench", "--model", "mlp", "--ops", "turbo"}, []string{"model.ops"}},
		{[]string{"bench", "--model", "mlp", "--steps", "0"}, []string{"--steps 0", ">= 1"}},
		{[]string{"bench", "--model", "mlp", "--trials", "0"}, []string{"--trials 0", ">= 1"}},
		{[]string{"bench", "--model", "mlp", "--warmup", "-1"}, []string{"--warmup -1", ">= 0"}},
		{[]string{"bench", "--model", "mlp", "--batch", "0"}, []string{"batch 0"}},
		{[]string{"bench", "--model", "mlp", "--batch", "2", "extra1"}, []string{"unknown command"}},
	})
}
