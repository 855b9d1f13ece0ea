package train

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killLayout is big enough (about 3 MB a checkpoint) that writing one takes a
// while, so that kills land inside writes.
func killLayout() layout {
	return newLayout("mlp", []tensorSize{{"fc.w", 1 << 18}, {"fc.b", 16}}, []tensorSize{{"bn.running_mean", 16}}, 2)
}

// killLoss is epoch e's made-up test loss: it jumps around, so the best
// checkpoint is sometimes old and sometimes new.
func killLoss(e int) float64 { return float64((e * 7919) % 101) }

// killCheckpoint is the epoch-end checkpoint of step (= epoch) step: every
// value derives from the step, so a checkpoint torn between two writes or
// mixed from two shows.
func killCheckpoint(l layout, step int) *checkpoint {
	c := &checkpoint{Model: l.model, Epoch: step, GlobalStep: step}
	for e := 1; e <= step; e++ {
		c.Epochs = append(c.Epochs, EpochResult{Kind: "epoch", Epoch: e, Step: e, TestLoss: killLoss(e)})
	}
	for _, p := range l.params {
		c.ParamNames = append(c.ParamNames, p.name)
		c.Params = append(c.Params, seq(float32(step), p.size)...)
	}
	for _, b := range l.buffers {
		c.BufferNames = append(c.BufferNames, b.name)
		c.Buffers = append(c.Buffers, seq(-float32(step), b.size))
	}
	for range l.workers {
		c.Workers = append(c.Workers, workerState{Compressor: map[string][]float32{"residual": seq(float32(2*step), l.numParams)}})
	}
	return c
}

// checkpointWriter is the child process of TestCheckpointKilledMidWrite: it
// resumes from the newest checkpoint in dir and writes and prunes checkpoints
// until it is killed (or, should the parent be gone, for 20 seconds).
func checkpointWriter(dir string) {
	l := killLayout()
	step := 0
	if c, _, _, err := latestCheckpoint(dir, l); err == nil {
		step = c.GlobalStep
	} else if !strings.Contains(err.Error(), "no checkpoint in") {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		step++
		if err := saveCheckpoint(checkpointPath(dir, step), killCheckpoint(l, step)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := pruneCheckpoints(dir, 2); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if i == 0 {
			fmt.Println("ready")
		}
	}
	os.Exit(0)
}

// TestCheckpointKilledMidWrite kills (SIGKILL) a process that writes and
// prunes checkpoints in a loop, 20 times after random delays, resuming from
// the newest checkpoint each time: after every kill the stale temporary files
// are removed and the newest checkpoint loads, whole (its values match its
// step), with a step never below the last one seen.
func TestCheckpointKilledMidWrite(t *testing.T) {
	if dir := os.Getenv("GRADWIRE_TEST_CKPT_WRITER"); dir != "" {
		checkpointWriter(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts 20 processes")
	}
	l := killLayout()
	dir := t.TempDir()
	last, temps := 0, 0
	for kill := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointKilledMidWrite$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GRADWIRE_TEST_CKPT_WRITER="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready, _ := bufio.NewReader(out).ReadString('\n')
		if ready != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("kill %d: the writer did not start (%q): %s", kill, ready, stderr.String())
		}
		time.Sleep(rand.N(40 * time.Millisecond))
		cmd.Process.Kill()
		cmd.Wait()

		removed, err := removeStaleTemps(dir)
		if err != nil {
			t.Fatal(err)
		}
		temps += len(removed)
		c, path, skipped, err := latestCheckpoint(dir, l)
		if err != nil || len(skipped) > 0 {
			t.Fatalf("kill %d: latest checkpoint: %v (skipped %v)", kill, err, skipped)
		}
		if want := killCheckpoint(l, c.GlobalStep); !slices.Equal(c.Params, want.Params) || !slices.Equal(c.Workers[1].Compressor["residual"], want.Workers[1].Compressor["residual"]) {
			t.Fatalf("kill %d: %s holds values of another step than %d", kill, path, c.GlobalStep)
		}
		if c.GlobalStep < last {
			t.Fatalf("kill %d: newest checkpoint is step %d, an earlier one was step %d: a newer checkpoint was deleted", kill, c.GlobalStep, last)
		}
		last = c.GlobalStep
		// keep 2 + the best + one written before its prune.
		if names := ckptNames(t, dir); len(names) > 4 {
			t.Fatalf("kill %d: %d checkpoints (%q), expected at most 4 with keep 2", kill, len(names), names)
		}
	}
	t.Logf("20 kills: %d temporary files of interrupted writes removed, %d checkpoints written in all", temps, last)
}

// fullDisk passes room bytes to w and then fails as a full disk does.
type fullDisk struct {
	w    io.Writer
	room int
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= f.room {
		f.room -= len(p)
		return f.w.Write(p)
	}
	n, _ := f.w.Write(p[:f.room])
	f.room = 0
	return n, syscall.ENOSPC
}

// checkOnlyOld checks that dir's checkpoints are the files names, none
// temporary, and that the newest of them loads.
func checkOnlyOld(t *testing.T, dir string, names []string, step int) {
	t.Helper()
	if got := ckptNames(t, dir); !slices.Equal(got, names) {
		t.Fatalf("checkpoints folder holds %q, expected %q", got, names)
	}
	c, _, _, err := latestCheckpoint(dir, testLayout())
	if err != nil || c.GlobalStep != step {
		t.Fatalf("latest checkpoint: %v, expected step %d", err, step)
	}
}

// TestCheckpointDiskFull fails the write of a checkpoint at several points:
// the error names the file and says the disk is full, the previous checkpoint
// stays the newest, no temporary file is left, and the next write succeeds.
func TestCheckpointDiskFull(t *testing.T) {
	dir := t.TempDir()
	losses := []float64{2, 1}
	writeCkpt(t, dir, epochEnd(1, losses))
	next := epochEnd(2, losses)
	size := len(encodeValid(t, next))
	path := checkpointPath(dir, 20)
	for _, room := range []int{0, 100, size / 2, size - 1} {
		err := saveCheckpointVia(path, next, func(w io.Writer) io.Writer { return &fullDisk{w: w, room: room} })
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("disk full after %d of %d bytes: error %v, expected one naming %s", room, size, err, path)
		}
		checkOnlyOld(t, dir, []string{"step-00000010.ckpt"}, 10)
	}
	writeCkpt(t, dir, next)
	checkOnlyOld(t, dir, []string{"step-00000010.ckpt", "step-00000020.ckpt"}, 20)
}

// TestCheckpointDiskFullTmpfs is TestCheckpointDiskFull on a real full file
// system: a 64 KiB tmpfs (needs the right to mount; skipped otherwise).
func TestCheckpointDiskFullTmpfs(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs (%v): the injected failures of TestCheckpointDiskFull stand in", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	losses := []float64{2, 1}
	writeCkpt(t, dir, epochEnd(1, losses))
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, expected it to run out of space", err)
	}
	path := checkpointPath(dir, 20)
	err := saveCheckpoint(path, epochEnd(2, losses))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, expected a full disk naming %s", err, path)
	}
	checkOnlyOld(t, dir, []string{"step-00000010.ckpt"}, 10)
	os.Remove(filler)
	writeCkpt(t, dir, epochEnd(2, losses))
	checkOnlyOld(t, dir, []string{"step-00000010.ckpt", "step-00000020.ckpt"}, 20)
}

// makeReadOnly makes dir unwritable until the test ends: by its mode, or for
// root (whom modes do not stop) by the immutable attribute.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	} else {
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("running as root and chattr +i fails (%v: %s): no way to make a read-only folder", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	}
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		os.Remove(probe)
		t.Fatalf("%s is still writable", dir)
	}
}

// TestCheckpointReadOnlyFolder: writing a checkpoint into a read-only
// checkpoints folder or run directory fails with an error naming the file, and
// leaves the folder as it was; pruning fails naming the file it could not
// delete and deletes nothing else.
func TestCheckpointReadOnlyFolder(t *testing.T) {
	dir := t.TempDir()
	losses := []float64{1, 2, 3}
	for e := 1; e <= 3; e++ {
		writeCkpt(t, dir, epochEnd(e, losses))
	}
	all := []string{"step-00000010.ckpt", "step-00000020.ckpt", "step-00000030.ckpt"}
	cdir := filepath.Join(dir, checkpointDir)
	makeReadOnly(t, cdir)
	path := checkpointPath(dir, 40)
	err := saveCheckpoint(path, epochEnd(3, losses))
	if err == nil || !strings.Contains(err.Error(), path) || !(errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) {
		t.Fatalf("error %v, expected a permission error naming %s", err, path)
	}
	checkOnlyOld(t, dir, all, 30)
	// keep 1 would delete step 20 (step 10 has the best loss).
	err = pruneCheckpoints(dir, 1)
	if err == nil || !strings.Contains(err.Error(), checkpointPath(dir, 20)) {
		t.Fatalf("prune: error %v, expected one naming %s", err, checkpointPath(dir, 20))
	}
	checkOnlyOld(t, dir, all, 30)

	fresh := t.TempDir()
	makeReadOnly(t, fresh)
	path = checkpointPath(fresh, 10)
	if err := saveCheckpoint(path, epochEnd(1, losses)); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, expected one naming %s", err, path)
	}
	if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
		t.Fatalf("%d entries in the read-only run directory", len(entries))
	}
}
