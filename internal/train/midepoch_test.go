package train

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
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
		out = append(out, m)
	}
	return out
}

// TestInterruptedMidEpochResumesExactly stops runs inside an epoch (a context
// ending, as Ctrl-C does), resumes them and compares everything with an
// uninterrupted run: summary, metrics, parameters, BatchNorm buffers, optimizer
// and compressor state. The stop points fall inside the first and the second
// epoch, with DGC and PowerSGD state, and with two replicas of a BatchNorm net.
func TestInterruptedMidEpochResumesExactly(t *testing.T) {
	type tcase struct {
		name  string
		model string
		stops []int // stop before these steps (counted from each start)
		sets  []string
	}
	cases := []tcase{
		{"mlp-sgd", "mlp", []int{8, 20}, []string{"model.hidden=32"}},
		{"mlp-dgc", "mlp", []int{7, 9}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=dgc",
			"compress.density=0.01", "compress.dgc.warmup_epochs=1"}},
		{"mlp-powersgd", "mlp", []int{20}, []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=powersgd",
			"compress.powersgd.start_iter=10"}},
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
			got := runCfg(t, cfg, cut, true)
			if !reflect.DeepEqual(comparable(want), comparable(got)) {
				t.Fatalf("resumed run differs:\n%+v\n%+v", comparable(want), comparable(got))
			}
			if a, b := metricLines(t, full), metricLines(t, cut); !reflect.DeepEqual(a, b) {
				t.Fatalf("metrics.jsonl differs after resume:\n%v\n%v", a, b)
			}
			a, err := loadCheckpoint(latestPath(t, full), cfgLayout(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			b, err := loadCheckpoint(latestPath(t, cut), cfgLayout(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Params, b.Params) || !reflect.DeepEqual(a.Buffers, b.Buffers) || !reflect.DeepEqual(a.Optim, b.Optim) ||
				!reflect.DeepEqual(a.Workers, b.Workers) {
				t.Fatal("resumed run ends with different parameters, buffers, optimizer or compressor state")
			}
		})
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
