package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchFormats(t *testing.T) {
	out, stderr, err := run(t, "bench", "--model", "mlp", "--batch", "2", "--steps", "1", "--warmup", "0", "--format", "csv")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 2 || rows[0][0] != "model" || rows[1][0] != "mlp" || rows[1][1] != "2" || rows[1][2] != "535818" {
		t.Fatalf("csv: %v %q", err, out)
	}
	out, _, err = run(t, "bench", "--model", "lenet5", "--batch", "2", "--steps", "1", "--ops", "gorgonia", "--format", "json")
	var rs []struct {
		Model string `json:"model"`
		Ops   string `json:"ops"`
		FLOPs int64  `json:"flop_per_step"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rs) != nil || len(rs) != 1 || rs[0].Ops != "gorgonia" || rs[0].FLOPs != 2*3*833_040 {
		t.Fatalf("json: %v %q", err, out)
	}
	out, _, err = run(t, "bench", "--model", "mlp", "--batch", "2", "--steps", "1")
	if err != nil || !strings.Contains(out, "| mlp | 2 | 535818 |") {
		t.Fatalf("table: %v %q", err, out)
	}
}

func TestBenchErrors(t *testing.T) {
	wantErrors(t, []errorCase{
		{[]string{"bench", "--model", "vgg"}, []string{"--model vgg"}},
		{[]string{"bench", "--model", "mlp", "--format", "xml"}, []string{`--format "xml"`}},
		{[]string{"bench", "--model", "mlp", "--ops", "turbo"}, []string{"model.ops"}},
		{[]string{"bench", "--model", "mlp", "--steps", "0"}, []string{"steps"}},
		{[]string{"bench", "--model", "mlp", "--batch", "0"}, []string{"batch 0"}},
		{[]string{"bench", "--model", "mlp", "--batch", "2", "extra1"}, []string{"unknown command"}},
	})
}
