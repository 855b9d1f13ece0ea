package train

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestKilledTrainingResumesExactly kills a training process with SIGKILL at
// random moments (inside steps, checkpoint writes, metrics writes, set-up),
// again and again, continuing the run each time, and checks that the finished
// run equals an uninterrupted one: summary, metrics and final checkpoint.
func TestKilledTrainingResumesExactly(t *testing.T) {
	if os.Getenv("GRADWIRE_TEST_TRAIN_CHILD") != "" {
		cfg, err := configs.Load("", strings.Split(os.Getenv("GRADWIRE_TEST_SETS"), "\n"))
		if err != nil {
			t.Fatal(err)
		}
		dir := os.Getenv("GRADWIRE_TEST_DIR")
		_, err = Run(context.Background(), cfg, Options{OutDir: dir, Resume: os.Getenv("GRADWIRE_TEST_RESUME") == "1"})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	sets := []string{"data.dir=" + root, "model.name=mlp", "model.hidden=32", "data.batch_size=8", "dist.workers=2",
		"train.epochs=30", "train.progress=false", "train.log_every=3", "optim.lr=0.05",
		"compress.name=dgc", "compress.density=0.05", "compress.dgc.warmup_epochs=1",
		"train.checkpoint_every=2", "train.keep_checkpoints=2"}
	cfg, err := configs.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	full, cut := t.TempDir(), filepath.Join(t.TempDir(), "run")
	want := runCfg(t, cfg, full, false)

	rng := rand.New(rand.NewPCG(7, 7))
	kills := 0
	for i := 0; i < 25; i++ {
		resume := hasRunFiles(cut)
		child := exec.Command(os.Args[0], "-test.run", "^TestKilledTrainingResumesExactly$")
		child.Env = append(os.Environ(), "GRADWIRE_TEST_TRAIN_CHILD=1", "GRADWIRE_TEST_DIR="+cut,
			"GRADWIRE_TEST_SETS="+strings.Join(sets, "\n"), "GRADWIRE_TEST_RESUME="+map[bool]string{true: "1", false: "0"}[resume])
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(10+rng.IntN(200)) * time.Millisecond)
		child.Process.Signal(syscall.SIGKILL)
		if err := child.Wait(); err == nil {
			break // it finished before the kill
		}
		kills++
	}
	if kills < 5 {
		t.Fatalf("only %d kills landed before the run finished: the test did not test", kills)
	}
	got, err := Run(context.Background(), cfg, Options{OutDir: cut, Resume: hasRunFiles(cut)})
	if err != nil {
		t.Fatalf("after %d kills: %v", kills, err)
	}
	if !reflect.DeepEqual(comparable(want), comparable(got)) {
		t.Fatalf("after %d kills the run differs:\n%+v\n%+v", kills, comparable(want), comparable(got))
	}
	if a, b := metricLines(t, full), metricLines(t, cut); !reflect.DeepEqual(a, b) {
		t.Fatalf("after %d kills metrics.jsonl differs:\n%v\n%v", kills, a, b)
	}
	a, err := loadCheckpoint(latestPath(t, full), cfgLayout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadCheckpoint(latestPath(t, cut), cfgLayout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Params, b.Params) || !reflect.DeepEqual(a.Optim, b.Optim) || !reflect.DeepEqual(a.Workers, b.Workers) {
		t.Fatalf("after %d kills the final state differs", kills)
	}
	t.Logf("%d kills, then the resumed run matched the uninterrupted one", kills)
}

func hasRunFiles(dir string) bool {
	for _, name := range runFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
