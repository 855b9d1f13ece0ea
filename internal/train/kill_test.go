package train

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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
	sameRun(t, cfg, full, cut, want, got)
	t.Logf("%d kills, then the resumed run matched the uninterrupted one", kills)
}

// TestDiskFullDuringRun runs training into a small tmpfs that has room for one
// checkpoint but not two: the run stops with an error naming the checkpoint and
// the full disk, leaves no temporary file, and once space is freed the resumed
// run ends as an uninterrupted one.
func TestDiskFullDuringRun(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=32", "train.checkpoint_every=5", "train.keep_checkpoints=1")
	full := t.TempDir()
	want := runCfg(t, cfg, full, false)
	ckpt, err := os.Stat(latestPath(t, full))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (%v): TestCheckpointDiskFull injects the failure instead", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	// Leave room for about 1.5 checkpoints (config and metrics are a few kB),
	// besides the initial parameters (init.ckpt).
	initial, err := os.Stat(filepath.Join(full, InitFile))
	if err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-ckpt.Size()*3/2-initial.Size()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	_, err = Run(context.Background(), cfg, Options{OutDir: run})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), filepath.Join(run, "checkpoints")) {
		t.Fatalf("run on a full disk: %v, want a no-space error naming the checkpoint", err)
	}
	temps, _ := filepath.Glob(filepath.Join(run, "checkpoints", ".*"))
	if len(temps) > 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
	t.Logf("stopped by the full disk at %s: %v", filepath.Base(latestPath(t, run)), err) // one checkpoint fitted
	os.Remove(filler)
	sameRun(t, cfg, full, run, want, runCfg(t, cfg, run, true))
}

func hasRunFiles(dir string) bool {
	for _, name := range runFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
