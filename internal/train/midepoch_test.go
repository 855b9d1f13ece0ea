package train

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gradwire/gradwire/configs"
)

// stopAfter is a context that ends after its Err has been asked n times: the
// run loop asks once a step, so it stops before step n+1, as Ctrl-C would.
type stopAfter struct {
	context.Context
	n atomic.Int64
}

func newStopAfter(n int) *stopAfter {
	c := &stopAfter{Context: context.Background()}
	c.n.Store(int64(n))
	return c
}

func (c *stopAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// metricLines reads metrics.jsonl with the fields that measure time removed.
func metricLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("metrics.jsonl line %d: %v (%q)", len(out)+1, err, sc.Text())
		}
		delete(m, "seconds")
		delete(m, "samples_per_second")
		delete(m, "eval_seconds")
		out = append(out, m)
	}
	return out
}

// TestInterruptedMidEpochResumesExactly stops runs inside an epoch (a context
// ending, as Ctrl-C does), resumes them and compares everything with an
// uninterrupted run: summary, metrics, parameters, BatchNorm buffers, optimizer
// and compressor state. The stop points fall inside the first and the second
// epoch, with DGC, PowerSGD and GradiVeQ state, and with two replicas of a
// BatchNorm net.
func TestInterruptedMidEpochResumesExactly(t *testing.T) {
	type tcase struct {
		name  string
		model string
		stops []int // stop before these steps (counted from each start)
		sets  []string
	}
	cases := []tcase{
		{"mlp-sgd", "mlp", []int{8, 20}, []string{"model.hidden=32"}},
		{"mlp-validation", "mlp", []int{8, 20}, []string{"model.hidden=32", "data.validation=64"}},
		{"mlp-dgc", "mlp", []int{7, 9}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=dgc",
			"compress.density=0.01", "compress.dgc.warmup_epochs=1"}},
		{"mlp-dgc-decay-at-optimizer", "mlp", []int{7, 9}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=dgc",
			"compress.density=0.01", "compress.dgc.warmup_epochs=1", "compress.dgc.weight_decay_at=optimizer"}},
		{"mlp-powersgd", "mlp", []int{20}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=powersgd",
			"compress.powersgd.start_iter=10"}},
		// Fused replicas: stops before and after the sampled step 25.
		{"mlp-powersgd-fused", "mlp", []int{20, 27}, []string{"model.hidden=32", "dist.workers=4", "dist.replicas=2", "data.batch_size=4",
			"compress.name=powersgd", "compress.powersgd.start_iter=10"}},
		// GradiVeQ: steps 0-1 warm-up, then cycles of 3 sampled and 4
		// compressed steps (2-4, 5-8, 9-11, 12-15, 16-18, ...): the runs stop
		// after step 3 (2 of 3 samples taken), step 6 (inside a compressed
		// phase) and step 17 (2 samples of the phase across the first epoch
		// end). Its state inside a sampling phase, the float64 PCA sums of 392
		// slices of 64, is 81,505 values: beyond twice the 25,450 parameters.
		{"mlp-gradiveq", "mlp", []int{8, 7, 15}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=gradiveq",
			"compress.gradiveq.slice_size=64", "compress.gradiveq.warmup_steps=2", "compress.gradiveq.sample_steps=3",
			"compress.gradiveq.compress_steps=4"}},
		{"resnet20-2replicas", "resnet20", []int{7}, []string{"train.max_steps=4", "train.eval_limit=16", "data.eval_batch_size=8",
			"data.batch_size=4", "dist.workers=2", "dist.replicas=2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig(t, tc.model, tc.sets...)
			full, cut := t.TempDir(), t.TempDir()
			want := runCfg(t, cfg, full, false)
			resume := false
			for _, n := range tc.stops {
				_, err := Run(newStopAfter(n), cfg, Options{OutDir: cut, Resume: resume})
				var stopped *Interrupted
				if !errors.As(err, &stopped) || stopped.Checkpoint == "" || !errors.Is(err, context.Canceled) {
					t.Fatalf("stop before step %d: %v, want an Interrupted error with a checkpoint", n, err)
				}
				resume = true
			}
			sameRun(t, cfg, full, cut, want, runCfg(t, cfg, cut, true))
		})
	}
}

// loadNewest loads the newest checkpoint of the run in dir.
func loadNewest(t *testing.T, cfg configs.Config, dir string) *checkpoint {
	t.Helper()
	c, err := loadCheckpoint(latestPath(t, dir), cfgLayout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sameRun fails the test unless the runs in dirs a and b (summaries want and
// got) ended alike: the summary but for time, every metrics.jsonl record but
// for time, and the newest checkpoint's parameters, buffers, optimizer and
// compressor state.
func sameRun(t *testing.T, cfg configs.Config, a, b string, want, got *Summary) {
	t.Helper()
	if !reflect.DeepEqual(comparable(want), comparable(got)) {
		t.Fatalf("the runs differ:\n%+v\n%+v", comparable(want), comparable(got))
	}
	if ma, mb := metricLines(t, a), metricLines(t, b); !reflect.DeepEqual(ma, mb) {
		t.Fatalf("metrics.jsonl differs:\n%v\n%v", ma, mb)
	}
	ca, cb := loadNewest(t, cfg, a), loadNewest(t, cfg, b)
	if !reflect.DeepEqual(ca.Params, cb.Params) || !reflect.DeepEqual(ca.Buffers, cb.Buffers) || !reflect.DeepEqual(ca.Optim, cb.Optim) ||
		!reflect.DeepEqual(ca.Workers, cb.Workers) {
		t.Fatal("the runs end with different parameters, buffers, optimizer or compressor state")
	}
}

// TestCheckpointEveryKeepsTheNewest checks mid-epoch checkpoints by step count
// and the pruning to train.keep_checkpoints plus the best epoch's.
func TestCheckpointEveryKeepsTheNewest(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.checkpoint_every=5", "train.keep_checkpoints=2", "train.epochs=2")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	names, err := filepath.Glob(filepath.Join(dir, "checkpoints", "*.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	// 16 steps an epoch, 32 in all: checkpoints at 5, 10, 15, 16 (epoch end), 21,
	// 26, 31, 32; the newest two are 31 and 32, plus the better epoch end (16 or 32).
	if len(names) < 2 || len(names) > 3 || !strings.HasSuffix(names[len(names)-1], filepath.Base(checkpointPath(dir, 32))) {
		t.Fatalf("checkpoints kept: %v", names)
	}
}

// TestResumeRefusesChangedRun edits config.yaml-level keys and the data between
// a run and its resume: each change that alters the maths is refused naming the
// key, unless allowed; keys that do not (logging) pass.
func TestResumeRefusesChangedRun(t *testing.T) {
	base := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=2")
	dir := t.TempDir()
	if _, err := Run(newStopAfter(10), base, Options{OutDir: dir}); err == nil {
		t.Fatal("the stopped run did not stop")
	}
	edits := map[string]func(c *configs.Config){
		"data.batch_size": func(c *configs.Config) { c.Data.BatchSize = 8 },
		"seed":            func(c *configs.Config) { c.Seed = 7 },
		"optim.lr":        func(c *configs.Config) { c.Optim.LR = 0.5 },
		"schedule.name":   func(c *configs.Config) { c.Schedule.Name = "constant" },
		"train.max_steps": func(c *configs.Config) { c.Train.MaxSteps = 3 },
		"data.validation": func(c *configs.Config) { c.Data.Validation = 32 },
	}
	for key, edit := range edits {
		cfg := base
		edit(&cfg)
		_, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: true})
		if err == nil || !strings.Contains(err.Error(), key+" (checkpoint ") || !strings.Contains(err.Error(), "--allow-change") {
			t.Errorf("resume with %s changed: %v, want a refusal naming it", key, err)
		}
	}
	// Replaced training data (another file of the same shape) is refused too.
	labels := filepath.Join(base.Data.Dir, "fashion-mnist", "train-labels-idx1-ubyte.gz")
	raw, err := os.ReadFile(labels)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	plain[len(plain)-1] = (plain[len(plain)-1] + 1) % 10 // one label changes
	if err := os.WriteFile(strings.TrimSuffix(labels, ".gz"), plain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(labels); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), base, Options{OutDir: dir, Resume: true})
	if err == nil || !strings.Contains(err.Error(), "data (the files in") {
		t.Fatalf("resume on replaced data: %v, want a refusal naming the data", err)
	}
	if err := os.WriteFile(labels, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(strings.TrimSuffix(labels, ".gz")); err != nil {
		t.Fatal(err)
	}
	// An allowed change and an outcome-free one go through.
	cfg := base
	cfg.Optim.LR, cfg.Train.LogEvery = 0.04, 3
	if _, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: true, AllowChange: []string{"optim.lr"}}); err != nil {
		t.Fatalf("resume with an allowed lr change: %v", err)
	}
}

// TestFreshRunIntoAFinishedRun: --out into a finished run is refused; with
// Overwrite the old run's checkpoints are gone and a resume continues the new
// run, whose metrics start clean.
func TestFreshRunIntoAFinishedRun(t *testing.T) {
	long := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=3")
	dir := t.TempDir()
	runCfg(t, long, dir, false)
	short := long
	short.Train.Epochs, short.Seed = 1, 5
	if _, err := Run(context.Background(), short, Options{OutDir: dir}); err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("fresh run into a finished run: %v", err)
	}
	if _, err := Run(newStopAfter(6), short, Options{OutDir: dir, Overwrite: true}); err == nil {
		t.Fatal("the stopped run did not stop")
	}
	got := runCfg(t, short, dir, true)
	want := runCfg(t, short, t.TempDir(), false)
	if !reflect.DeepEqual(comparable(want), comparable(got)) {
		t.Fatalf("overwritten then resumed run differs from a clean one:\n%+v\n%+v", comparable(want), comparable(got))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || bytes.IndexByte(raw, 0) >= 0 || !bytes.HasPrefix(raw, []byte(`{"kind":`)) {
		t.Fatalf("metrics.jsonl after overwrite and resume: %q... (%v)", raw[:min(len(raw), 40)], err)
	}
}

// TestDivergenceStopsTheRun: an exploding training loss names epoch, step,
// worker and value; no checkpoint is written past the last good one.
func TestDivergenceStopsTheRun(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=32", "optim.lr=10000", "dist.workers=2", "data.batch_size=8", "train.checkpoint_every=1")
	dir := t.TempDir()
	_, err := Run(context.Background(), cfg, Options{OutDir: dir})
	if err == nil || !strings.Contains(err.Error(), "diverged") || !strings.Contains(err.Error(), "epoch 1 step") ||
		!strings.Contains(err.Error(), "worker") {
		t.Fatalf("lr 1e4: %v, want a divergence error naming epoch, step and worker", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Error("a diverged run wrote summary.json")
	}
	c := loadNewest(t, cfg, dir)
	for _, v := range c.Params {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("the resume point (step %d) holds non-finite parameters", c.GlobalStep)
		}
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("step %d", c.GlobalStep)) {
		t.Errorf("error %v does not name the resume point, step %d", err, c.GlobalStep)
	}
}

// TestStaleTempsRemovedAtStart: a temporary file a killed write left is removed
// when the run starts.
func TestStaleTempsRemovedAtStart(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=1")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	stale := filepath.Join(dir, "checkpoints", ".step-00000099.ckpt.tmp12345")
	if err := os.WriteFile(stale, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Epochs = 2
	if _, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: true, AllowChange: []string{"train.epochs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("the stale temporary file is still there")
	}
}

// TestResumeRefusesShortenedMetrics: a metrics.jsonl cut below the size the
// checkpoint recorded is refused instead of padded with NUL bytes.
func TestResumeRefusesShortenedMetrics(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=2")
	dir := t.TempDir()
	if _, err := Run(newStopAfter(25), cfg, Options{OutDir: dir}); err == nil {
		t.Fatal("the stopped run did not stop")
	}
	path := filepath.Join(dir, "metrics.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: true})
	if err == nil || !strings.Contains(err.Error(), "fewer than the") {
		t.Fatalf("resume over a cut metrics.jsonl: %v", err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != "{}\n" {
		t.Fatalf("the refused resume changed metrics.jsonl: %q", raw)
	}
}

// TestCheckpointSchedule checks when control asks for a mid-epoch checkpoint:
// after train.checkpoint_every steps, after train.checkpoint_minutes, never
// before a step was taken, and not with checkpoints off.
func TestCheckpointSchedule(t *testing.T) {
	cfg := smallConfig(t, "mlp", "train.checkpoint_every=5", "train.checkpoint_minutes=0.5")
	j := &job{cfg: cfg, rank0: true, lastCkptStep: 10, lastCkptTime: time.Now()}
	for _, tc := range []struct {
		step  int
		moved bool
		age   time.Duration
		due   bool
	}{
		{14, true, 0, false},
		{15, true, 0, true},
		{15, false, 0, false}, // the step the run (re)started at
		{12, true, 29 * time.Second, false},
		{12, true, 31 * time.Second, true},
	} {
		j.lastCkptTime = time.Now().Add(-tc.age)
		stop, due, err := j.control(context.Background(), tc.step, tc.moved)
		if err != nil || stop || due != tc.due {
			t.Errorf("step %d moved %v age %v: stop %v due %v (%v), want due %v", tc.step, tc.moved, tc.age, stop, due, err, tc.due)
		}
	}
	j.cfg.Train.Checkpoint = false
	if _, due, _ := j.control(context.Background(), 100, true); due {
		t.Error("a checkpoint is due with train.checkpoint false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if stop, _, _ := j.control(ctx, 11, true); !stop {
		t.Error("an ended context does not stop the run")
	}
}

// TestConfigChangesNewKey: a checkpoint written before a key existed resumes
// while the key holds its default, and is refused when it does not.
func TestConfigChangesNewKey(t *testing.T) {
	defaults := configs.Flat(configs.Default())
	now := maps.Clone(defaults)
	old := maps.Clone(defaults)
	delete(old, "compress.gradiveq.quantize_bits")
	if got := configChanges(old, now, defaults, nil); len(got) != 0 {
		t.Errorf("a key at its default that the checkpoint lacks: %q, want no change", got)
	}
	now["compress.gradiveq.quantize_bits"] = "4"
	got := configChanges(old, now, defaults, nil)
	if len(got) != 1 || !strings.Contains(got[0], "compress.gradiveq.quantize_bits (checkpoint (not set") {
		t.Errorf("a new key off its default: %q, want it named", got)
	}
	if got := configChanges(old, now, defaults, map[string]bool{"compress.gradiveq.quantize_bits": true}); len(got) != 0 {
		t.Errorf("allowed: %q", got)
	}
	now["optim.lr"] = "0.5"
	if got := configChanges(defaults, now, defaults, nil); len(got) != 2 {
		t.Errorf("two changed keys: %q", got)
	}
}

// TestDivergenceJudgesTheTestLossByFiniteness: a finite test loss far above the
// bound (BatchNorm's running statistics lagging a spike) lets the run go on; a
// NaN or infinite one stops it, naming the epoch, step and value. A step's
// training loss stops it above the bound or when not finite.
func TestDivergenceJudgesTheTestLossByFiniteness(t *testing.T) {
	d := newDivergence(0, 10, nil, func() int { return 6 })
	at := position{epoch: 1, globalStep: 6}
	if err := d.afterEpoch(&epochDone{pos: at, eval: &evalResult{loss: 3.6e7, examples: 10000}}); err != nil {
		t.Errorf("test loss 3.6e7 (bound %.4g): %v, want the run to go on", d.max, err)
	}
	for _, loss := range []float64{math.NaN(), math.Inf(1)} {
		err := d.afterEpoch(&epochDone{pos: at, eval: &evalResult{loss: loss, examples: 10000}})
		if err == nil || !strings.Contains(err.Error(), "diverged") || !strings.Contains(err.Error(), "epoch 1 (step 6)") ||
			!strings.Contains(err.Error(), "not finite") || !strings.Contains(err.Error(), "step 6) stays the resume point") {
			t.Errorf("test loss %v: %v, want a divergence naming epoch, step and the resume point", loss, err)
		}
	}
	if err := d.afterEpoch(&epochDone{pos: at}); err != nil {
		t.Errorf("a rank without an evaluation: %v", err)
	}
	// A step's training loss: above the bound (230.26 for 10 classes) or not finite.
	for loss, want := range map[float64]string{230: "", 231: "is above 230.3 = 100 x ln(10 classes)",
		math.Inf(1): "is not finite", math.NaN(): "is not finite"} {
		if got := d.exceeded(loss); got != (want != "") {
			t.Errorf("step loss %v: exceeded %v, want %v", loss, got, want != "")
		} else if got && !strings.Contains(d.why(loss), want) {
			t.Errorf("step loss %v: %q, want %q", loss, d.why(loss), want)
		}
	}
}
