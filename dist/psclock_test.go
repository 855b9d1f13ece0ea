package dist

import (
	"fmt"
	"slices"
	"testing"
)

// pushes runs the clock and returns its push events as "time worker read
// staleness version" lines, and its pull events' (worker, read) pairs.
func psRun(t *testing.T, c *PSClock, maxPushes int) (pushes []string, pulls [][2]int) {
	t.Helper()
	for len(pushes) < maxPushes {
		e, ok, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if e.Kind == PSPush {
			pushes = append(pushes, fmt.Sprintf("%g w%d v%d tau%d v%d", e.Time, e.Worker, e.Read, e.Staleness, e.Version))
		} else {
			pulls = append(pulls, [2]int{e.Worker, e.Read})
		}
	}
	return pushes, pulls
}

func fixed(ds ...float64) func(int, int) float64 {
	return func(w, _ int) float64 { return ds[w] }
}

// TestPSClockAsync is the worked example: 2 workers with steps of 1.0 and 1.5,
// asynchronous. Arrivals (time, worker, version read, staleness, new version):
// (1.0, 0, v0, 0, v1), (1.5, 1, v0, 1, v2), (2.0, 0, v1, 1, v3),
// (3.0, 0, v3, 0, v4), (3.0, 1, v2, 2, v5).
func TestPSClockAsync(t *testing.T) {
	c, err := NewPSClock(2, -1, -1, fixed(1.0, 1.5))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := psRun(t, c, 5)
	want := []string{"1 w0 v0 tau0 v1", "1.5 w1 v0 tau1 v2", "2 w0 v1 tau1 v3", "3 w0 v3 tau0 v4", "3 w1 v2 tau2 v5"}
	if !slices.Equal(got, want) {
		t.Fatalf("pushes\n%q\nwant\n%q", got, want)
	}
}

// TestPSClockBound: with bound 0 (synchronous) worker 0 waits for worker 1
// every step, so both pull the same version and the pushes of a clock apply
// to it; with bound 1 worker 0 runs one step ahead and no further.
func TestPSClockBound(t *testing.T) {
	c, err := NewPSClock(2, 0, -1, fixed(1.0, 1.5))
	if err != nil {
		t.Fatal(err)
	}
	got, pulls := psRun(t, c, 4)
	want := []string{"1 w0 v0 tau0 v1", "1.5 w1 v0 tau1 v2", "2.5 w0 v2 tau0 v3", "3 w1 v2 tau1 v4"}
	if !slices.Equal(got, want) {
		t.Fatalf("bound 0: pushes\n%q\nwant\n%q", got, want)
	}
	if !slices.Equal(pulls[:4], [][2]int{{0, 0}, {1, 0}, {0, 2}, {1, 2}}) {
		t.Fatalf("bound 0: pulls %v", pulls)
	}
	// Bound 1: worker 0 (steps of 1) finishes steps 0 and 1 at 1 and 2, but
	// may start step 2 only once worker 1 (steps of 3) has finished step 0,
	// at 3.
	c, err = NewPSClock(2, 1, -1, fixed(1.0, 3.0))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = psRun(t, c, 4)
	want = []string{"1 w0 v0 tau0 v1", "2 w0 v1 tau0 v2", "3 w1 v0 tau2 v3", "4 w0 v3 tau0 v4"}
	if !slices.Equal(got, want) {
		t.Fatalf("bound 1: pushes\n%q\nwant\n%q", got, want)
	}
}

// TestPSClockBudget: a budget of 5 steps over 3 workers starts exactly 5 and
// delivers all 5 gradients, the last ones after the budget ran out.
func TestPSClockBudget(t *testing.T) {
	c, err := NewPSClock(3, -1, 5, func(w, k int) float64 { return 1 + float64(w)/4 + float64(k)/16 })
	if err != nil {
		t.Fatal(err)
	}
	pushes, pulls := psRun(t, c, 100)
	if len(pushes) != 5 || len(pulls) != 5 {
		t.Fatalf("%d pushes and %d pulls, want 5 each:\n%q", len(pushes), len(pulls), pushes)
	}
	if _, ok, _ := c.Next(); ok {
		t.Fatal("events after every gradient arrived")
	}
	if _, err := NewPSClock(2, -1, -1, fixed(1, 0)); err == nil {
		t.Fatal("a zero duration gave no error")
	}
}
