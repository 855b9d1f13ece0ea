package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvocationRecordedWhileRunning: an invocation's line is written when it
// starts and rewritten in place after each run, so one killed outright keeps
// its line as of its last finished run, and the report says so; other
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
	if len(invs) != 3 || invs[0] != earlier || invs[1] != inv || invs[2] != later {
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
		"- 2026-01-01T00:00:00Z: `gradwire sweep --config a.yaml` trained 1 runs in 50 s; ",
		"- 2026-01-02T00:00:00Z: `gradwire sweep --config a.yaml` trained 2 runs in 70 s, as of its last finished run (it ended without completing its record: killed, or still running); ",
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
	if invs, err = readInvocations(dir); err != nil || len(invs) != 3 || invs[1] != inv {
		t.Fatalf("invocations.jsonl after the end: %+v, %v", invs, err)
	}
}

// appendInvocation adds inv as a new last line of dir's invocations.jsonl.
func appendInvocation(dir string, inv Invocation) error {
	_, err := recordInvocation(dir, inv, -1)
	return err
}
