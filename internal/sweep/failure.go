package sweep

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/atomicfile"
)

// failedRun is a run that ended with an error (a diverged loss, say): the sweep
// left its error in failed.txt. The table names it instead of dropping it
// silently; a rerun of the sweep retries it.
type failedRun struct {
	variation   string
	seed        int64
	reason      string // the error's last line, which says what went wrong
	optimizer   string // from the run's config.yaml ("" if unreadable)
	globalBatch int
	sets        []string // sweep.yaml's settings of its variation
	rate        float64  // optim.lr from the run's config.yaml (0 if unreadable)
}

// maxReason bounds the error text quoted in table.md.
const maxReason = 200

// writeFailure records a run's error in its directory.
func writeFailure(dir string, err error) error {
	return atomicfile.Write(filepath.Join(dir, failedFile), []byte(err.Error()+"\n"))
}

// clearFailure removes an earlier failure record before a run is retried.
func clearFailure(dir string) error {
	if err := os.Remove(filepath.Join(dir, failedFile)); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// maxKind bounds the failure's kind quoted in a progress line.
const maxKind = 60

// kind is the reason's first clause ("diverged", "stalled"), which is what a
// progress line has room for.
func (f failedRun) kind() string {
	k, _, _ := strings.Cut(f.reason, ": ")
	if len(k) > maxKind {
		k = strings.ToValidUTF8(k[:maxKind], "") + "..."
	}
	return k
}

// readFailure reads a failed run's record, if the run has one.
func readFailure(dir, variation string, seed int64) (failedRun, bool) {
	file, err := os.Open(filepath.Join(dir, failedFile))
	if err != nil {
		return failedRun{}, false
	}
	// Only the first line is quoted, so a huge file is not read whole.
	raw, err := io.ReadAll(io.LimitReader(file, 4*maxReason))
	file.Close()
	if err != nil {
		return failedRun{}, false
	}
	reason, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
	// Control characters (a terminal's escape sequences, carriage returns)
	// would reach the progress line and table.md as they are.
	reason = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, reason)
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "") + "..." // no rune cut in half
	}
	f := failedRun{variation: variation, seed: seed, reason: reason}
	if c, err := configs.Load(filepath.Join(dir, "config.yaml"), nil); err == nil {
		f.optimizer, f.rate = c.Optim.Name, c.Optim.LR
		f.globalBatch = c.WorkerBatch() * c.Dist.Workers
	}
	return f, true
}
