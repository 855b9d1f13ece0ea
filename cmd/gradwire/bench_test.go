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
	for args, want := range map[string]string{
		"--model vgg":                  "--model vgg",
		"--model mlp --format xml":     `--format "xml"`,
		"--model mlp --ops turbo":      "model.ops",
		"--model mlp --steps 0":        "steps",
		"--model mlp --batch 0":        "batch 0",
		"--model mlp --batch 2 extra1": "unknown command",
	} {
		_, _, err := run(t, append([]string{"bench"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bench %s: error %v, want it to mention %q", args, err, want)
		}
	}
}
