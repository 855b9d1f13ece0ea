package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestInvocationRecordedWhileRunning: an invocation's line is written when it
// starts and rewritten in place after each run, so one killed outright keeps
// its line as of its last record, and the report says so; other
// invocations' lines stay as they were.
func TestInvocationRecordedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	earlier := Invocation{Command: "gradwire sweep --config a.yaml", Started: "2026-01-01T00:00:00Z", WallSeconds: 50, Trained: 1}
	if err := appendInvocation(dir, earlier); err != nil {
		t.Fatal(err)
	}
	inv := Invocation{Command: "gradwire sweep --config a.yaml", Started: "2026-01-02T00:00:00Z", Running: true}
	at, err := recordInvocation(dir, inv, -1)
	if err != nil || at != 1 {
		t.Fatalf("line %d, %v", at, err)
	}
	inv.Trained, inv.WallSeconds = 2, 70
	if at, err = recordInvocation(dir, inv, at); err != nil || at != 1 {
		t.Fatalf("line %d, %v", at, err)
	}
	// A later invocation (the same command, started in the same second, as a
	// quick rerun is) gets its own line.
	later := Invocation{Command: "gradwire sweep --config a.yaml", Started: "2026-01-02T00:00:00Z", Running: true}
	if n, err := recordInvocation(dir, later, -1); err != nil || n != 2 {
		t.Fatalf("line %d, %v", n, err)
	}
	invs, err := readInvocations(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 3 || !reflect.DeepEqual(invs[0], earlier) || !reflect.DeepEqual(invs[1], inv) || !reflect.DeepEqual(invs[2], later) {
		t.Fatalf("invocations.jsonl: %+v", invs)
	}
	raw, err := os.ReadFile(filepath.Join(dir, invocationsFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n != 3 || !strings.HasSuffix(string(raw), "}\n") {
		t.Fatalf("%d lines:\n%s", n, raw)
	}
	text := provenance(invs, 120)
	for _, want := range []string{
		"- 2026-01-01T00:00:00Z: `gradwire sweep --config a.yaml` trained 1 run in 50 s; ",
		"- 2026-01-02T00:00:00Z: `gradwire sweep --config a.yaml` trained 2 runs in 70 s, as of its last record (it ended without completing it: killed, or still running; a run it was training counts as trained); ",
		"Sweep run time, all invocations: 120 s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("provenance lacks %q:\n%s", want, text)
		}
	}
	// The invocation's end completes its own line.
	inv.Running, inv.WallSeconds = false, 80
	if at, err = recordInvocation(dir, inv, at); err != nil || at != 1 {
		t.Fatalf("line %d, %v", at, err)
	}
	if invs, err = readInvocations(dir); err != nil || len(invs) != 3 || !reflect.DeepEqual(invs[1], inv) {
		t.Fatalf("invocations.jsonl after the end: %+v, %v", invs, err)
	}
}

// TestInvocationHeartbeat: while a sweep works its line's wall time is
// rewritten every beat, so a sweep killed during an hour-long run keeps the
// time it spent; after stop no beat writes again.
func TestInvocationHeartbeat(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().Add(-90 * time.Second)
	l := &invocationLog{inv: Invocation{Command: "gradwire sweep --config a.yaml", Started: start.UTC().Format(time.RFC3339)}, dir: dir, t0: start, line: -1, write: true}
	if err := l.update(func(inv *Invocation) { inv.Running, inv.Trained = true, 1 }); err != nil {
		t.Fatal(err)
	}
	first := readOne(t, dir)
	stop := l.heartbeat(time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for readOne(t, dir).WallSeconds == first.WallSeconds {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no beat rewrote the line in 10 s: %+v", first)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	beat := readOne(t, dir)
	if beat.WallSeconds < 90 || !beat.Running || beat.Trained != 1 || beat.Started != first.Started {
		t.Errorf("after a beat: %+v", beat)
	}
	time.Sleep(20 * time.Millisecond)
	if after := readOne(t, dir); !reflect.DeepEqual(after, beat) {
		t.Errorf("the line changed after stop: %+v, then %+v", beat, after)
	}
	// Without a command nothing is recorded, and stop still returns.
	quiet := &invocationLog{dir: t.TempDir(), line: -1}
	quiet.heartbeat(time.Millisecond)()
	if _, err := os.Stat(filepath.Join(quiet.dir, invocationsFile)); !os.IsNotExist(err) {
		t.Errorf("an unrecorded invocation wrote %s: %v", invocationsFile, err)
	}
}

// readOne reads dir's only invocation.
func readOne(t *testing.T, dir string) Invocation {
	t.Helper()
	invs, err := readInvocations(dir)
	if err != nil || len(invs) != 1 {
		t.Fatalf("invocations.jsonl: %+v, %v", invs, err)
	}
	return invs[0]
}

// appendInvocation adds inv as a new last line of dir's invocations.jsonl.
func appendInvocation(dir string, inv Invocation) error {
	_, err := recordInvocation(dir, inv, -1)
	return err
}

// TestInvocationsConcurrentSweeps: sweeps working on one results folder at
// once (two --only selections in two terminals) each keep their line and its
// last update: the read, change and rewrite of the file is under a lock.
func TestInvocationsConcurrentSweeps(t *testing.T) {
	if !dirLocking {
		t.Skip("no flock on this system: concurrent sweeps on one folder are not guarded")
	}
	dir := t.TempDir()
	const sweeps, updates = 8, 25
	errs := make(chan error, sweeps)
	for s := range sweeps {
		go func() {
			inv := Invocation{Command: fmt.Sprintf("gradwire sweep --only run-%d", s), Started: "2026-01-02T00:00:00Z", Running: true}
			at, err := recordInvocation(dir, inv, -1)
			for u := 1; u <= updates && err == nil; u++ {
				inv.Trained = u
				at, err = recordInvocation(dir, inv, at)
			}
			errs <- err
		}()
	}
	for range sweeps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	invs, err := readInvocations(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, inv := range invs {
		seen[inv.Command]++
		if inv.Trained != updates {
			t.Errorf("%s: trained %d, want its last update's %d", inv.Command, inv.Trained, updates)
		}
	}
	if len(invs) != sweeps || len(seen) != sweeps {
		t.Fatalf("%d lines for %d sweeps (%d distinct): %+v", len(invs), sweeps, len(seen), invs)
	}
}

func TestCountRuns(t *testing.T) {
	for n, want := range map[int]string{0: "0 runs", 1: "1 run", 2: "2 runs", 11: "11 runs"} {
		if got := countRuns(n); got != want {
			t.Errorf("countRuns(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInvocationHeartbeatDuringSweep: beats racing the sweep's own updates
// leave the completed line (run it with -race).
func TestInvocationHeartbeatDuringSweep(t *testing.T) {
	old := invocationHeartbeat
	invocationHeartbeat = time.Millisecond
	t.Cleanup(func() { invocationHeartbeat = old })
	path := tinySweep(t, "")
	results := t.TempDir()
	executeSweep(t, path, results)
	got := readOne(t, filepath.Join(results, "tiny"))
	if got.Running || got.Trained != 4 || got.Failed != 0 || got.WallSeconds <= 0 {
		t.Errorf("the sweep's line: %+v", got)
	}
}
