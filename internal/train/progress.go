package train

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// progress reports a run's progress on stderr. On a terminal it redraws one
// line ("\r" frames): a bar for the epoch's steps, which stays while the epoch
// is evaluated. Elsewhere (a log file, a pipe) it writes a plain line every
// lineEvery, so that a log holds no carriage-return frames.
//
// The ETA is for the whole run: the remaining training steps at the measured
// seconds per step, plus the remaining evaluations at the measured seconds per
// evaluated example (unknown, so left out, until the first evaluation starts).
//
// A nil *progress does nothing, so callers need not check whether it is on.
// It is used from one goroutine.
type progress struct {
	w        io.Writer
	terminal bool
	width    int // terminal columns; 0 when unknown
	now      func() time.Time

	epochs, stepsPerEpoch int
	startSteps            int // steps done before this process started (resume)

	// Where the run is: epoch index (0-based), steps done in it, and the latest
	// figures shown.
	epoch, stepsDone int
	loss, rate       float64
	evalDone         int
	evalTotal        int // examples per evaluation; 0 until the first one starts
	inEval           bool

	// Time attribution: mark is when the last call was made; the time since
	// then belongs to the phase the call ends (training or evaluation).
	mark         time.Time
	trainSeconds float64
	evalSeconds  float64
	evalExamples int // examples evaluated in evalSeconds
	evalBase     int // evalExamples before the current evaluation

	lastFrame time.Time // terminal: when the last frame was drawn
	frameLen  int       // terminal: length of the last frame, to blank its rest
	lastLine  time.Time // plain: when the last line was written
	open      bool      // terminal: a frame is on the line, not yet ended by a newline
}

const (
	// frameEvery throttles terminal redraws; faster than the eye is wasted work.
	frameEvery = 200 * time.Millisecond
	// lineEvery is the interval between plain lines: often enough to follow a
	// run in its log, rarely enough that an epoch is a handful of lines.
	lineEvery = 30 * time.Second
)

// newProgress returns the progress display for a run of epochs x stepsPerEpoch
// steps that resumes after startEpoch whole epochs and startStep steps of the
// next; nil when it is disabled or w is nil. A terminal is recognised when w
// is an *os.File on one.
func newProgress(w io.Writer, enabled bool, epochs, stepsPerEpoch, startEpoch, startStep int) *progress {
	if !enabled || w == nil {
		return nil
	}
	terminal, width := terminalWidth(w)
	return startProgress(w, terminal, width, time.Now, epochs, stepsPerEpoch, startEpoch, startStep)
}

// startProgress is newProgress with the terminal decision and the clock given.
func startProgress(w io.Writer, terminal bool, width int, now func() time.Time, epochs, stepsPerEpoch, startEpoch, startStep int) *progress {
	t := now()
	return &progress{
		w: w, terminal: terminal, width: width, now: now,
		epochs: epochs, stepsPerEpoch: stepsPerEpoch,
		startSteps: startEpoch*stepsPerEpoch + startStep,
		epoch:      startEpoch, stepsDone: startStep,
		mark: t, lastLine: t,
	}
}

// terminalWidth reports whether w is a terminal, and its width when known.
func terminalWidth(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return true, width
}

// step records that stepsDone steps of epoch (0-based) are done, with the
// latest step's loss and the epoch's samples per second so far.
func (p *progress) step(epoch, stepsDone int, loss, samplesPerSec float64) {
	if p == nil {
		return
	}
	t := p.now()
	p.account(t)
	p.epoch, p.stepsDone, p.loss, p.rate = epoch, stepsDone, loss, samplesPerSec
	p.show(t, stepsDone == p.stepsPerEpoch)
}

// evaluating records that done of total examples of the current epoch's
// evaluation are done.
func (p *progress) evaluating(done, total int) {
	if p == nil {
		return
	}
	t := p.now()
	p.account(t)
	if !p.inEval {
		p.inEval, p.evalBase = true, p.evalExamples
	}
	p.evalDone, p.evalTotal = done, total
	p.evalExamples = p.evalBase + done
	p.show(t, done == total)
}

// endEpoch ends the epoch's line (terminal) and starts the next epoch's timing.
func (p *progress) endEpoch() {
	if p == nil {
		return
	}
	t := p.now()
	p.account(t)
	if p.terminal {
		p.draw(t)
		p.endLine()
	}
	p.inEval = false
	p.epoch, p.stepsDone = p.epoch+1, 0
}

// close ends a frame left on the terminal line (by an error or a cancelled
// run mid-epoch), so that what is written next starts on a line of its own.
func (p *progress) close() {
	if p == nil {
		return
	}
	p.endLine()
}

// account gives the time since the last call to the phase it ends.
func (p *progress) account(t time.Time) {
	d := t.Sub(p.mark).Seconds()
	if p.inEval {
		p.evalSeconds += d
	} else {
		p.trainSeconds += d
	}
	p.mark = t
}

// show draws a frame or writes a line when its interval has passed, or a
// terminal frame at once when final (the last step or example).
func (p *progress) show(t time.Time, final bool) {
	if p.terminal {
		if final || p.lastFrame.IsZero() || t.Sub(p.lastFrame) >= frameEvery {
			p.draw(t)
		}
		return
	}
	if t.Sub(p.lastLine) >= lineEvery {
		p.lastLine = t
		fmt.Fprintln(p.w, p.text(false))
	}
}

// draw redraws the terminal line, blanking what is left of a longer frame.
func (p *progress) draw(t time.Time) {
	s := p.text(true)
	if p.width > 1 && len(s) > p.width-1 {
		s = s[:p.width-1] // a wrapped line would break the next "\r"
	}
	pad := max(0, p.frameLen-len(s))
	fmt.Fprint(p.w, "\r"+s+strings.Repeat(" ", pad))
	p.frameLen, p.lastFrame, p.open = len(s), t, true
}

func (p *progress) endLine() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open, p.frameLen = false, 0
	}
}

// text is the line shown: with a bar on a terminal, with "step n/m" otherwise.
func (p *progress) text(bar bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d/%d ", p.epoch+1, p.epochs)
	if bar {
		b.WriteString(progressBar(p.stepsDone, p.stepsPerEpoch, 30))
		fmt.Fprintf(&b, " %s/%s", commas(p.stepsDone), commas(p.stepsPerEpoch))
	} else {
		fmt.Fprintf(&b, "step %s/%s", commas(p.stepsDone), commas(p.stepsPerEpoch))
	}
	if p.inEval {
		fmt.Fprintf(&b, " evaluating %s/%s", commas(p.evalDone), commas(p.evalTotal))
	} else if p.stepsDone > 0 {
		fmt.Fprintf(&b, " loss %.4f %s samples/s", p.loss, commas(int(p.rate+0.5)))
	}
	if eta, ok := p.eta(); ok {
		b.WriteString(" eta " + formatDuration(eta))
	}
	return b.String()
}

// eta estimates the time left in the run; false before any step was timed.
func (p *progress) eta() (time.Duration, bool) {
	done := p.epoch*p.stepsPerEpoch + p.stepsDone
	timed := done - p.startSteps
	if timed <= 0 || p.trainSeconds <= 0 {
		return 0, false
	}
	left := float64(p.epochs*p.stepsPerEpoch-done) * p.trainSeconds / float64(timed)
	if p.evalTotal > 0 && p.evalExamples > 0 && p.evalSeconds > 0 {
		// Evaluations yet to run: this epoch's (or what is left of it), then
		// one per later epoch.
		examples := (p.epochs - p.epoch) * p.evalTotal
		if p.inEval {
			examples = (p.epochs-p.epoch-1)*p.evalTotal + p.evalTotal - p.evalDone
		}
		left += float64(examples) * p.evalSeconds / float64(p.evalExamples)
	}
	return time.Duration(left * float64(time.Second)), true
}

// progressBar draws done/total as [=====>    ] with width cells inside.
func progressBar(done, total, width int) string {
	fill := 0
	if total > 0 {
		fill = min(width, done*width/total)
	}
	bar := strings.Repeat("=", fill)
	if fill < width {
		if fill > 0 {
			bar = bar[:fill-1] + ">"
		}
		bar += strings.Repeat(" ", width-fill)
	}
	return "[" + bar + "]"
}

// commas writes n with thousands separators: 1234567 -> "1,234,567".
func commas[T int | int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// formatDuration writes d for people, at the precision that matters at its
// size: "4.2s", "16s", "4m10s", "2h05m".
func formatDuration(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	r := d.Round(time.Second)
	switch {
	case r < time.Minute:
		return fmt.Sprintf("%ds", int(r/time.Second))
	case r < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(r/time.Minute), int(r%time.Minute/time.Second))
	}
	r = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(r/time.Hour), int(r%time.Hour/time.Minute))
}
