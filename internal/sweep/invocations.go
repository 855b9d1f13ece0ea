package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
)

// invocationsFile records every `gradwire sweep` that worked on a results
// folder: what produced the results (command, version, machine) and how long it
// took. The report prints it, so a committed table says where it came from.
const invocationsFile = "invocations.jsonl"

// Invocation is one line of invocations.jsonl.
type Invocation struct {
	Command     string  `json:"command"`
	Version     string  `json:"version"`
	GoVersion   string  `json:"go_version"`
	BLAS        string  `json:"blas"` // the GEMM back-end the binary was built with
	Machine     string  `json:"machine"`
	Started     string  `json:"started"` // RFC 3339, UTC
	WallSeconds float64 `json:"wall_seconds"`
	Trained     int     `json:"trained"` // runs trained or resumed by this invocation
	Skipped     int     `json:"skipped"` // runs already finished
	Failed      int     `json:"failed"`
	// Copied are the runs copied from the reuse folders instead of trained.
	Copied      []CopiedRun `json:"copied,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
	// Running marks a line written while the invocation works: it is
	// rewritten after every run and every invocationHeartbeat, and
	// completed at the end, so an invocation that was killed
	// leaves its line as of its last beat (Trained counting the run it was
	// training).
	Running bool `json:"running,omitempty"`
}

func newInvocation(command string, started time.Time) Invocation {
	return Invocation{Command: command, Version: version.String(), GoVersion: version.GoVersion(),
		BLAS: models.BLAS, Machine: version.Machine(), Started: started.UTC().Format(time.RFC3339)}
}

// invocationLog is one invocation's line in invocations.jsonl and the counts
// it holds, shared by the sweep's loop and its heartbeat.
type invocationLog struct {
	mu    sync.Mutex
	inv   Invocation
	dir   string
	t0    time.Time
	line  int  // the line's index once written, -1 before
	write bool // false: counted, not recorded (no command given)
}

// set changes the counts without writing the line.
func (l *invocationLog) set(f func(*Invocation)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.inv)
}

// update changes the counts (f may be nil) and rewrites the line with the
// wall time so far.
func (l *invocationLog) update(f func(*Invocation)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f != nil {
		f(&l.inv)
	}
	if !l.write {
		return nil
	}
	l.inv.WallSeconds = time.Since(l.t0).Seconds()
	line, err := recordInvocation(l.dir, l.inv, l.line)
	if err != nil {
		return err
	}
	l.line = line
	return nil
}

// heartbeat rewrites the line every interval until the returned stop is
// called, so that a killed invocation's wall time is not lost with the run it
// was training. A failed beat is left to the next update to report.
func (l *invocationLog) heartbeat(interval time.Duration) (stop func()) {
	if !l.write {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = l.update(nil)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// recordInvocation writes inv's line into dir's invocations.jsonl at index
// at (0-based), the line an earlier call returned for the same invocation,
// when that line still holds inv's start time and command; else (at < 0, or
// the file changed) as a new last line. It returns the line's index. The
// file is rewritten atomically, so that a crash never leaves half a line,
// and under a lock on dir, so that a concurrent sweep's line is never lost.
func recordInvocation(dir string, inv Invocation, at int) (int, error) {
	path := filepath.Join(dir, invocationsFile)
	unlock, err := lockDir(dir)
	if err != nil {
		return 0, fmt.Errorf("recording the sweep in %s: %w", path, err)
	}
	defer unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	line, err := json.Marshal(inv)
	if err != nil {
		return 0, err
	}
	lines := strings.SplitAfter(string(old), "\n") // the last is "" after a final newline
	if at >= 0 && at < len(lines) {
		var prev Invocation
		if json.Unmarshal([]byte(lines[at]), &prev) == nil && prev.Started == inv.Started && prev.Command == inv.Command {
			lines[at] = string(line) + "\n"
			return at, atomicfile.Write(path, []byte(strings.Join(lines, "")))
		}
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	return strings.Count(string(old), "\n"), atomicfile.Write(path, append(append(old, line...), '\n'))
}

// readInvocations reads dir's invocations.jsonl; a missing file is no invocations.
func readInvocations(dir string) ([]Invocation, error) {
	path := filepath.Join(dir, invocationsFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Invocation
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var inv Invocation
		if err := json.Unmarshal(sc.Bytes(), &inv); err != nil {
			return nil, fmt.Errorf("%s line %d: %w (expected one JSON object per line, as gradwire sweep writes)", path, n, err)
		}
		out = append(out, inv)
	}
	return out, sc.Err()
}

// provenance is table.md's closing section: every invocation that trained
// something, and the sweep's total run time.
// runWall is the sum of the runs' wall_seconds, copied runs (copiedRuns)
// aside: more than the invocations' total means some runs were trained by
// invocations that left no record.
func provenance(invs []Invocation, runWall float64) string {
	var b strings.Builder
	var wall float64
	var lines []string
	for _, inv := range invs {
		wall += inv.WallSeconds
		if inv.Trained == 0 && len(inv.Copied) == 0 {
			continue // a rerun that found everything done adds nothing worth a line
		}
		state := ""
		switch {
		case inv.Running:
			state = ", as of its last record (it ended without completing it: killed, or still running; a run it was training counts as trained)"
		case inv.Interrupted:
			state = ", interrupted"
		}
		if inv.Failed > 0 {
			state += fmt.Sprintf(", %d failed", inv.Failed)
		}
		did := "trained " + countRuns(inv.Trained)
		if len(inv.Copied) > 0 {
			var copies []string
			for _, c := range inv.Copied {
				copies = append(copies, c.Run+" from "+c.From)
			}
			did += ", copied " + countRuns(len(inv.Copied)) + " finished with the same config elsewhere (" + strings.Join(copies, ", ") + ")"
		}
		lines = append(lines, fmt.Sprintf("- %s: `%s` %s in %.0f s%s; %s (%s, blas %s) on %s.",
			inv.Started, inv.Command, did, inv.WallSeconds, state, inv.Version, inv.GoVersion, inv.BLAS, inv.Machine))
	}
	if len(lines) == 0 {
		return ""
	}
	fmt.Fprintf(&b, "\nProduced by (from %s):\n\n%s\n\nSweep run time, all invocations: %.0f s (%.1f h).\n",
		invocationsFile, strings.Join(lines, "\n"), wall, wall/3600)
	if runWall > wall {
		fmt.Fprintf(&b, "The runs' own training time (%.0f s) exceeds that: some were trained by invocations that left no record here.\n", runWall)
	}
	return b.String()
}

// copiedRuns is the set of runs ("<variation>/seed-<k>") the invocations
// copied from other sweeps' folders: their training time was spent there.
func copiedRuns(invs []Invocation) map[string]bool {
	out := map[string]bool{}
	for _, inv := range invs {
		for _, c := range inv.Copied {
			out[c.Run] = true
		}
	}
	return out
}

// countRuns is "1 run" or "N runs".
func countRuns(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}
