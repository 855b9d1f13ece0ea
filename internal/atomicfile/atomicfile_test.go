package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWriteReplacesWholeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	for _, content := range []string{"first version, longer", "second"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q (%v), want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d files left in the directory, want only x.json", len(entries))
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// Renaming onto a directory fails after the temporary file was written.
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("data")); err == nil {
		t.Fatal("writing over a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries after a failed write, want the directory alone", len(entries))
	}
}

func TestWriteFuncFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	if err := Write(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := WriteFunc(path, func(w io.Writer) error {
		if _, err := w.Write([]byte("half of the new")); err != nil {
			return err
		}
		return full
	})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v: expected it to wrap the writer's error and name %s", err, path)
	}
	got, rerr := os.ReadFile(path)
	if rerr != nil || string(got) != "old" {
		t.Fatalf("after the failed write %s holds %q (%v), want the old content", path, got, rerr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries after a failed write, want %s alone", len(entries), path)
	}
}

func TestIsTemp(t *testing.T) {
	dir := t.TempDir()
	// The names os.CreateTemp really gives Write's temporary files.
	for _, base := range []string{"x.json", "step-00000012.ckpt", "a"} {
		f, err := os.CreateTemp(dir, "."+base+tempMark+"*")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if name := filepath.Base(f.Name()); !IsTemp(name) {
			t.Errorf("IsTemp(%q) = false for a temporary file of %s", name, base)
		}
	}
	for _, name := range []string{"x.json", ".x.json", ".x.tmp", ".x.tmpfoo", "x.tmp123", ".tmp123", ".bashrc", ".x.tmp12a"} {
		if IsTemp(name) {
			t.Errorf("IsTemp(%q) = true, want false", name)
		}
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	keep := []string{"a.json", ".hidden", ".b.tmpx"}
	for _, name := range append(keep, ".a.json.tmp123", ".c.ckpt.tmp9") {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory with a temporary file's name is not Write's.
	if err := os.Mkdir(filepath.Join(dir, ".d.tmp1"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemps(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, ".a.json.tmp123"), filepath.Join(dir, ".c.ckpt.tmp9")}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{".b.tmpx", ".d.tmp1", ".hidden", "a.json"}) {
		t.Fatalf("left %q", left)
	}
	if _, err := RemoveTemps(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("error %v for a missing directory, expected one naming it", err)
	}
}
