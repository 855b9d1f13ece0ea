// Package atomicfile writes files so that readers see either the old content or
// the complete new content, never a half-written file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write stores data at path through a temporary file in the same directory,
// synced and then renamed over path. On failure the temporary file is removed.
func Write(path string, data []byte) error {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content that fill streams into w (a large file need
// not be built in memory first). When fill returns an error, the temporary
// file is removed and path keeps its old content; the error names path.
func WriteFunc(path string, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempMark+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is only durable once the directory is synced; without it a
	// power loss could bring back the old entry after later files were removed.
	if d, derr := os.Open(dir); derr == nil {
		serr := d.Sync()
		d.Close()
		// Some file systems cannot sync a directory (EINVAL); the rename stands.
		if serr != nil && !errors.Is(serr, syscall.EINVAL) {
			return fmt.Errorf("write %s: sync directory: %w", path, serr)
		}
	}
	return nil
}

// tempMark separates the target's name from os.CreateTemp's random digits in a
// temporary file's name: ".<name>.tmp<digits>".
const tempMark = ".tmp"

// IsTemp reports whether a file's base name is that of a temporary file of
// Write, which a process killed mid-write leaves behind.
func IsTemp(name string) bool {
	i := strings.LastIndex(name, tempMark)
	if len(name) < 2 || name[0] != '.' || i <= 1 {
		return false
	}
	digits := name[i+len(tempMark):]
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// RemoveTemps deletes the temporary files of Write in dir (not below it) and
// returns their paths. Only call it when no other process writes into dir: it
// cannot tell a dead writer's file from a live one's.
func RemoveTemps(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("remove temporary files: %w", err)
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsTemp(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil {
			return removed, fmt.Errorf("remove temporary file: %w", err)
		}
		removed = append(removed, path)
	}
	return removed, nil
}
