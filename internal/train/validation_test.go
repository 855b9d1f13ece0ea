package train

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/models"
)

// setupJob builds a run of cfg up to its first step (data, split, model).
func setupJob(t *testing.T, cfg configs.Config) *job {
	t.Helper()
	j := &job{cfg: cfg, opts: Options{OutDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(j.close)
	if err := j.setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestValidationSplitSameForEveryRun: data.validation=64 of the fake set's
// 256 training examples holds out the same 64 examples whatever the seed,
// workers or batch size; the training set is the other 192, disjoint from
// them, and the epoch is shorter accordingly.
func TestValidationSplitSameForEveryRun(t *testing.T) {
	var first []int
	for _, sets := range [][]string{
		{"seed=1"},
		{"seed=7"},
		{"seed=3", "dist.workers=2", "data.batch_size=8"},
		{"seed=1", "dist.workers=4", "data.batch_size=4", "dist.replicas=2"},
	} {
		cfg := smallConfig(t, "mlp", append([]string{"model.hidden=8", "data.validation=64"}, sets...)...)
		j := setupJob(t, cfg)
		train, val := j.train.(*data.Subset).Indices(), j.val.(*data.Subset).Indices()
		if len(val) != 64 || len(train) != 192 || j.train.Len() != 192 || j.val.Len() != 64 {
			t.Fatalf("%v: %d training and %d validation examples, want 192 and 64", sets, len(train), len(val))
		}
		if want := 192 / j.globalBatch; j.stepsPerEpoch != want {
			t.Errorf("%v: %d steps an epoch, want %d (192 examples / global batch %d)", sets, j.stepsPerEpoch, want, j.globalBatch)
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(train), val...)))
		for i, v := range all {
			if v != i {
				t.Fatalf("%v: training and validation examples are not 0..255 once each (sorted[%d] = %d)", sets, i, v)
			}
		}
		if first == nil {
			first = val
		} else if !slices.Equal(val, first) {
			t.Errorf("%v: held out %v, the first run held out %v", sets, val, first)
		}
	}
	// Off: the whole training split, no validation split.
	j := setupJob(t, smallConfig(t, "mlp", "model.hidden=8"))
	if j.val != nil || j.train.Len() != 256 {
		t.Errorf("data.validation 0: validation split %v, %d training examples (want none and 256)", j.val, j.train.Len())
	}
}

// TestValidationMetrics: with data.validation on, every epoch record and
// summary.json hold val_loss and val_accuracy, and the final ones equal an
// evaluation of the final parameters, done here without the run's code, on
// the held-out examples read from the files (one example at a time, the loss
// a float64 log-softmax of the logits). Without it the fields are absent.
func TestValidationMetrics(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=16", "data.validation=64", "train.epochs=2")
	dir := t.TempDir()
	sum := runCfg(t, cfg, dir, false)
	if sum.ValLoss == nil || sum.ValAccuracy == nil {
		t.Fatalf("summary without validation figures: %+v", sum)
	}
	var epochs []map[string]any
	for _, m := range metricLines(t, dir) {
		if m["kind"] == "epoch" {
			epochs = append(epochs, m)
		}
	}
	if len(epochs) != 2 {
		t.Fatalf("%d epoch records, want 2", len(epochs))
	}
	for _, e := range epochs {
		if _, ok := e["val_loss"].(float64); !ok {
			t.Errorf("epoch record without val_loss: %v", e)
		}
		if _, ok := e["val_accuracy"].(float64); !ok {
			t.Errorf("epoch record without val_accuracy: %v", e)
		}
	}
	if epochs[1]["val_loss"] != *sum.ValLoss || epochs[1]["val_accuracy"] != *sum.ValAccuracy {
		t.Errorf("summary val_loss %v val_accuracy %v, last epoch's %v %v", *sum.ValLoss, *sum.ValAccuracy,
			epochs[1]["val_loss"], epochs[1]["val_accuracy"])
	}

	// The independent evaluation.
	full, err := data.Open(data.Options{Name: cfg.Data.Name, Dir: cfg.Data.Dir, Normalize: cfg.Data.Normalize}, "train")
	if err != nil {
		t.Fatal(err)
	}
	_, valIdx, err := data.HoldOut(full.Len(), 64)
	if err != nil {
		t.Fatal(err)
	}
	in := models.Input{Shape: full.XShape(), Classes: full.Classes(), YLen: 1}
	net, err := models.New(cfg.Model, in, cfg.WorkerBatch(), 1, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	copy(net.Flat(), loadNewest(t, cfg, dir).Params)
	x, y := make([]float32, 28*28), make([]int32, 1)
	logits := make([]float32, in.Classes)
	var lossSum float64
	correct := 0
	for _, i := range valIdx {
		full.Fill([]int{i}, x, y)
		if err := net.Predict(x, logits); err != nil {
			t.Fatal(err)
		}
		var m float64 = math.Inf(-1)
		best := 0
		for c, v := range logits {
			m = math.Max(m, float64(v))
			if v > logits[best] {
				best = c
			}
		}
		var z float64
		for _, v := range logits {
			z += math.Exp(float64(v) - m)
		}
		lossSum += m + math.Log(z) - float64(logits[y[0]])
		if best == int(y[0]) {
			correct++
		}
	}
	wantLoss, wantAcc := lossSum/64, float64(correct)/64
	// The run evaluates in batches of 256 (the GEMM rounds differently from
	// one example at a time): float32 rounding, far below the difference of
	// another set of examples.
	if d := math.Abs(*sum.ValLoss-wantLoss) / wantLoss; d > 1e-5 || *sum.ValAccuracy != wantAcc {
		t.Errorf("val_loss %v val_accuracy %v, the held-out examples evaluated here give %v %v", *sum.ValLoss, *sum.ValAccuracy, wantLoss, wantAcc)
	}
	t.Logf("val_loss %.6f (here %.6f), val_accuracy %.4f, test_loss %.6f", *sum.ValLoss, wantLoss, wantAcc, sum.TestLoss)

	// Off: summary.json and the epoch records have no validation fields.
	off := smallConfig(t, "mlp", "model.hidden=16", "train.epochs=1")
	offDir := t.TempDir()
	runCfg(t, off, offDir, false)
	raw, err := os.ReadFile(filepath.Join(offDir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, rec := range append(metricLines(t, offDir), m) {
		if _, ok := rec["val_loss"]; ok {
			t.Errorf("validation off, yet val_loss in %v", rec)
		}
		if _, ok := rec["val_accuracy"]; ok {
			t.Errorf("validation off, yet val_accuracy in %v", rec)
		}
	}
}

// TestValidationRefused: a validation split of the whole training split or
// more is refused at the start naming the key, the value and the size; one
// that leaves less than a global batch is refused naming the batch and the
// held-out count.
func TestValidationRefused(t *testing.T) {
	for _, k := range []string{"256", "300"} {
		cfg := smallConfig(t, "mlp", "model.hidden=8", "data.validation="+k)
		_, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir()})
		want := "data.validation: " + k + ": must be below the 256 examples of the fashion-mnist training split"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("data.validation=%s: error %v, want %q", k, err, want)
		}
	}
	cfg := smallConfig(t, "mlp", "model.hidden=8", "data.validation=250")
	_, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "larger than the 6 training examples (after data.validation held 250 out)") {
		t.Errorf("data.validation=250 with a global batch of 16: error %v", err)
	}
}

// TestFingerprintNamesValidation: the ranks compare data.validation at start,
// so ranks with different splits cannot train one job.
func TestFingerprintNamesValidation(t *testing.T) {
	j := &job{cfg: configs.Default()}
	j.cfg.Data.Validation = 5000
	if got := j.runFingerprint()["data.validation"]; got != "5000" {
		t.Errorf("fingerprint data.validation %q, want 5000", got)
	}
	if !configs.ChangesOutcome("data.validation") {
		t.Error("data.validation does not count as changing the run's outcome")
	}
}
