package train

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunDirSecondClaimFailsNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	first, err := claimRunDir(dir, false, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = claimRunDir(dir, false, false)
	host, _ := os.Hostname()
	want := fmt.Sprintf("PID %d on host %s", os.Getpid(), host)
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInUse) {
		t.Fatalf("second claim: %v, want an ErrInUse naming %q", err, want)
	}
	if holder, busy := InUse(dir); !busy || !strings.HasPrefix(holder, want+" since ") {
		t.Errorf("InUse of a held folder: %q, %v; want busy, naming %q", holder, busy, want)
	}
	first.release()
	if holder, busy := InUse(dir); busy {
		t.Errorf("InUse of a released folder: busy, %q", holder)
	}
	if _, busy := InUse(filepath.Join(dir, "missing")); busy {
		t.Error("InUse of a missing folder: busy")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("InUse created the folder it probed")
	}
	again, err := claimRunDir(dir, false, false)
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	again.release()
}

// TestRunDirClaimOutlastsAProbe: a claim that finds the lock held for a
// moment (InUse probing it) looks again instead of failing.
func TestRunDirClaimOutlastsAProbe(t *testing.T) {
	dir := t.TempDir()
	probe, err := claimRunDir(dir, false, false) // stands in for InUse's instant
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(claimRetryWait / 2)
		probe.release()
	}()
	d, err := claimRunDir(dir, false, false)
	if err != nil {
		t.Fatalf("claim while a probe held the lock for %v: %v", claimRetryWait/2, err)
	}
	d.release()
}

// TestRunDirLockHeldByAnotherProcess runs a second process that holds the lock
// and checks that this one is refused at once, naming that process, and that
// the lock is free again once the holder is killed (no stale lock).
func TestRunDirLockHeldByAnotherProcess(t *testing.T) {
	if dir := os.Getenv("GRADWIRE_TEST_HOLD_RUNDIR"); dir != "" {
		d, err := claimRunDir(dir, false, false)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		defer d.release()
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRunDirLockHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "GRADWIRE_TEST_HOLD_RUNDIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder did not take the lock: %q %v", buf, err)
	}
	_, err = claimRunDir(dir, false, false)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", cmd.Process.Pid)) {
		t.Fatalf("claim while another process holds the directory: %v, want an error naming PID %d", err, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	d, err := claimRunDir(dir, false, false)
	if err != nil {
		t.Fatalf("claim after the holder was killed: %v", err)
	}
	d.release()
}

func TestRunDirRefusesAnotherRunUnlessOverwrite(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.yaml", "metrics.jsonl", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := claimRunDir(dir, false, false)
	if err == nil || !strings.Contains(err.Error(), "already holds a run") || !strings.Contains(err.Error(), "--resume "+dir) ||
		!strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("fresh run into a run's folder: %v", err)
	}
	d, err := claimRunDir(dir, true, false)
	if err != nil {
		t.Fatalf("resume claim: %v", err)
	}
	d.release()
	d, err = claimRunDir(dir, false, true)
	if err != nil {
		t.Fatalf("overwrite claim: %v", err)
	}
	d.release()
	for _, name := range runFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("--overwrite left %s", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("--overwrite removed a file that is not the run's: %v", err)
	}
	if _, err := claimRunDir(t.TempDir(), true, false); err == nil || !strings.Contains(err.Error(), "holds no run") {
		t.Errorf("resume of an empty folder: %v", err)
	}
}

func TestRunDirReadOnlyFolder(t *testing.T) {
	parent := t.TempDir()
	makeReadOnly(t, parent)
	_, err := claimRunDir(filepath.Join(parent, "run"), false, false)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(parent, "run")) {
		t.Fatalf("claim under a read-only folder: %v", err)
	}
}

// TestRunDirNotAFolder: a path that is a file, or a link to nothing, is refused
// saying so, and nothing is created at the link's target.
func TestRunDirNotAFolder(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRunDir(file, false, false); err == nil || !strings.Contains(err.Error(), file+" is a file: expected a folder") {
		t.Errorf("claim of a file: %v", err)
	}
	link, target := filepath.Join(root, "link"), filepath.Join(root, "nowhere")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRunDir(link, false, false); err == nil || !strings.Contains(err.Error(), link+" is a symbolic link to "+target+", which does not exist") {
		t.Errorf("claim of a dangling link: %v", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the dangling link's target was created")
	}
}

// TestRunDirLockRefusesSymlink: a .lock planted as a link to another file is
// refused, and that file keeps its content.
func TestRunDirLockRefusesSymlink(t *testing.T) {
	dir, other := t.TempDir(), filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(other, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRunDir(dir, false, false); err == nil || !strings.Contains(err.Error(), "lock file") {
		t.Fatalf("claim with a planted link: %v", err)
	}
	if raw, _ := os.ReadFile(other); string(raw) != "keep me" {
		t.Fatalf("the link's target was changed: %q", raw)
	}
}

// TestClaimForCopy: a copy into a run directory waits for no one (it fails
// naming the holder while a run trains there), leaves a finished run alone,
// and clears an unfinished one's files first.
func TestClaimForCopy(t *testing.T) {
	dir := t.TempDir()
	training, err := claimRunDir(dir, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ClaimForCopy(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", os.Getpid())) {
		t.Fatalf("copy while a run holds the folder: %v", err)
	}
	training.release()

	for _, f := range []string{"config.yaml", "metrics.jsonl", InitFile, "checkpoints/epoch-1.ckpt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release, done, err := ClaimForCopy(dir)
	if err != nil || done {
		t.Fatalf("unfinished run: done %v, %v", done, err)
	}
	for _, f := range []string{"config.yaml", "metrics.jsonl", InitFile, "checkpoints"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s of the unfinished run is still there", f)
		}
	}
	if _, err := claimRunDir(dir, false, false); err == nil {
		t.Error("a run could start while the copy holds the folder")
	}
	release()

	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if release, done, err := ClaimForCopy(dir); err != nil || !done || release != nil {
		t.Fatalf("finished run: done %v, %v", done, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl")); string(b) != "kept" {
		t.Error("a finished run's files were touched")
	}
}
