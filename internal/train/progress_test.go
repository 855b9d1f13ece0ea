package train

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// at sets the clock to s seconds after its start.
func (c *fakeClock) at(s float64) {
	c.t = time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second)))
}

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.at(0)
	return c
}

func etaSeconds(t *testing.T, p *progress) float64 {
	t.Helper()
	eta, ok := p.eta()
	if !ok {
		t.Fatal("no eta")
	}
	return eta.Seconds()
}

// TestProgressETAWholeRun: the ETA covers every remaining epoch, not just the
// current one. 2 epochs of 5 steps; 2 steps done in 4 s is 2 s a step, and 8
// steps are left: 16 s.
func TestProgressETAWholeRun(t *testing.T) {
	clk := newFakeClock()
	p := startProgress(&bytes.Buffer{}, false, 0, clk.now, 2, 5, 0, 0)
	if _, ok := p.eta(); ok {
		t.Error("eta before any step was timed")
	}
	clk.at(1)
	p.step(0, 1, 0.9, 100)
	clk.at(4)
	p.step(0, 2, 0.8, 100)
	if got := etaSeconds(t, p); got != 16 {
		t.Errorf("eta %g s, want 16 s", got)
	}
}

// TestProgressETAResumed: steps done before a resume are not counted as timed.
// Resumed after 1 epoch and 2 steps of 2 x 5: one step in 3 s, 2 steps left: 6 s.
func TestProgressETAResumed(t *testing.T) {
	clk := newFakeClock()
	p := startProgress(&bytes.Buffer{}, false, 0, clk.now, 2, 5, 1, 2)
	clk.at(3)
	p.step(1, 3, 0.5, 100)
	if got := etaSeconds(t, p); got != 6 {
		t.Errorf("eta %g s, want 6 s", got)
	}
}

// TestProgressETAEvaluation: once an evaluation has started, the ETA adds the
// evaluations still to come at the measured seconds per example.
func TestProgressETAEvaluation(t *testing.T) {
	clk := newFakeClock()
	p := startProgress(&bytes.Buffer{}, false, 0, clk.now, 2, 5, 0, 0)
	for s := 1; s <= 5; s++ {
		clk.at(float64(2 * s))
		p.step(0, s, 0.5, 100)
	}
	clk.at(11) // the second between the last step and the evaluation counts as training
	p.evaluating(0, 100)
	clk.at(13)
	p.evaluating(50, 100)
	// Training: 11 s / 5 steps = 2.2 s a step, 5 steps left: 11 s.
	// Evaluation: 2 s / 50 examples = 0.04 s, 50 of this one + 100 of the next: 6 s.
	if got := etaSeconds(t, p); math.Abs(got-17) > 1e-6 {
		t.Errorf("eta during the evaluation %g s, want 17 s", got)
	}
	clk.at(15)
	p.evaluating(100, 100)
	p.endEpoch()
	clk.at(18)
	p.step(1, 1, 0.4, 100)
	// Training: 14 s / 6 steps, 4 steps left: 9.333 s; evaluation: 4 s / 100
	// examples, 100 left: 4 s.
	if got := etaSeconds(t, p); math.Abs(got-(14.0/6*4+4)) > 1e-6 {
		t.Errorf("eta in the second epoch %g s, want %g s", got, 14.0/6*4+4)
	}
}

// TestProgressPlainLines: without a terminal, a line every 30 s, no "\r",
// and the evaluation's progress in the line.
func TestProgressPlainLines(t *testing.T) {
	clk := newFakeClock()
	var out bytes.Buffer
	p := startProgress(&out, false, 0, clk.now, 2, 5, 0, 0)
	for s := 1; s <= 5; s++ {
		clk.at(float64(10 * s))
		p.step(0, s, 0.5, 1234)
	}
	clk.at(55)
	p.evaluating(0, 1000)
	clk.at(60)
	p.evaluating(500, 1000)
	clk.at(65)
	p.evaluating(1000, 1000)
	p.endEpoch()
	p.close()
	// At 30 s: 3 steps in 30 s, 7 left: 70 s.
	// At 60 s: 55 s for 5 steps, 5 left: 55 s; 5 s for 500 examples, 1,500 left: 15 s.
	want := "epoch 1/2 step 3/5 loss 0.5000 1,234 samples/s eta 1m10s\n" +
		"epoch 1/2 step 5/5 evaluating 500/1,000 eta 1m10s\n"
	if out.String() != want {
		t.Errorf("output\n%q\nwant\n%q", out.String(), want)
	}
}

// TestProgressTerminalFrames: on a terminal, "\r" frames with a bar, the
// evaluation shown on the epoch's line, and a newline when the epoch ends.
func TestProgressTerminalFrames(t *testing.T) {
	clk := newFakeClock()
	var out bytes.Buffer
	p := startProgress(&out, true, 0, clk.now, 3, 4, 0, 0)
	clk.at(1)
	p.step(0, 1, 0.75, 64)
	clk.at(1.05) // within the redraw interval: no frame
	p.step(0, 2, 0.7, 64)
	clk.at(2)
	p.step(0, 4, 0.6, 64) // the last step is always drawn
	clk.at(3)
	p.evaluating(3000, 10000)
	frames := strings.Split(out.String(), "\r")[1:]
	want := []string{
		"epoch 1/3 [======>                       ] 1/4 loss 0.7500 64 samples/s eta 11s",
		"epoch 1/3 [==============================] 4/4 loss 0.6000 64 samples/s eta 4.0s",
		"epoch 1/3 [==============================] 4/4 evaluating 3,000/10,000 eta 6.0s",
	}
	if len(frames) != len(want) {
		t.Fatalf("frames %q, want %q", frames, want)
	}
	for i := range want {
		if strings.TrimRight(frames[i], " ") != want[i] {
			t.Errorf("frame %d %q, want %q", i, frames[i], want[i])
		}
	}
	p.endEpoch()
	if !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("the epoch's line is not ended: %q", out.String())
	}
	n := out.Len()
	p.close()
	if out.Len() != n {
		t.Errorf("close after endEpoch wrote %q", out.String()[n:])
	}
	clk.at(4)
	p.step(1, 1, 0.5, 64)
	p.close()
	if !strings.HasSuffix(out.String(), "\n") || !strings.Contains(out.String(), "epoch 2/3 [") {
		t.Errorf("close does not end a frame left mid-epoch: %q", out.String())
	}
}

// TestProgressTerminalWidth: a frame longer than the terminal is cut, since a
// wrapped line would break the next "\r".
func TestProgressTerminalWidth(t *testing.T) {
	clk := newFakeClock()
	var out bytes.Buffer
	p := startProgress(&out, true, 40, clk.now, 3, 4, 0, 0)
	clk.at(1)
	p.step(0, 1, 0.75, 64)
	if got := out.String(); got != "\r"+"epoch 1/3 [======>                       ]"[:39] {
		t.Errorf("frame %q", got)
	}
}

// TestNewProgress: disabled or without a writer it is nil (and a nil progress
// does nothing); a pipe is not a terminal.
func TestNewProgress(t *testing.T) {
	if p := newProgress(os.Stderr, false, 1, 1, 0, 0); p != nil {
		t.Error("disabled progress is not nil")
	}
	var p *progress
	p.step(0, 1, 0, 0)
	p.evaluating(1, 2)
	p.endEpoch()
	p.close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if p := newProgress(w, true, 1, 1, 0, 0); p == nil || p.terminal {
		t.Errorf("progress on a pipe: %+v, want a plain one", p)
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{4200 * time.Millisecond, "4.2s"},
		{16 * time.Second, "16s"},
		{59600 * time.Millisecond, "1m00s"},
		{250 * time.Second, "4m10s"},
		{2*time.Hour + 5*time.Minute + 29*time.Second, "2h05m"},
	} {
		if got := formatDuration(tc.d); got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
	if got := commas(int64(10079600010)); got != "10,079,600,010" { // past a 32-bit int
		t.Errorf("commas(10079600010) = %q", got)
	}
}
