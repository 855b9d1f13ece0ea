package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// lockName is the run directory's lock file. The lock itself is an advisory
// lock on the open file (released by the kernel when the process dies, so a
// killed run never leaves a stale lock); the file's text names the holder.
const lockName = ".lock"

// runFiles are what a run writes into its directory: a folder holding any of
// them holds a run, and --overwrite removes exactly these.
var runFiles = []string{"config.yaml", "metrics.jsonl", "summary.json", "checkpoints", InitFile}

// runDir is a run directory owned by this process until release.
type runDir struct {
	path string
	lock *os.File
}

// claimRunDir creates path if needed and takes its lock; a second process fails
// (after claimRetries looks), naming the holder. A fresh run (resume false) refuses a folder that
// already holds a run unless overwrite is set, which removes that run's files
// first; a resumed run needs one.
func claimRunDir(path string, resume, overwrite bool) (*runDir, error) {
	d, err := lockRunDir(path)
	if err != nil {
		return nil, err
	}
	present := d.runFilesPresent()
	switch {
	case resume && len(present) == 0:
		d.release()
		return nil, fmt.Errorf("resume: %s holds no run (no config.yaml, metrics.jsonl or checkpoints/)", path)
	case !resume && len(present) > 0 && !overwrite:
		d.release()
		return nil, fmt.Errorf("run directory %s already holds a run (%s): continue it with gradwire train --resume %s, "+
			"replace it with --overwrite, or choose another --out", path, strings.Join(present, ", "), path)
	case !resume && overwrite:
		if err := d.removeRunFiles(present); err != nil {
			d.release()
			return nil, fmt.Errorf("--overwrite: %w", err)
		}
	}
	return d, nil
}

// ClaimForCopy takes the lock of the run directory path (created if needed)
// for a process that fills it with a finished run's files instead of training:
// while another process holds it, it fails (after claimRetries looks) naming the holder, as
// training would. A folder that already holds a finished run (summary.json) is
// left untouched and reported done; otherwise the files of an unfinished run
// there are removed first, as a fresh run with --overwrite removes them.
// release gives the directory up.
func ClaimForCopy(path string) (release func(), done bool, err error) {
	d, err := lockRunDir(path)
	if err != nil {
		return nil, false, err
	}
	if _, err := os.Lstat(filepath.Join(path, "summary.json")); err == nil {
		d.release()
		return nil, true, nil
	}
	if err := d.removeRunFiles(d.runFilesPresent()); err != nil {
		d.release()
		return nil, false, err
	}
	return d.release, false, nil
}

// ErrInUse is the error of a claim on a run directory that another gradwire
// process holds.
var ErrInUse = errors.New("in use by another gradwire process")

// A claim that finds the lock taken looks again claimRetries times,
// claimRetryWait apart, so that a momentary probe does not fail it.
const (
	claimRetries   = 5
	claimRetryWait = 40 * time.Millisecond
)

// InUse reports whether a gradwire process holds the run directory path now,
// and who ("PID 123 on host h since T"). It takes the lock for an instant when it
// is free, so it creates nothing and, unlike a claim, leaves a missing folder
// missing.
func InUse(path string) (holder string, inUse bool) {
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR|lockOpenFlags, 0)
	if err != nil {
		return "", false // no lock file: no process has claimed the folder
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		if !errors.Is(err, errLocked) {
			return "", false
		}
		text, _ := os.ReadFile(f.Name())
		return describeHolder(string(text)), true
	}
	unlockFile(f)
	return "", false
}

// removeRunFiles removes the named run files of the directory.
func (d *runDir) removeRunFiles(names []string) error {
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(d.path, name)); err != nil {
			return err
		}
	}
	return nil
}

// lockRunDir creates path if needed and takes its lock; a second process fails
// (after claimRetries looks), naming the holder.
func lockRunDir(path string) (*runDir, error) {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("run directory %s is a file: expected a folder (or a path to create one at)", path)
	} else if errors.Is(err, os.ErrNotExist) {
		if target, lerr := os.Readlink(path); lerr == nil {
			return nil, fmt.Errorf("run directory %s is a symbolic link to %s, which does not exist: create that folder or choose another path", path, target)
		}
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_CREATE|os.O_RDWR|lockOpenFlags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: cannot create its lock file: %w", path, err)
	}
	err = lockFile(f)
	for try := 0; errors.Is(err, errLocked) && try < claimRetries; try++ {
		// InUse (a sweep's dry run) holds a free lock for an instant: look
		// again before calling the folder taken.
		time.Sleep(claimRetryWait)
		err = lockFile(f)
	}
	if err != nil {
		holder, _ := os.ReadFile(f.Name())
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("run directory %s is %w (%s); wait for it to end or choose another --out",
				path, ErrInUse, describeHolder(string(holder)))
		}
		return nil, fmt.Errorf("run directory %s: lock: %w", path, err)
	}
	d := &runDir{path: path, lock: f}
	if err := d.writeHolder(); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// writeHolder records who holds the lock, for the error a second process prints.
func (d *runDir) writeHolder() error {
	host, _ := os.Hostname()
	text := fmt.Sprintf("pid %d\nhost %s\nstarted %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339))
	if err := d.lock.Truncate(0); err != nil {
		return fmt.Errorf("run directory %s: lock file: %w", d.path, err)
	}
	if _, err := d.lock.WriteAt([]byte(text), 0); err != nil {
		return fmt.Errorf("run directory %s: lock file: %w", d.path, err)
	}
	return nil
}

// describeHolder turns the lock file's text into "PID 123 on host h since T".
func describeHolder(text string) string {
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			fields[k] = v
		}
	}
	pid, err := strconv.Atoi(fields["pid"])
	if err != nil {
		return "holder unknown"
	}
	s := fmt.Sprintf("PID %d on host %s", pid, fields["host"])
	if t := fields["started"]; t != "" {
		s += " since " + t
	}
	return s
}

// runFilesPresent lists the run files that exist in the directory.
func (d *runDir) runFilesPresent() []string {
	var out []string
	for _, name := range runFiles {
		if _, err := os.Lstat(filepath.Join(d.path, name)); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// release gives the directory up. The lock file stays (removing it would let a
// process that opened it before the removal lock a file no one else sees).
func (d *runDir) release() {
	if d != nil && d.lock != nil {
		unlockFile(d.lock)
		d.lock.Close()
		d.lock = nil
	}
}
