package train

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/problem"
	"github.com/gradwire/gradwire/internal/version"
)

// A hook is one concern of the training loop (a check, an output, the
// checkpoints) that acts after every step and every epoch. Each hook keeps its
// own state; what it needs from the loop comes in the stepDone and epochDone
// it is handed, which it must not change. The loop calls the hooks in a fixed
// order, so that a check (divergence) stops the run before a later hook
// records the step or checkpoints it.
type hook interface {
	afterStep(s *stepDone) error
	afterEpoch(e *epochDone) error
	// end runs once when the loop returns, error or not.
	end() error
}

// stepDone is where the run stands after an optimizer step.
type stepDone struct {
	epoch, step int // 0-based epoch, and the step's 0-based index in it
	globalStep  int // steps taken, this one included
	loss, lr    float64
	// Where this process started the epoch (a resumed run starts inside
	// one), for rates.
	firstStep  int
	epochStart time.Time
}

// epochDone is where the run stands after an epoch's buffers were averaged and,
// on rank 0, its evaluation was run.
type epochDone struct {
	pos position // at the epoch's end: epochs completed, steps, totals
	// trainLoss is the epoch's mean training loss, the same on every rank
	// (each step's loss is the mean over all workers).
	trainLoss float64
	eval      *evalResult  // nil on ranks other than 0, which do not evaluate
	res       *EpochResult // the epoch's record; nil with eval
}

// runHooks calls f on every hook in order, stopping at the first error.
func runHooks(hooks []hook, f func(hook) error) error {
	for _, h := range hooks {
		if err := f(h); err != nil {
			return err
		}
	}
	return nil
}

// noHook gives a hook the methods it does not need.
type noHook struct{}

func (noHook) afterStep(*stepDone) error   { return nil }
func (noHook) afterEpoch(*epochDone) error { return nil }
func (noHook) end() error                  { return nil }

// divergence stops the run when a step's mean training loss passes
// train.max_loss (by default 100 x ln(classes)), or an epoch's test loss is not
// finite.
type divergence struct {
	noHook
	max      float64
	bound    string // why max is the bound, for the message
	engine   *dist.Engine
	lastGood func() int // the step of the newest checkpoint, the resume point
}

func newDivergence(maxLoss float64, classes int, engine *dist.Engine, lastGood func() int) *divergence {
	d := &divergence{max: maxLoss, engine: engine, lastGood: lastGood}
	if maxLoss > 0 {
		d.bound = fmt.Sprintf("is above train.max_loss %v", maxLoss)
	} else {
		d.max = 100 * math.Log(float64(max(2, classes)))
		d.bound = fmt.Sprintf("is above %.4g = 100 x ln(%d classes) (train.max_loss)", d.max, classes)
	}
	return d
}

func (d *divergence) afterStep(s *stepDone) error {
	if d.exceeded(s.loss) {
		return d.diverged(d.explodingLoss(s.epoch, s.step, s.loss))
	}
	return nil
}

// exceeded reports whether a step's mean training loss stops the run: above
// the bound, or not finite (NaN compares false with everything).
func (d *divergence) exceeded(loss float64) bool { return !(loss <= d.max) }

// why says what is wrong with a loss that exceeded the bound.
func (d *divergence) why(loss float64) string {
	if !problem.Finite(loss) {
		return "is not finite"
	}
	return d.bound
}

// afterEpoch judges the test loss by finiteness alone. The training loss
// passed the bound at every step; the evaluated network can differ from the
// trained one: BatchNorm's running statistics describe the weights before the
// last update, so right after a violent one the test loss can be far above the
// bound for a network much less broken (ResNet-20, SGD at lr 6.4, batch 8192:
// test loss 3.6e7 where the same weights on their batches' statistics had a
// training loss of 7.3). Whether the run learns is left to the training
// loss's bound and the stall rule.
func (d *divergence) afterEpoch(e *epochDone) error {
	if e.eval != nil && !problem.Finite(e.eval.loss) {
		return d.diverged(fmt.Errorf("epoch %d (step %d): test loss %v over %d examples is not finite",
			e.pos.epoch, e.pos.globalStep, e.eval.loss, e.eval.examples))
	}
	return nil
}

// diverged marks a training failure as divergence and names the resume point.
func (d *divergence) diverged(err error) error {
	if last := d.lastGood(); last > 0 {
		return fmt.Errorf("diverged: %w; the last good checkpoint (step %d) stays the resume point, resuming repeats the divergence unless the config changes (--allow-change)", err, last)
	}
	return fmt.Errorf("diverged: %w", err)
}

// explodingLoss names the worker with the largest loss of a step whose mean
// loss passed the bound.
func (d *divergence) explodingLoss(epoch, step int, mean float64) error {
	losses, err := d.engine.WorkerLosses()
	if err != nil {
		return fmt.Errorf("epoch %d step %d: loss %v %s", epoch+1, step+1, mean, d.why(mean))
	}
	worst := 0
	for w, l := range losses {
		if !(l <= losses[worst]) {
			worst = w
		}
	}
	return fmt.Errorf("epoch %d step %d: worker %d: loss %v (mean over workers %v) %s",
		epoch+1, step+1, worst, losses[worst], mean, d.why(mean))
}

// stallFraction of ln(classes), a uniform guess's loss, is the training loss
// at or above which an epoch counts as stalled. With label smoothing the
// loss cannot go below the smoothed targets' entropy, so the bound is that
// fraction of the way from the entropy to ln(classes).
const stallFraction = 0.99

// stall stops a run whose mean training loss is no better than a uniform
// guess in more than half of the last train.stall_epochs epochs, all of them
// after the learning-rate warm-up: a network that died (every ReLU off, say)
// or never started to learn, which would otherwise train on to its last
// epoch. A majority rather than every epoch, because a network that diverged
// at a high rate and lost what it had learned wanders around a uniform
// guess's loss (2.26, 3.89, 2.53, 2.19, ... for 10 classes) instead of
// sitting above it; one epoch above it among good ones is not enough. It
// runs after the epoch's record and checkpoint are written, so a resumed run
// finds the stalled epochs in its history and stops at once.
type stall struct {
	noHook
	need    int     // train.stall_epochs
	warmup  float64 // schedule.warmup_epochs: epochs up to it do not count
	bound   float64
	floor   float64 // the lowest training loss possible: the targets' entropy
	classes int
	first   int       // the first epoch (1-based) of the window
	losses  []float64 // the training losses of the last need epochs after the warm-up
}

// newStall starts from the run's epochs so far (a resumed run's history);
// smoothing is model.label_smoothing.
func newStall(need int, warmup float64, classes int, smoothing float64, history []EpochResult) *stall {
	s := &stall{need: need, warmup: warmup, classes: max(2, classes)}
	s.floor = targetEntropy(s.classes, smoothing)
	s.bound = s.floor + stallFraction*(math.Log(float64(s.classes))-s.floor)
	for _, e := range history {
		s.count(e.Epoch, e.TrainLoss)
	}
	return s
}

// targetEntropy is the entropy of a label-smoothed target row,
// (1-e)·onehot + e/classes: the cross-entropy a perfect prediction of it has.
func targetEntropy(classes int, smoothing float64) float64 {
	if smoothing == 0 {
		return 0
	}
	off := smoothing / float64(classes)
	on := 1 - smoothing + off
	return -on*math.Log(on) - float64(classes-1)*off*math.Log(off)
}

// count adds epoch's (1-based) training loss to the window of the last
// need epochs after the warm-up.
func (s *stall) count(epoch int, loss float64) {
	if float64(epoch) <= s.warmup {
		s.losses = s.losses[:0]
		return
	}
	if len(s.losses) == 0 {
		s.first = epoch
	}
	s.losses = append(s.losses, loss)
	if over := len(s.losses) - max(s.need, 1); over > 0 {
		s.losses = s.losses[over:]
		s.first += over
	}
}

// stalled is how many epochs of the window had a loss at or above the bound
// (a NaN loss is divergence's, not a stall).
func (s *stall) stalled() int {
	n := 0
	for _, l := range s.losses {
		if l >= s.bound {
			n++
		}
	}
	return n
}

// check returns the stall error once more than half of a full window of
// need epochs have stalled.
func (s *stall) check() error {
	if s.need <= 0 || len(s.losses) < s.need || 2*s.stalled() <= s.need {
		return nil
	}
	losses := make([]string, len(s.losses))
	for i, l := range s.losses {
		losses[i] = fmt.Sprintf("%.4f", l)
	}
	bound := fmt.Sprintf("%.4f = %.2f x ln(%d classes)", s.bound, stallFraction, s.classes)
	if s.floor > 0 {
		bound = fmt.Sprintf("%.4f, %.2f of the way from the label-smoothed targets' entropy %.4f to ln(%d classes)", s.bound, stallFraction, s.floor, s.classes)
	}
	return fmt.Errorf("stalled: epochs %d-%d after the learning-rate warm-up had mean training losses of %s, %d of %d at or above %s, no better than a uniform guess (train.stall_epochs %d: more than half of the last %d epochs); resuming repeats the stall unless the config changes (--allow-change)",
		s.first, s.first+len(s.losses)-1, strings.Join(losses, ", "), s.stalled(), len(s.losses), bound, s.need, s.need)
}

func (s *stall) afterEpoch(e *epochDone) error {
	s.count(e.pos.epoch, e.trainLoss)
	return s.check()
}

// agreement checks every dist.check_every steps that all replicas hold the
// same parameters.
type agreement struct {
	noHook
	engine *dist.Engine
	every  int
}

func (a *agreement) afterStep(s *stepDone) error {
	if s.globalStep%a.every == 0 {
		return a.engine.CheckAgreement(s.globalStep)
	}
	return nil
}

// metricsLog appends the step (every train.log_every steps) and epoch records
// to metrics.jsonl (rank 0). Each record is flushed at once, so that a long
// run's progress can be followed in the file, and a checkpoint can note the
// file's size.
type metricsLog struct {
	f        *os.File
	w        *bufio.Writer
	logEvery int
}

// openMetrics opens metrics.jsonl for appending, cut back to the size it had at
// the checkpoint being resumed (records after it belong to lost work).
func openMetrics(dir string, offset int64, logEvery int) (*metricsLog, error) {
	path := filepath.Join(dir, "metrics.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || st.Size() < offset {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s holds %d bytes, fewer than the %d the checkpoint recorded: it was cut or replaced since (restore it, or start the run again with --overwrite)", path, st.Size(), offset)
		}
		return nil, err
	}
	if err := f.Truncate(offset); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &metricsLog{f: f, w: bufio.NewWriter(f), logEvery: logEvery}, nil
}

func (m *metricsLog) afterStep(s *stepDone) error {
	if s.globalStep%m.logEvery != 0 {
		return nil
	}
	return m.record(stepRecord{Kind: "step", Epoch: s.epoch + 1, Step: s.globalStep, Loss: s.loss, LR: s.lr})
}

func (m *metricsLog) afterEpoch(e *epochDone) error {
	if e.res == nil {
		return nil
	}
	return m.record(*e.res)
}

// record writes one JSON line and flushes it.
func (m *metricsLog) record(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m.w.Write(b)
	if err := m.w.WriteByte('\n'); err != nil {
		return err
	}
	return m.w.Flush()
}

// offset is the size of the file with every record written: where a resume
// from a checkpoint taken now cuts it back to.
func (m *metricsLog) offset() (int64, error) {
	if err := m.w.Flush(); err != nil {
		return 0, err
	}
	return m.f.Seek(0, io.SeekCurrent)
}

func (m *metricsLog) end() error {
	// Close's error counts too: on some file systems a failed write shows only there.
	return errors.Join(m.w.Flush(), m.f.Close())
}

// progressHook drives the progress display (rank 0, train.progress).
type progressHook struct {
	p           *progress
	globalBatch int
}

func (h *progressHook) afterStep(s *stepDone) error {
	rate := float64((s.step+1-s.firstStep)*h.globalBatch) / time.Since(s.epochStart).Seconds()
	h.p.step(s.epoch, s.step+1, s.loss, rate)
	return nil
}

// afterEpoch does nothing: evaluate reports its progress and ends the epoch's
// line, before the other hooks' checks.
func (h *progressHook) afterEpoch(*epochDone) error { return nil }

func (h *progressHook) end() error {
	h.p.close()
	return nil
}

// epochLog writes the epoch line of the run's log (rank 0).
type epochLog struct {
	noHook
	log *slog.Logger
}

func (l *epochLog) afterEpoch(e *epochDone) error {
	res := e.res
	if res == nil {
		return nil
	}
	attrs := []any{"epoch", res.Epoch, "train_loss", fmt.Sprintf("%.4f", res.TrainLoss)}
	switch {
	case res.ValBPC != nil && res.ValLoss != nil:
		// The corpus's test split (its last 10%) beside a validation split
		// held out of the training part: the two must not share a name.
		attrs = append(attrs, "test_loss", fmt.Sprintf("%.4f", res.TestLoss), "test_bpc", fmt.Sprintf("%.4f", *res.ValBPC))
	case res.ValBPC != nil:
		attrs = append(attrs, "val_loss", fmt.Sprintf("%.4f", res.TestLoss), "val_bpc", fmt.Sprintf("%.4f", *res.ValBPC))
	default:
		attrs = append(attrs, "test_loss", fmt.Sprintf("%.4f", res.TestLoss), "test_accuracy", fmt.Sprintf("%.4f", *res.TestAccuracy))
	}
	if res.ValLoss != nil && res.ValAccuracy != nil {
		attrs = append(attrs, "val_loss", fmt.Sprintf("%.4f", *res.ValLoss), "val_accuracy", fmt.Sprintf("%.4f", *res.ValAccuracy))
	}
	l.log.Info("epoch", append(attrs, "epoch_time", formatDuration(time.Duration(res.Seconds*float64(time.Second))),
		"samples_per_s", fmt.Sprintf("%.0f", res.SamplesPerSecond),
		"eval_time", formatDuration(time.Duration(res.EvalSeconds*float64(time.Second))))...)
	return nil
}

// checkpointer writes the checkpoints: at every epoch end, and inside an epoch
// when control finds one due or the run stops (mid). Every process calls it,
// so that all of them note the same checkpoint step; rank 0 writes the file.
type checkpointer struct {
	noHook
	j        *job        // what a checkpoint holds: model, optimizer, workers, config
	metrics  *metricsLog // rank 0: the records a resume keeps; nil elsewhere
	lastPath string      // the newest checkpoint's file (rank 0, or resumed from)
	// A checkpoint was written or resumed from at step j.lastCkptStep. Kept
	// on every process alike, unlike lastPath, so that all of them make the
	// same choice in mid.
	have bool
}

func (c *checkpointer) afterEpoch(e *epochDone) error {
	_, err := c.save(e.pos, nil)
	return err
}

// mid writes a checkpoint inside an epoch. The workers' exchange state and
// every replica's buffers are gathered first, collectively. It returns the
// newest checkpoint's path on rank 0 ("" elsewhere), without writing when no
// step was taken since it.
func (c *checkpointer) mid(p position) (string, error) {
	j := c.j
	if p.globalStep == j.lastCkptStep && c.have {
		return c.lastPath, nil
	}
	var err error
	if j.workers, err = j.gatherWorkers(); err != nil {
		return "", err
	}
	bufs, err := j.gatherWorkerBuffers()
	if err != nil {
		return "", err
	}
	return c.save(p, bufs)
}

// save writes a checkpoint on rank 0, keeps the newest train.keep_checkpoints
// (and the best), and notes the step on every process.
func (c *checkpointer) save(p position, workerBuffers [][][]float32) (string, error) {
	j := c.j
	j.lastCkptStep, j.lastCkptTime, c.have = p.globalStep, time.Now(), true
	if !j.rank0 {
		return "", nil
	}
	off, err := c.metrics.offset()
	if err != nil {
		return "", err
	}
	ck := newCheckpoint(version.String(), j.net, j.opt)
	ck.Epoch, ck.StepInEpoch, ck.GlobalStep, ck.MetricsOffset = p.epoch, p.step, p.globalStep, off
	ck.LossSum, ck.EpochSeconds, ck.Elapsed, ck.Samples, ck.Epochs = p.lossSum, p.seconds, p.elapsed, p.samples, p.epochs
	ck.Workers, ck.ReplicaBuffers = j.workers, workerBuffers
	ck.Config, ck.DataDigest = configs.Flat(j.cfg), j.dataDigest
	path := checkpointPath(j.opts.OutDir, p.globalStep)
	if err := saveCheckpoint(path, ck); err != nil {
		return "", err
	}
	c.lastPath = path
	if err := pruneCheckpoints(j.opts.OutDir, j.cfg.Train.KeepCheckpoints); err != nil {
		return "", err
	}
	return path, nil
}
