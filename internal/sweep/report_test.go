package sweep

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/train"
)

func ptr(v float64) *float64 { return &v }

// writeRun writes the files of a finished run by hand: summary.json and a
// metrics.jsonl of two epochs with two step records each.
func writeRun(t *testing.T, dir, variation string, s train.Summary) {
	t.Helper()
	run := filepath.Join(dir, "runs", variation, fmt.Sprintf("seed-%d", s.Seed))
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(run, "summary.json"), string(b))
	var lines []string
	for epoch := 1; epoch <= 2; epoch++ {
		for step := 2*epoch - 1; step <= 2*epoch; step++ {
			lines = append(lines, fmt.Sprintf(`{"kind":"step","epoch":%d,"step":%d,"loss":%g,"lr":0.1}`, epoch, step, 2.0/float64(step)))
		}
		e := train.EpochResult{Kind: "epoch", Epoch: epoch, Step: 2 * epoch, TestLoss: s.TestLoss + 1/float64(epoch)}
		if s.TestAccuracy != nil {
			e.TestAccuracy = ptr(*s.TestAccuracy - 0.1/float64(epoch))
		}
		b, _ := json.Marshal(e)
		lines = append(lines, string(b))
	}
	writeFile(t, filepath.Join(run, "metrics.jsonl"), strings.Join(lines, "\n")+"\n")
}

func classifierSummary(compressor string, seed int64, acc, ratio, steady, speedup float64) train.Summary {
	return train.Summary{Model: "lenet5", Dataset: "fashion-mnist", Epochs: 2, Steps: 4, GlobalBatch: 256, Workers: 8,
		Optimizer: "sgd", Compressor: compressor, Seed: seed, TestAccuracy: ptr(acc), TestLoss: 0.3, WallSeconds: 10,
		CompressionRatio: ratio, CompressionRatioSteady: steady,
		CompressionRatioByKind: map[string]float64{"conv": ratio, "bias": 1},
		TimeModel: &train.TimeModel{Topology: "ring", BytesPerWorkerStep: int64(1e6 / ratio), LinkBytesPerStep: int64(7e6 / ratio), Predictions: []train.PredictionAt{
			{Gbps: 1, SpeedUp: speedup, CommSeconds: 0.5}, {Gbps: 10, SpeedUp: speedup * 2}, {Gbps: 100, SpeedUp: speedup * 3}}},
	}
}

// TestReportAggregates checks table.md against numbers worked out by hand, and
// runs.csv's columns and order, on hand-written run files.
func TestReportAggregates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "paper")
	// sweep.yaml orders topk before dense, and expects a third topk seed.
	writeFile(t, filepath.Join(dir, "sweep.yaml"), `name: paper
source: experiments/paper.yaml
base: configs/lenet5-fashion.yaml
set: []
variations:
  - name: topk
    seeds: [1, 2, 3]
    set: [compress.name=topk]
  - name: dense
    seeds: [1, 2]
    set: []
  - name: fp16
    seeds: [1]
    set: [compress.name=fp16]
`)
	writeRun(t, dir, "dense", classifierSummary("none", 1, 0.90, 1, 1, 5.0))
	writeRun(t, dir, "dense", classifierSummary("none", 2, 0.92, 1, 1, 5.2))
	slow := classifierSummary("topk", 2, 0.89, 12, 120, 7.7)
	slow.WallSeconds = 14
	writeRun(t, dir, "topk", slow)
	writeRun(t, dir, "topk", classifierSummary("topk", 1, 0.88, 10, 100, 7.5))
	writeRun(t, dir, "fp16", classifierSummary("fp16", 1, 0.9125, 2, 2, 6))
	one := classifierSummary("none", 1, 0.5, 1, 1, 0)
	one.Workers, one.TimeModel = 1, nil
	writeRun(t, dir, "single", one)                                                        // not in sweep.yaml: reported last, no dense baseline of its own kind
	writeFile(t, filepath.Join(dir, "runs", "topk", "seed-3", "config.yaml"), "seed: 3\n") // unfinished
	inv := func(started, version string, wall float64, trained, failed int, interrupted bool) Invocation {
		return Invocation{Command: "gradwire sweep --config experiments/paper.yaml", Version: version, GoVersion: "go1.26", BLAS: "gonum",
			Machine: "cpu, 2 logical CPUs", Started: started, WallSeconds: wall, Trained: trained, Failed: failed, Interrupted: interrupted}
	}
	for _, i := range []Invocation{inv("2026-01-02T03:04:05Z", "v1", 100, 5, 0, true), inv("2026-01-03T00:00:00Z", "v2", 20, 1, 1, false),
		inv("2026-01-04T00:00:00Z", "v2", 3, 0, 0, false)} {
		if err := appendInvocation(dir, i); err != nil {
			t.Fatal(err)
		}
	}

	var warn strings.Builder
	res, err := Report(dir, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "topk seed 3") || !strings.Contains(warn.String(), "single") {
		t.Errorf("warnings: %q", warn.String())
	}
	// dense: 90 and 92 -> mean 91, sample std sqrt(2) = 1.414.
	// topk: 88 and 89 -> 88.5 ± 0.707, 2.5 points below dense; ratio 10, 12 ->
	// 11 ± 1.414 (one decimal above 10); steady 100, 120 -> 110 ± 14; speed-up
	// 7.5, 7.7 -> 7.60 ± 0.14, at 10 Gbit/s twice that. Bytes sent per step
	// 1e6/ratio: 100000 and 83333 B -> 91.7 ± 11.8 kB; the link 7 times that:
	// 700000 and 583333 B -> 642 ± 82 kB; wall time 10 and 14 s -> 12 ± 3.
	// Invocations: 100 + 20 + 3 s = 123 s, the one that trained nothing has
	// no line.
	for _, want := range []string{
		"| variation | model | compressor | workers | global batch | optimizer | seeds | test accuracy (%) | Δ dense (pp) | compression ratio | steady compression ratio | sent per worker-step (kB) | busiest link per step (kB) | speed-up at 1 Gbit/s | speed-up at 10 Gbit/s | wall time per run (s) |",
		"| topk | lenet5 | topk | 8 | 256 | sgd | 1, 2 | 88.50 ± 0.71 | -2.50 | 11.0 ± 1.4 | 110 ± 14 | 91.7 ± 11.8 | 642 ± 82 | 7.60 ± 0.14 | 15.20 ± 0.28 | 12 ± 3 |",
		"| dense | lenet5 | none | 8 | 256 | sgd | 1, 2 | 91.00 ± 1.41 | baseline | 1.00 ± 0.00 | 1.00 ± 0.00 | 1000 ± 0 | 7000 ± 0 | 5.10 ± 0.14 | 10.20 ± 0.28 | 10 ± 0 |",
		"| fp16 | lenet5 | fp16 | 8 | 256 | sgd | 1 | 91.25 | +0.25 | 2.00 | 2.00 | 500 | 3500 | 6.00 | 12.00 | 10 |",
		"| single | lenet5 | none | 1 | 256 | sgd | 1 | 50.00 | baseline | 1.00 | 1.00 |  |  |  |  | 10 |",
		"- 2026-01-02T03:04:05Z: `gradwire sweep --config experiments/paper.yaml` trained 5 runs in 100 s, interrupted; v1 (go1.26, blas gonum) on cpu, 2 logical CPUs.",
		"- 2026-01-03T00:00:00Z: `gradwire sweep --config experiments/paper.yaml` trained 1 run in 20 s, 1 failed; v2 (go1.26, blas gonum) on cpu, 2 logical CPUs.",
		"Sweep run time, all invocations: 123 s (0.0 h).",
		"6 runs, 64 s of training",
		"Not finished, left out: topk seed 3.",
	} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
		}
	}
	// The runs' 64 s fit in the invocations' 123 s: no unrecorded invocation.
	if strings.Contains(res.Table, "left no record") {
		t.Errorf("table.md claims unrecorded invocations:\n%s", res.Table)
	}
	csvText := readFile(t, filepath.Join(dir, RunsCSV))
	header := strings.SplitN(csvText, "\n", 2)[0]
	wantHeader := "variation,seed,backend,blas,bytes_dense,bytes_sent,compression_ratio,compression_ratio_by_kind.bias,compression_ratio_by_kind.conv," +
		"compression_ratio_steady,compressor,data_dir,dataset,epochs,global_batch,go_version,model,name,optimizer,optimizer_state_bytes_per_param,params,replicas," +
		"samples_per_second,steps,test_accuracy,test_examples,test_loss," +
		"time_model.bytes_per_worker_step,time_model.compute_seconds_per_step,time_model.latency_us,time_model.link_bytes_per_step," +
		"time_model.predictions.1gbps.comm_seconds,time_model.predictions.1gbps.speedup,time_model.predictions.1gbps.step_seconds," +
		"time_model.predictions.10gbps.comm_seconds,time_model.predictions.10gbps.speedup,time_model.predictions.10gbps.step_seconds," +
		"time_model.predictions.100gbps.comm_seconds,time_model.predictions.100gbps.speedup,time_model.predictions.100gbps.step_seconds," +
		"time_model.topology,train_loss_final,version,wall_seconds,workers"
	if header != wantHeader {
		t.Errorf("runs.csv header\n%s\nwant\n%s", header, wantHeader)
	}
	rows := strings.Split(strings.TrimSpace(csvText), "\n")
	var order []string
	for _, r := range rows[1:] {
		order = append(order, strings.Join(strings.SplitN(r, ",", 3)[:2], "/"))
	}
	if got := strings.Join(order, " "); got != "topk/1 topk/2 dense/1 dense/2 fp16/1 single/1" {
		t.Errorf("runs.csv order %s", got)
	}
	if !strings.HasPrefix(rows[6], "single,1,,") || !strings.Contains(rows[1], ",0.88,") {
		t.Errorf("runs.csv rows:\n%s\n%s", rows[1], rows[6])
	}
	for _, f := range []string{TestMetricPNG, AccVsRatioPNG, TrainLossPNG} {
		checkPNG(t, filepath.Join(dir, f))
	}
}

// TestReportLanguageModel: without accuracies the table shows the test loss.
func TestReportLanguageModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lm")
	for i, loss := range []float64{1.70, 1.75} {
		s := train.Summary{Model: "charlstm", Compressor: "none", Workers: 4, GlobalBatch: 128, Optimizer: "adam", Seed: int64(i + 1),
			TestLoss: loss, ValBPC: ptr(loss / 0.693), CompressionRatio: 1, CompressionRatioSteady: 1}
		writeRun(t, dir, "dense", s)
		s.Compressor, s.TestLoss, s.CompressionRatio, s.CompressionRatioSteady = "dgc", loss+0.1, 200, 999.4
		writeRun(t, dir, "dgc", s)
	}
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No sweep.yaml: variations by name. dgc: 1.80, 1.85 -> 1.825 ± 0.035, +0.100 from dense.
	for _, want := range []string{
		"| test loss (nats/char) | Δ dense (nats/char) |",
		"| dense | charlstm | none | 4 | 128 | adam | 1, 2 | 1.725 ± 0.035 | baseline | 1.00 ± 0.00 | 1.00 ± 0.00 |  |",
		"| dgc | charlstm | dgc | 4 | 128 | adam | 1, 2 | 1.825 ± 0.035 | +0.100 | 200 ± 0 | 999 ± 0 |  |",
	} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
		}
	}
	if strings.Index(res.Table, "| dense |") > strings.Index(res.Table, "| dgc |") {
		t.Error("without sweep.yaml, variations are not sorted by name")
	}
}

// TestReportValidation: runs with validation figures get a validation
// accuracy column next to the test one and the line naming the variation best
// on validation, which need not be the one best on test; runs.csv carries
// val_loss and val_accuracy. A variation without validation figures leaves
// its cell blank; the table of a sweep without any has neither.
func TestReportValidation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "recipes")
	run := func(variation string, seed int64, test, val, valLoss float64) {
		s := classifierSummary("none", seed, test, 1, 1, 2)
		if val >= 0 {
			s.ValAccuracy, s.ValLoss = ptr(val), ptr(valLoss)
		}
		writeRun(t, dir, variation, s)
	}
	// lr-a: test 91, 92 -> 91.5; validation 89, 90 -> 89.50 ± 0.71.
	// lr-b: test 93 (best on test); validation 88.5.
	// lr-c: test 90; validation 89.75 -> the best on validation.
	run("lr-a", 1, 0.91, 0.89, 0.31)
	run("lr-a", 2, 0.92, 0.90, 0.30)
	run("lr-b", 1, 0.93, 0.885, 0.33)
	run("lr-c", 1, 0.90, 0.8975, 0.29)
	run("lr-d", 1, 0.95, -1, 0) // no validation split
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// No variation compresses: no Δ dense or compression ratio columns.
		"| seeds | test accuracy (%) | validation accuracy (%) | sent per worker-step (kB) |",
		"| lr-a | lenet5 | none | 8 | 256 | sgd | 1, 2 | 91.50 ± 0.71 | 89.50 ± 0.71 | 1000 ± 0 |",
		"| lr-b | lenet5 | none | 8 | 256 | sgd | 1 | 93.00 | 88.50 | 1000 |",
		"| lr-c | lenet5 | none | 8 | 256 | sgd | 1 | 90.00 | 89.75 | 1000 |",
		"| lr-d | lenet5 | none | 8 | 256 | sgd | 1 | 95.00 |  | 1000 |",
		"|\n\nbest on validation: lr-c (89.75%)\n",
		"No finished run compresses its gradients: no Δ dense or compression ratio columns.",
	} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
		}
	}
	for _, absent := range []string{"Δ dense", "baseline", "compression ratio |"} {
		if strings.Contains(strings.SplitN(res.Table, "\n\nMean", 2)[0], absent) {
			t.Errorf("the table of a sweep without compression has %q:\n%s", absent, res.Table)
		}
	}
	header := strings.SplitN(readFile(t, filepath.Join(dir, RunsCSV)), "\n", 2)[0]
	if !strings.Contains(header, ",val_accuracy,val_loss,") {
		t.Errorf("runs.csv header lacks val_accuracy and val_loss: %s", header)
	}
	// Only the loss (no accuracy): the loss column, the lowest mean best.
	lossOnly := filepath.Join(t.TempDir(), "loss")
	for i, v := range []float64{0.5, 0.4} {
		s := classifierSummary("none", 1, 0.9, 1, 1, 2)
		s.ValLoss = ptr(v)
		writeRun(t, lossOnly, fmt.Sprintf("v%d", i), s)
	}
	if res, err := Report(lossOnly, nil); err != nil || !strings.Contains(res.Table, "| validation loss (nats) |") ||
		!strings.Contains(res.Table, "best on validation: v1 (0.400 nats)") {
		t.Errorf("validation loss only: err %v, table\n%s", err, res.Table)
	}
	// A language model (no test accuracy) is picked on its validation loss,
	// also where its next-character accuracy would pick another variation.
	lm := filepath.Join(t.TempDir(), "lm")
	for i, v := range []struct{ loss, acc float64 }{{1.90, 0.45}, {1.85, 0.44}} {
		s := train.Summary{Model: "charlstm", Compressor: "none", Workers: 4, GlobalBatch: 128, Optimizer: "sgd", Seed: 1,
			TestLoss: v.loss + 0.05, ValLoss: ptr(v.loss), ValAccuracy: ptr(v.acc), CompressionRatio: 1, CompressionRatioSteady: 1}
		writeRun(t, lm, fmt.Sprintf("lr%d", i), s)
	}
	if res, err := Report(lm, nil); err != nil || !strings.Contains(res.Table, "| validation loss (nats) |") ||
		!strings.Contains(res.Table, "best on validation: lr1 (1.850 nats)") {
		t.Errorf("language model: err %v, table\n%s", err, res.Table)
	}
	// Variations that tie as printed are all named, in the file's order; the
	// best compressed one is named too when it is not among them.
	tie := filepath.Join(t.TempDir(), "tie")
	for i, v := range []float64{0.9296, 0.92984, 0.9298, 0.9297} {
		s := classifierSummary("none", 1, 0.9, 1, 1, 2)
		if i == 3 {
			s = classifierSummary("dgc", 1, 0.9, 10, 10, 2)
		}
		s.ValAccuracy = ptr(v)
		writeRun(t, tie, fmt.Sprintf("t%d", i), s)
	}
	if res, err := Report(tie, nil); err != nil || !strings.Contains(res.Table, "best on validation: t1 and t2 tie (92.98% each); best compressed: t3 (92.97%)\n") {
		t.Errorf("a tie: err %v, table\n%s", err, res.Table)
	}
	// A compressed variation among the tied best is not named again.
	tieDGC := filepath.Join(t.TempDir(), "tie-dgc")
	for i, v := range []float64{0.92984, 0.9298} {
		s := classifierSummary([]string{"none", "dgc"}[i], 1, 0.9, 1, 1, 2)
		s.ValAccuracy = ptr(v)
		writeRun(t, tieDGC, fmt.Sprintf("t%d", i), s)
	}
	if res, err := Report(tieDGC, nil); err != nil || !strings.Contains(res.Table, "best on validation: t0 and t1 tie (92.98% each)\n") {
		t.Errorf("a tie with a compressed variation: err %v, table\n%s", err, res.Table)
	}
	// No validation figures at all: no column, no line.
	none := filepath.Join(t.TempDir(), "none")
	writeRun(t, none, "dense", classifierSummary("none", 1, 0.9, 1, 1, 2))
	if res, err := Report(none, nil); err != nil || strings.Contains(res.Table, "best on validation") || strings.Contains(res.Table, "validation accuracy") {
		t.Errorf("no validation split: err %v, table\n%s", err, res.Table)
	}
}

func TestReportErrors(t *testing.T) {
	empty := t.TempDir()
	if _, err := Report(empty, nil); err == nil || !strings.Contains(err.Error(), "no finished run") || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty folder: %v", err)
	}
	run := t.TempDir()
	if err := os.WriteFile(filepath.Join(run, "config.yaml"), []byte("model:\n  name: mlp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Report(run, nil); err == nil || !strings.Contains(err.Error(), run+" is one run's directory") {
		t.Errorf("a run's directory: %v", err)
	}
	missing := filepath.Join(empty, "nope")
	if _, err := Report(missing, nil); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("missing folder: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	writeRun(t, bad, "a", classifierSummary("none", 1, 0.9, 1, 1, 1))
	writeFile(t, filepath.Join(bad, "runs", "a", "seed-1", "metrics.jsonl"), "{\"kind\":\"epoch\"}\nnot json\n")
	if _, err := Report(bad, nil); err == nil || !strings.Contains(err.Error(), "metrics.jsonl:2") {
		t.Errorf("bad metrics line: %v", err)
	}
	// A damaged summary (the sweep counts the run done) says how to get past it.
	for _, text := range []string{"{ broken", "[1, 2]"} {
		damaged := filepath.Join(t.TempDir(), "damaged")
		writeRun(t, damaged, "a", classifierSummary("none", 1, 0.9, 1, 1, 1))
		path := filepath.Join(damaged, "runs", "a", "seed-1", "summary.json")
		writeFile(t, path, text)
		_, err := Report(damaged, nil)
		for _, w := range []string{path + ": damaged", "restore the file, or delete " + filepath.Dir(path)} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("summary %q: error %v, want it to contain %q", text, err, w)
			}
		}
	}
}

func TestSortColumns(t *testing.T) {
	cols := []string{"b", "a.100gbps.x", "a.10gbps.x", "a.1gbps.y", "a.1gbps.x", "a", "a.2"}
	sortColumns(cols)
	if got := strings.Join(cols, " "); got != "a a.1gbps.x a.1gbps.y a.2 a.10gbps.x a.100gbps.x b" {
		t.Errorf("sorted %s", got)
	}
}

// TestReportOptimizerBatchTable checks the large-batch table: optimizers as rows,
// global batches as sorted columns, a dash where no run finished, the mean over
// seeds, and the optimizer's state bytes per parameter.
func TestReportOptimizerBatchTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "largebatch")
	run := func(variation, opt string, batch int, seed int64, acc, state float64) {
		s := classifierSummary("none", seed, acc, 1, 1, 2)
		s.Optimizer, s.GlobalBatch, s.OptimizerStateBytesPerParam = opt, batch, state
		writeRun(t, dir, variation, s)
	}
	run("sgd-b1024", "sgd", 1024, 1, 0.80, 4)
	run("sgd-b128", "sgd", 128, 1, 0.90, 4)
	run("sgd-b128", "sgd", 128, 2, 0.92, 4)
	run("lamb-b128", "lamb", 128, 1, 0.89, 8)
	// A second recipe of sgd at one batch gets a row of its own, named by
	// the variation without -b<batch>.
	run("sgd-tuned-b1024", "sgd", 1024, 1, 0.85, 4)
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Variations without sweep.yaml come sorted by name: lamb before sgd.
	for _, want := range []string{
		"## Test accuracy (%) by optimizer and global batch",
		"| optimizer | batch 128 | batch 1024 | state bytes per parameter |",
		"| lamb | 89.00 | — | 8.00 |",
		"| sgd | 91.00 ± 1.41 | 80.00 (-11.00) | 4.00 |",
		"| sgd-tuned | — | 85.00 | 4.00 |",
	} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
		}
	}
	// A compression sweep (one global batch) has no such table.
	other := filepath.Join(t.TempDir(), "compression")
	writeRun(t, other, "dense", classifierSummary("none", 1, 0.9, 1, 1, 2))
	writeRun(t, other, "dgc", classifierSummary("dgc", 1, 0.9, 100, 200, 2))
	if res, err := Report(other, nil); err != nil || strings.Contains(res.Table, "by optimizer") {
		t.Errorf("compression sweep: err %v, table\n%s", err, res.Table)
	}
}

// TestPlotBands: a variation that collapsed to chance (10%) is drawn at the
// axis edge and named as off the axis, the others (90-91%) keep the axis; a
// variation whose only run failed is listed as failed; a sweep without a
// compressed variation has no accuracy-vs-compression plot.
func TestPlotBands(t *testing.T) {
	run := func(variation, compressor string, seed int64, acc float64) *runData {
		s := classifierSummary(compressor, seed, acc, 100, 100, 5)
		return &runData{variation: variation, seed: seed, sum: &s}
	}
	groups := []group{
		{name: "dense", runs: []*runData{run("dense", "none", 1, 0.91), run("dense", "none", 2, 0.90)}},
		{name: "dgc", runs: []*runData{run("dgc", "dgc", 1, 0.905)}},
		{name: "topk", runs: []*runData{run("topk", "topk", 1, 0.10)}},
	}
	failed := []failedRun{{variation: "lgc", seed: 1, reason: "loss is NaN"}, {variation: "dgc", seed: 2, reason: "loss is NaN"}}
	fig, err := plotMetricVsCompression("bands", groups, failed)
	if err != nil || fig == nil {
		t.Fatalf("plot %v, %v", fig, err)
	}
	svg := string(fig.svg)
	for _, want := range []string{"topk: 10.00 @ 100x (off the axis)", "lgc: failed (1 of 1 seeds)", "dgc: 90.50 @ 100x (1 of 2 seeds failed)", "dense: 90.50 ± 0.71 @ 100x"} {
		if !strings.Contains(svg, html.EscapeString(want)) {
			t.Errorf("the plot's legend lacks %q", want)
		}
	}
	if strings.Contains(svg, "dense: 90.50 ± 0.71 @ 100x (off") {
		t.Error("dense marked off the axis")
	}
	// The y axis spans the band (about 89.8 to 91.2 with margins) down to
	// its limit 90.5 - 20 = 70.5, not to 10: ticks 70 to 90, none below.
	if !strings.Contains(svg, ">70<") || !strings.Contains(svg, ">90<") {
		t.Error("the y axis lacks the ticks 70 and 90")
	}
	for _, tick := range []string{">10<", ">20<", ">40<", ">60<"} {
		if strings.Contains(svg, tick) {
			t.Errorf("the y axis reaches down to the collapsed run (tick %s)", tick)
		}
	}
	if fig, err := plotMetricVsCompression("dense only", groups[:1], nil); err != nil || fig != nil {
		t.Errorf("a sweep without compression drew an accuracy-vs-compression plot (%v)", err)
	}
}

func TestResultText(t *testing.T) {
	s := classifierSummary("none", 1, 0.9, 1, 1, 2)
	if got := resultText(&s); got != "test_accuracy 0.9000" {
		t.Errorf("without validation: %q", got)
	}
	s.ValAccuracy = ptr(0.875)
	if got := resultText(&s); got != "test_accuracy 0.9000, val_accuracy 0.8750" {
		t.Errorf("with validation: %q", got)
	}
}

// TestBestCompressedOnValidation: dense has the best validation accuracy
// (91%), so the line also names the best compressed variation: dgc-b (90%,
// above dgc-a's 89%).
func TestBestCompressedOnValidation(t *testing.T) {
	run := func(v, compressor string, val float64) *runData {
		s := classifierSummary(compressor, 1, 0.9, 1, 1, 2)
		s.ValAccuracy = ptr(val)
		return &runData{variation: v, seed: 1, sum: &s}
	}
	groups := []group{
		{name: "dense", runs: []*runData{run("dense", "none", 0.91)}},
		{name: "dgc-a", runs: []*runData{run("dgc-a", "dgc", 0.89)}},
		{name: "dgc-b", runs: []*runData{run("dgc-b", "dgc", 0.90)}},
	}
	md := table("recipes", groups, nil, nil)
	if want := "best on validation: dense (91.00%); best compressed: dgc-b (90.00%)\n"; !strings.Contains(md, want) {
		t.Errorf("table.md lacks %q:\n%s", want, md)
	}
}

// TestLayerParallelHasNoDenseBaseline: a layer-parallel run is not the dense
// baseline of a data-parallel run of the same shape, nor compared with one.
func TestLayerParallelHasNoDenseBaseline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lp")
	lp := classifierSummary("none", 1, 0.80, 1, 1, 2)
	lp.Workers = 2
	lp.LayerParallel = &train.LayerParallelSummary{}
	writeRun(t, dir, "a-layerpar", lp)
	dp := classifierSummary("none", 1, 0.90, 1, 1, 2)
	dp.Workers = 2
	writeRun(t, dir, "b-dataparallel", dp)
	dgc := classifierSummary("dgc", 1, 0.89, 100, 100, 2)
	dgc.Workers = 2
	writeRun(t, dir, "c-dgc", dgc)
	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| a-layerpar | lenet5 | none | 2 | 256 | sgd | 1 | 80.00 |  |",
		"| b-dataparallel | lenet5 | none | 2 | 256 | sgd | 1 | 90.00 | baseline |",
		"| c-dgc | lenet5 | dgc | 2 | 256 | sgd | 1 | 89.00 | -1.00 |"} {
		if !strings.Contains(res.Table, want) {
			t.Errorf("table.md lacks\n%s\n%s", want, res.Table)
		}
	}
}

// TestReportNamesAChangedSweepFile: when the sweep file has gained, lost or
// changed variations since sweep.yaml was written, the report says which, and
// says nothing when the two agree.
func TestReportNamesAChangedSweepFile(t *testing.T) {
	path := tinySweep(t, "")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	writeRun(t, dir, "dense", classifierSummary("none", 1, 0.9, 1, 1, 1))
	report := func(rec Record) string {
		t.Helper()
		b, err := marshalYAML(rec)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, recordFile), string(b))
		var warn strings.Builder
		if _, err := Report(dir, &warn); err != nil {
			t.Fatal(err)
		}
		return warn.String()
	}
	if w := report(s.Record()); strings.Contains(w, "has changed") {
		t.Errorf("warned of a change with sweep.yaml equal to the file: %q", w)
	}
	// The last sweep knew dense at another rate and a variation since
	// removed, and not topk.
	old := s.Record()
	old.Variations = []RecordVariation{old.Variations[0], {Name: "gone", Seeds: []int64{1}, Set: []string{}}}
	old.Variations[0].Set = append(slices.Clone(old.Variations[0].Set), "optim.lr=0.5")
	want := "report: " + s.Record().Source + " has changed since " + filepath.Join(dir, recordFile) + " was written (variations added: topk; removed: gone; changed: dense)"
	if w := report(old); !strings.Contains(w, want) {
		t.Errorf("warnings %q lack %q", w, want)
	}
	old = s.Record()
	old.Set = nil
	if w := report(old); !strings.Contains(w, "(base config or set: changed)") {
		t.Errorf("warnings %q do not name the changed set", w)
	}
	// A sweep file that is there but no longer loads is named, not passed
	// over in silence.
	writeFile(t, path, "base: ../configs/tiny.yaml\nvariation:\n  - name: a\n")
	if w := report(s.Record()); !strings.Contains(w, "report: cannot compare "+filepath.Join(dir, recordFile)+" with the sweep file it names: ") ||
		!strings.Contains(w, `unknown key "variation"`) {
		t.Errorf("warnings %q do not say the sweep file fails to load", w)
	}
}

// TestReportNamesAnEditedBaseConfig: sweep.yaml records the base config's
// path, not its content, so an edit to the base file is found by comparing
// the finished runs' config.yaml with what the sweep file gives them now.
func TestReportNamesAnEditedBaseConfig(t *testing.T) {
	path := tinySweep(t, "")
	results := t.TempDir()
	executeSweep(t, path, results)
	dir := filepath.Join(results, "tiny")
	var warn strings.Builder
	if _, err := Report(dir, &warn); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(warn.String(), "has changed") {
		t.Fatalf("warned of a change before any edit: %q", warn.String())
	}
	base := filepath.Join(filepath.Dir(filepath.Dir(path)), "configs", "tiny.yaml")
	writeFile(t, base, strings.Replace(tinyBase, "batch_size: 8", "batch_size: 16", 1))
	warn.Reset()
	if _, err := Report(dir, &warn); err != nil {
		t.Fatal(err)
	}
	want := "(runs trained with another config than the file gives them now: dense/seed-1 (data.batch_size: 8 in the run, 16 in the sweep), dense/seed-2 (data.batch_size: 8 in the run, 16 in the sweep), topk/seed-1"
	if !strings.Contains(warn.String(), want) {
		t.Errorf("warnings %q lack %q", warn.String(), want)
	}
	// A damaged config.yaml is named with its error; the other runs' drift
	// is still reported.
	bad := filepath.Join(dir, "runs", "topk", "seed-2", "config.yaml")
	writeFile(t, bad, "optim: [not, a, map\n")
	warn.Reset()
	if _, err := Report(dir, &warn); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dense/seed-1 (data.batch_size: 8 in the run, 16 in the sweep)", "; runs whose config.yaml does not load: topk/seed-2 (", bad} {
		if !strings.Contains(warn.String(), want) {
			t.Errorf("warnings %q lack %q", warn.String(), want)
		}
	}
}

// TestTrainLossAxis: runs that take the same steps an epoch are drawn by step
// from their step records; runs at different batches by epoch from their epoch
// records, whose mean losses set the axis.
func TestTrainLossAxis(t *testing.T) {
	run := func(batch, steps int, lossScale float64) *runData {
		s := classifierSummary("none", 1, 0.9, 1, 1, 1)
		s.GlobalBatch, s.Epochs, s.Steps = batch, 2, steps
		r := &runData{sum: &s}
		for e := 1; e <= 2; e++ {
			r.epochs = append(r.epochs, metricRecord{Kind: "epoch", Epoch: e, Step: e * steps / 2, TrainLoss: lossScale / float64(e)})
		}
		for st := 50; st <= steps; st += 50 {
			r.steps = append(r.steps, metricRecord{Kind: "step", Step: st, Loss: 0.5})
		}
		return r
	}
	svgOf := func(groups []group) string {
		t.Helper()
		fig, err := plotTrainLoss("axis", groups, nil)
		if err != nil || fig == nil {
			t.Fatalf("plot %v, %v", fig, err)
		}
		return string(fig.svg)
	}
	mixed := svgOf([]group{
		{name: "b128", runs: []*runData{run(128, 800, 2.4)}},
		{name: "b8192", runs: []*runData{run(8192, 12, 3)}},
	})
	if !strings.Contains(mixed, ">epoch<") || strings.Contains(mixed, "training step") {
		t.Error("runs at two batches were not drawn by epoch")
	}
	// By epoch the highest loss is 3 (b8192's first epoch): the axis reaches
	// 3 x 1.04, so it has the tick 3; by step records it would stop at 0.52.
	if !strings.Contains(mixed, ">3<") {
		t.Error("the epoch axis does not reach the epoch records' losses")
	}
	if strings.Contains(mixed, "leaves the axis") {
		t.Error("a run that learned was marked as leaving the axis")
	}
	// Three runs end at 0.001 and one at 0.04, above twice the finals'
	// median but far below half the first losses' median (2.4/2 = 1.2): it
	// has learned and keeps its place. One that ends at 2.3 has not: it
	// leaves the axis, which the learners' highest loss (3) sets.
	groups := []group{{name: "slow", runs: []*runData{run(8192, 12, 3)}}, {name: "stuck", runs: []*runData{run(1024, 100, 2.4)}}}
	groups[0].runs[0].epochs[1].TrainLoss = 0.04
	groups[1].runs[0].epochs[0].TrainLoss, groups[1].runs[0].epochs[1].TrainLoss = 9, 2.3
	for _, name := range []string{"a", "b", "c"} {
		learner := run(128, 800, 2.4)
		learner.epochs[1].TrainLoss = 0.001
		groups = append(groups, group{name: name, runs: []*runData{learner}})
	}
	withStuck := svgOf(groups)
	if !strings.Contains(withStuck, "stuck (leaves the axis)") || strings.Contains(withStuck, "slow (leaves") {
		t.Error("the stuck run kept its place or the slow learner lost it")
	}
	if strings.Contains(withStuck, ">8<") || !strings.Contains(withStuck, ">3<") {
		t.Error("the axis does not stop at the learners' highest loss")
	}
	// A one-epoch run is a marker (a line of one point draws nothing): its
	// colour (the palette's second, #FF7F0E) is in the plot as well as in
	// the legend.
	oneEpoch := run(128, 400, 2)
	oneEpoch.sum.Epochs, oneEpoch.epochs = 1, oneEpoch.epochs[:1]
	withOne := svgOf([]group{{name: "two", runs: []*runData{run(8192, 12, 3)}}, {name: "one", runs: []*runData{oneEpoch}}})
	if n := strings.Count(withOne, "#FF7F0E"); n < 2 {
		t.Errorf("the one-epoch run's colour appears %d times: not drawn", n)
	}
	// lr2 was cut short after 600 of its 800 steps (summary.json's steps):
	// it still takes 400 steps an epoch, as lr1 does.
	cut := run(128, 800, 3)
	cut.sum.Steps = 600
	same := svgOf([]group{
		{name: "lr1", runs: []*runData{run(128, 800, 2.4)}},
		{name: "lr2", runs: []*runData{cut}},
	})
	if !strings.Contains(same, "training step") || strings.Contains(same, ">epoch<") {
		t.Error("runs at one batch were not drawn by step")
	}
	if strings.Contains(same, ">3<") {
		t.Error("the step axis reached the epoch records' losses")
	}
}

// TestReportMixedKinds: a sweep of classifiers and character models draws its
// metric plots once for each kind, each variation in its colour of the other
// plots; a sweep of one kind has no _char plots and removes older ones.
func TestReportMixedKinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mixed")
	writeRun(t, dir, "lenet", classifierSummary("none", 1, 0.9, 1, 1, 1))
	writeRun(t, dir, "char", train.Summary{Model: "charlstm", Compressor: "none", Workers: 1, GlobalBatch: 32, Optimizer: "adam",
		Seed: 1, Epochs: 2, Steps: 4, TestLoss: 1.7, CompressionRatio: 1, CompressionRatioSteady: 1})
	writeFile(t, filepath.Join(dir, "runs", "gone", "seed-1", failedFile), "diverged\n")
	if _, err := Report(dir, nil); err != nil {
		t.Fatal(err)
	}
	svg := func(file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(file, ".png")+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Without sweep.yaml the variations are sorted by name: lenet is the
	// second and keeps the palette's second colour (#FF7F0E) in the
	// classifiers' plot, which the character models' plot does not use.
	for _, f := range []string{TestMetricPNG, TrainLossPNG} {
		cls, char := svg(f), svg(strings.TrimSuffix(f, ".png")+charSuffix+".png")
		if !strings.Contains(cls, ">lenet<") || strings.Contains(cls, ">char<") || !strings.Contains(cls, "#FF7F0E") {
			t.Errorf("%s: the classifiers' plot does not hold lenet alone in its colour", f)
		}
		if !strings.Contains(char, ">char<") || strings.Contains(char, ">lenet<") || strings.Contains(char, "#FF7F0E") {
			t.Errorf("%s: the character models' plot does not hold char alone", f)
		}
		if !strings.Contains(char, "nats/char") || strings.Contains(cls, "nats/char") {
			t.Errorf("%s: the loss units are not per character in the character models' plot alone", f)
		}
		if !strings.Contains(cls, "gone: failed") || strings.Contains(char, "gone") {
			t.Errorf("%s: a variation with no finished run is not listed once, with the classifiers", f)
		}
	}
	// One kind: the _char files of an earlier report go.
	if err := os.RemoveAll(filepath.Join(dir, "runs", "char")); err != nil {
		t.Fatal(err)
	}
	if _, err := Report(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"test_metric_char.png", "train_loss_char.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s is left from the mixed report (%v)", f, err)
		}
	}
}

// TestBatchGridFailedColumn: a batch at which every run failed keeps its
// column (and a row whose every run failed its row), and a sweep of one
// optimizer over several batches gets the table too.
func TestBatchGridFailedColumn(t *testing.T) {
	run := func(variation string, batch int, acc float64) group {
		s := classifierSummary("none", 1, acc, 1, 1, 2)
		s.GlobalBatch, s.OptimizerStateBytesPerParam = batch, 4
		return group{name: variation, runs: []*runData{{variation: variation, seed: 1, sum: &s}}}
	}
	// -b<batch> inside a name: the row is the name without it.
	groups := []group{run("sgd-b128-linear", 128, 0.9396), run("sgd-b1024-linear", 1024, 0.9310)}
	failed := []failedRun{
		{variation: "sgd-b8192-linear", seed: 1, optimizer: "sgd", globalBatch: 8192},
		{variation: "lars-b8192", seed: 1, optimizer: "lars", globalBatch: 8192},
		{variation: "unreadable", seed: 1}, // its config did not load: in no cell
	}
	table := optimizerBatchPivot(groups, []metric{accuracyMetric}, failed)
	for _, want := range []string{
		"| optimizer | batch 128 | batch 1024 | batch 8192 | state bytes per parameter |",
		"| sgd-linear | 93.96 | 93.10 (-0.86) | failed | 4.00 |",
		"| lars | — | — | failed | — |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks\n%s\n%s", want, table)
		}
	}
	// Failed runs alone do not make a second batch.
	if got := optimizerBatchPivot(groups[:1], []metric{accuracyMetric}, failed[2:]); got != "" {
		t.Errorf("one batch: %s", got)
	}
}

// TestPlotMetricVsBatch checks the large-batch plot's legend: each cell's
// figure, a failed batch, a value off the band, and a row that failed
// everywhere; and that a sweep of one batch has no such plot.
func TestPlotMetricVsBatch(t *testing.T) {
	run := func(variation, opt string, batch int, seed int64, acc float64) *runData {
		s := classifierSummary("none", seed, acc, 1, 1, 2)
		s.Optimizer, s.GlobalBatch = opt, batch
		return &runData{variation: variation, seed: seed, sum: &s}
	}
	groups := []group{
		{name: "lamb-b128", runs: []*runData{run("lamb-b128", "lamb", 128, 1, 0.938), run("lamb-b128", "lamb", 128, 2, 0.936)}},
		{name: "lamb-b8192", runs: []*runData{run("lamb-b8192", "lamb", 8192, 1, 0.925)}},
		{name: "sgd-b128", runs: []*runData{run("sgd-b128", "sgd", 128, 1, 0.938)}},
		{name: "sgd-b1024", runs: []*runData{run("sgd-b1024", "sgd", 1024, 1, 0.10)}},
	}
	failed := []failedRun{
		{variation: "sgd-b8192", seed: 1, optimizer: "sgd", globalBatch: 8192},
		{variation: "lamb-b8192", seed: 2, optimizer: "lamb", globalBatch: 8192},
		{variation: "novograd-b8192", seed: 1, optimizer: "novograd", globalBatch: 8192},
	}
	fig, err := plotMetricVsBatch("lb", groups, failed)
	if err != nil || fig == nil {
		t.Fatalf("plot %v, %v", fig, err)
	}
	svg := string(fig.svg)
	for _, want := range []string{
		"lamb: 128: 93.70 ± 0.14, 8192: 92.50 (a seed failed)",
		"sgd: 128: 93.80, 1024: 10.00 (off the axis), 8192: failed",
		"novograd: 8192: failed",
		"below the dashed line: failed runs and values off the axis",
	} {
		if !strings.Contains(svg, html.EscapeString(want)) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	// The failed batches are marked on the plot: sgd's and novograd's at 8192.
	if n := strings.Count(svg, ">failed</text>"); n != 2 {
		t.Errorf("%d failed marks on the plot, want 2", n)
	}
	for _, tick := range []string{">128</text>", ">1024</text>", ">8192</text>"} { // the batches label the axis
		if !strings.Contains(svg, tick) {
			t.Errorf("the plot's axis lacks %q", tick)
		}
	}
	if fig, err := plotMetricVsBatch("one", groups[:1], nil); fig != nil || err != nil {
		t.Errorf("one batch: %v, %v", fig, err)
	}
}
