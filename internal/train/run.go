// Package train runs a training job from a resolved config: data, model,
// optimizer, schedule, the epoch loop, evaluation, checkpoints and the run's
// output files.
package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Options are what the train command passes in besides the config.
type Options struct {
	OutDir    string // run directory; created if missing
	Resume    bool   // continue from the last checkpoint in OutDir
	Overwrite bool   // a fresh run into a folder holding another run removes that run's files first
	// AllowChange names the keys (and "data" for the data files) a resumed run
	// may have changed since its checkpoint; any other change is refused.
	AllowChange []string
	Log         *slog.Logger // progress messages (stderr); nil = discard
	Stderr      io.Writer    // where the progress bar goes; nil = no bar
}

// Interrupted is the error of a run stopped by its context (Ctrl-C, SIGTERM). It
// wraps the context's error.
type Interrupted struct {
	Dir        string
	Checkpoint string // the checkpoint written at the step it stopped; "" when none could be
	Epoch      int    // the epoch it stopped in (1-based)
	Step       int    // optimizer steps taken
	Cause      error
}

func (e *Interrupted) Error() string {
	if e.Checkpoint == "" {
		return fmt.Sprintf("interrupted at epoch %d after %d steps: %v", e.Epoch, e.Step, e.Cause)
	}
	return fmt.Sprintf("interrupted at epoch %d after %d steps; checkpoint %s written", e.Epoch, e.Step, e.Checkpoint)
}

func (e *Interrupted) Unwrap() error { return e.Cause }

// job is one run's state.
type job struct {
	cfg     configs.Config
	opts    Options
	log     *slog.Logger
	train   data.Dataset
	test    data.Dataset
	val     data.Dataset // held out of the training split by data.validation; nil when off
	aug     *data.Augmenter
	net     *models.Net   // replica 0: the parameters the optimizer updates, evaluation
	nets    []*models.Net // every replica
	engine  *dist.Engine
	mem     memoryPlan        // checkRunMemory's figures, for the fused passes' graphs
	world   dist.Collective   // the process-level collective; nil for the local backend
	members []dist.Collective // this process's logical workers
	rank0   bool              // this process writes outputs (always true for the local backend)
	opt     optim.Optimizer
	sched   *optim.Schedule
	sampler *data.Sampler

	globalBatch   int
	stepsPerEpoch int
	dir           *runDir    // the run directory, owned by this process (rank 0)
	dataDir       string     // the data folder the files were read from
	dataDigest    string     // data.Source digest of the files read
	inStep        bool       // set-up is over: the ranks may no longer fail together
	ctlFlags      [2]float32 // control's stop and checkpoint flags, all-reduced under MPI
	// The newest checkpoint written or resumed from, the same on every
	// process: its global step and when it was written (for
	// train.checkpoint_minutes).
	lastCkptStep int
	lastCkptTime time.Time

	batch     batchBuffers
	ps        *psState // the asynchronous parameter server (dist.mode ps); nil otherwise
	computeS  float64
	computeN  int
	workers   []workerState // every logical worker's exchange state at the last epoch end
	exchanges []*compress.Exchange

	lp *LayerParallelSummary // train.mode layer_parallel; nil otherwise
	// The last serial epoch of a layer_parallel run (lpSerialEpoch).
	lastEpoch EpochResult
	lastEval  *evalResult
	lastRes   *EpochResult

	// What the MPI ranks must agree on besides the config and the build
	// (data.digest); set before setupWorkers.
	fingerprint map[string]string
}

// Run trains according to cfg and writes the run directory. It returns the summary
// (nil on MPI ranks other than 0, which write nothing).
func Run(ctx context.Context, cfg configs.Config, opts Options) (sum *Summary, err error) {
	j := &job{cfg: cfg, opts: opts, log: opts.Log}
	if j.log == nil {
		j.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	defer func() {
		// An error on some ranks only (a write on rank 0, say) would leave the
		// others waiting in a collective: end the whole job. Errors every rank
		// gets at once (set-up checks, an interrupt) end normally.
		var stopped *Interrupted
		if err != nil && j.inStep && j.world != nil && !errors.As(err, &stopped) {
			if a, ok := j.world.(dist.Aborter); ok {
				a.Abort(err)
			}
		}
		j.close()
	}()
	if err = j.setup(ctx); err != nil {
		return nil, err
	}
	j.inStep = true
	state := &checkpoint{}
	resumedFrom := ""
	if opts.Resume {
		if state, resumedFrom, err = j.resume(); err != nil {
			return nil, err
		}
	} else if j.rank0 {
		if err := cfg.WriteYAML(filepath.Join(opts.OutDir, "config.yaml")); err != nil {
			return nil, err
		}
	}
	if j.rank0 && cfg.Train.Checkpoint && resumedFrom == "" {
		// The parameters before the first step (a fresh run, or one
		// restarted from step 0), for gradwire measure.
		if err := saveInit(opts.OutDir, version.String(), j.net); err != nil {
			return nil, err
		}
	}
	hooks, err := j.hooks(state, resumedFrom)
	if err != nil {
		return nil, err
	}
	if cfg.Train.Mode == configs.TrainModeLayerParallel {
		sum, err = j.layerParallel(ctx, state, hooks)
	} else {
		sum, err = j.loop(ctx, state, hooks)
	}
	for _, h := range hooks.all {
		if herr := h.end(); err == nil && herr != nil {
			err = herr
		}
	}
	return sum, err
}

// loopHooks are the hooks of a run's loop, in the order they run: the checks
// first, so that a diverged step is neither recorded nor checkpointed, then the
// outputs, then the checkpoint (which notes the size of the records written
// before it). Two of them the loop also calls directly.
type loopHooks struct {
	all  []hook
	div  *divergence   // names the resume point when a step fails
	ckpt *checkpointer // mid-epoch checkpoints; nil with train.checkpoint off
	prog *progress     // which evaluate reports on too; nil when off
}

// hooks builds the loop's hooks from the position it starts at. Rank 0 alone
// writes records, logs epochs and shows progress.
func (j *job) hooks(st *checkpoint, resumedFrom string) (*loopHooks, error) {
	c := j.cfg
	// A run that stalled before it was resumed stops here, before any file
	// is opened.
	var stalled *stall
	if c.Train.StallEpochs > 0 {
		stalled = newStall(c.Train.StallEpochs, c.Schedule.WarmupEpochs, j.train.Classes(), c.Model.LabelSmoothing, st.Epochs)
		if err := stalled.check(); err != nil {
			return nil, err
		}
	}
	h := &loopHooks{div: newDivergence(c.Train.MaxLoss, j.train.Classes(), j.engine, func() int { return j.lastCkptStep })}
	h.all = []hook{h.div, &agreement{engine: j.engine, every: c.Dist.CheckEvery}}
	var metrics *metricsLog
	if j.rank0 {
		var err error
		if metrics, err = openMetrics(j.opts.OutDir, st.MetricsOffset, c.Train.LogEvery); err != nil {
			return nil, err
		}
		h.all = append(h.all, &epochLog{log: j.log}, metrics)
	}
	if c.Train.Checkpoint {
		h.ckpt = &checkpointer{j: j, metrics: metrics, lastPath: resumedFrom, have: resumedFrom != ""}
		h.all = append(h.all, h.ckpt)
	}
	if stalled != nil {
		// After the records and the checkpoint: the stalled epochs stay in
		// the run's history, where a resumed run finds them.
		h.all = append(h.all, stalled)
	}
	if j.rank0 && st.Epoch < c.Train.Epochs {
		h.prog = newProgress(j.opts.Stderr, c.Train.Progress, c.Train.Epochs, j.stepsPerEpoch, st.Epoch, st.StepInEpoch)
		h.all = append(h.all, &progressHook{p: h.prog, globalBatch: j.globalBatch})
	}
	return h, nil
}

// resume loads the newest checkpoint of the run directory into the model,
// optimizer and workers, after checking that the config and data are the ones
// it was made with.
func (j *job) resume() (*checkpoint, string, error) {
	state, path, skipped, err := latestCheckpoint(j.opts.OutDir, layoutOf(j.net, j.cfg.Dist.Workers, j.exchanges[0]))
	if errors.Is(err, errNoCheckpoint) {
		// Killed before its first checkpoint: nothing was kept, and the start is
		// a pure function of the config, so the run starts again from step 0.
		j.log.Info("resuming from the start: the run was stopped before its first checkpoint", "dir", j.opts.OutDir)
		return &checkpoint{}, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	for _, e := range skipped {
		j.log.Warn("skipping damaged checkpoint", "error", e)
	}
	if err := j.checkResumable(path, state); err != nil {
		return nil, "", err
	}
	if err := state.checkPosition(path, j.stepsPerEpoch); err != nil {
		return nil, "", err
	}
	if err := state.restore(path, j.net, j.opt); err != nil {
		return nil, "", err
	}
	j.engine.SyncReplicas()
	if state.ReplicaBuffers != nil {
		err = j.setWorkerBuffers(state.ReplicaBuffers)
	} else {
		err = j.setBuffers(state.Buffers)
	}
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := j.restoreWorkers(path, state.Workers); err != nil {
		return nil, "", err
	}
	j.lastCkptStep, j.lastCkptTime = state.GlobalStep, time.Now()
	j.log.Info("resuming", "checkpoint", path, "epochs_done", state.Epoch, "step", state.GlobalStep)
	return state, path, nil
}

// checkResumable refuses a checkpoint whose run differs from the config being
// resumed in a key that changes the maths, or whose data files were replaced,
// unless the user allowed those changes.
func (j *job) checkResumable(path string, st *checkpoint) error {
	allowed := map[string]bool{}
	for _, k := range j.opts.AllowChange {
		allowed[k] = true
	}
	changed := configChanges(st.Config, configs.Flat(j.cfg), configs.Flat(configs.Default()), allowed)
	if !allowed["data"] && st.DataDigest != j.dataDigest {
		changed = append(changed, fmt.Sprintf("data (the files in %s differ from those the checkpoint was trained on)", j.dataDir))
	}
	if len(changed) > 0 {
		return fmt.Errorf("resume %s: the run changed since checkpoint %s:\n  %s\nrestore them, or accept the change with --allow-change KEY (\"data\" for the data files)",
			j.opts.OutDir, filepath.Base(path), strings.Join(changed, "\n  "))
	}
	return nil
}

// configChanges lists the keys that change the maths and differ between a
// checkpoint's config and now's, except the allowed ones. A key the checkpoint
// lacks (written before the key existed) counts as unchanged while now holds
// its default, which reproduces the older version's behaviour.
func configChanges(ckpt, now, defaults map[string]string, allowed map[string]bool) []string {
	var changed []string
	for _, key := range configs.Keys() {
		if !configs.ChangesOutcome(key) || allowed[key] {
			continue
		}
		old, had := ckpt[key]
		if !had && now[key] == defaults[key] {
			continue
		}
		if old != now[key] {
			if !had {
				old = "(not set: written before the key existed)"
			}
			changed = append(changed, fmt.Sprintf("%s (checkpoint %s, config.yaml %s)", key, old, now[key]))
		}
	}
	return changed
}

// setup claims the run directory, opens the data, builds the model, optimizer
// and schedule. It returns early, with ctx's error, when ctx ends on the way.
func (j *job) setup(ctx context.Context) error {
	c := j.cfg
	dopts := data.Options{Name: c.Data.Name, Dir: c.Data.Dir, SeqLen: c.Data.SeqLen, Normalize: c.Data.Normalize}
	src, err := data.Sources(dopts)
	if err != nil {
		return err
	}
	j.dataDir, j.dataDigest = src.Dir, src.Digest()
	j.fingerprint = map[string]string{"data.digest": j.dataDigest}
	if err := j.setupWorkers(); err != nil {
		return err
	}
	if err := j.claimDir(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.train, j.test, err = data.OpenTrainTest(dopts); err != nil {
		return err
	}
	if c.Data.Augment {
		img, ok := j.train.(*data.Images)
		if !ok {
			return fmt.Errorf("data.augment: true needs an image data set, %s is not one", c.Data.Name)
		}
		if j.aug, err = data.NewCIFARAugmenter(c.Seed, img.XShape(), 4, true, img.PadFill()); err != nil {
			return fmt.Errorf("data.augment: %w", err)
		}
	}
	if c.Data.Validation > 0 {
		if j.train, j.val, err = holdOut(j.train, c.Data.Validation); err != nil {
			return err
		}
	}
	if c.Data.LabelNoise > 0 {
		if j.train, err = data.NewNoisyLabels(j.train, c.Data.LabelNoise, uint64(c.Seed)); err != nil {
			return fmt.Errorf("data.label_noise: %w", err)
		}
	}
	if c.Data.TrainLimit > 0 {
		if j.train, err = limitTrain(j.train, c.Data.TrainLimit); err != nil {
			return err
		}
	}
	j.globalBatch = c.WorkerBatch() * c.Dist.Workers
	j.sampler = data.NewSampler(j.train.Len(), c.Seed)
	j.stepsPerEpoch = j.sampler.StepsPerEpoch(j.globalBatch)
	if j.stepsPerEpoch == 0 {
		return fmt.Errorf("data.batch_size: global batch %d (batch_size %d x %d workers) is larger than the %d training examples%s",
			j.globalBatch, c.WorkerBatch(), c.Dist.Workers, j.train.Len(), heldOutNote(c.Data.Validation))
	}
	if c.Train.MaxSteps > 0 && c.Train.MaxSteps < j.stepsPerEpoch {
		j.stepsPerEpoch = c.Train.MaxSteps
	}
	evalBatch := c.Data.EvalBatchSize
	if evalBatch == 0 {
		evalBatch = 256
		if j.test.YLen() > 1 {
			evalBatch = c.WorkerBatch()
		}
	}
	in := models.Input{Shape: j.train.XShape(), Classes: j.train.Classes(), YLen: j.train.YLen()}
	// After the data are loaded (the memory left counts them), before the nets are built.
	if j.mem, err = checkRunMemory(c, in, evalBatch, j.replicaCount(), len(j.members)); err != nil {
		return err
	}
	if err := j.setupReplicas(ctx, in, evalBatch); err != nil {
		return err
	}
	if j.opt, err = optim.New(c.Optim); err != nil {
		return err
	}
	if err := j.fitOptimizer(j.opt); err != nil {
		return err
	}
	if j.sched, err = optim.NewSchedule(c.Schedule, c.Optim.LR, j.globalBatch, j.stepsPerEpoch, j.stepsPerEpoch*c.Train.Epochs); err != nil {
		return err
	}
	// Not an error: a quick trial often shortens train.epochs below a recipe's milestones.
	if c.Schedule.Name == "step" {
		for _, m := range c.Schedule.Milestones {
			if m >= float64(c.Train.Epochs) {
				j.log.Warn("schedule.milestones: a decay at or after the run's last epoch never applies",
					"milestone", m, "train.epochs", c.Train.Epochs)
			}
		}
	}
	j.batch = newBatchBuffers(j.engine.LocalWorkers(), c.WorkerBatch()*numel(in.Shape), c.WorkerBatch()*in.YLen)
	j.log.Info("model", "name", c.Model.Name, "params", j.net.NumParams(), "ops", c.Model.Ops,
		"blas", models.BLAS, "blas_core", models.BLASCoreType(), "op_workers", j.net.OpWorkers(), "eval_op_workers", j.net.EvalOpWorkers())
	j.log.Info("workers", "workers", c.Dist.Workers, "replicas", len(j.nets), "backend", c.Dist.Backend, "passes", j.engine.Passes())
	j.log.Info("data", "name", c.Data.Name, "dir", j.dataDir, "train", j.train.Len(), "validation", c.Data.Validation,
		"test", j.test.Len(), "global_batch", j.globalBatch, "steps_per_epoch", j.stepsPerEpoch)
	return ctx.Err()
}

// holdOut splits the training split into the examples the run trains on and
// the validation examples data.validation holds out (data.HoldOutOf: the same
// examples for every run of the data set, whatever its seed, workers or
// batch; a text corpus's last windows). Every MPI rank computes the same split: it is a function of
// data.validation and the training files, which the ranks compare at start.
func holdOut(full data.Dataset, k int) (train, val data.Dataset, err error) {
	if n := full.Len(); k >= n {
		return nil, nil, fmt.Errorf("data.validation: %d: must be below the %d examples of the %s training split, leaving examples to train on",
			k, n, full.Name())
	}
	trainIdx, valIdx, err := data.HoldOutOf(full, k)
	if err != nil {
		return nil, nil, fmt.Errorf("data.validation: %w", err)
	}
	t, err := data.NewSubset(full, trainIdx)
	if err != nil {
		return nil, nil, err
	}
	v, err := data.NewSubset(full, valIdx)
	if err != nil {
		return nil, nil, err
	}
	return t, v, nil
}

// heldOutNote says, in an error about the training set's size, how many
// examples data.validation took from it.
func heldOutNote(k int) string {
	if k == 0 {
		return ""
	}
	return fmt.Sprintf(" (after data.validation held %d out)", k)
}

// claimDir makes rank 0 the owner of the run directory (the other ranks write
// nothing) and removes temporary files a killed run left. Under MPI every rank
// learns whether rank 0 succeeded, so that all of them stop together.
func (j *job) claimDir() error {
	var err error
	if j.rank0 {
		if j.dir, err = claimRunDir(j.opts.OutDir, j.opts.Resume, j.opts.Overwrite); err == nil {
			var removed []string
			if removed, err = removeStaleTemps(j.opts.OutDir); err == nil && len(removed) > 0 {
				j.log.Info("removed temporary files of an interrupted write", "files", len(removed))
			}
		}
	}
	if j.world == nil {
		return err
	}
	flag := []float32{0}
	if err != nil {
		flag[0] = 1
	}
	if aerr := j.world.AllReduce(flag); aerr != nil {
		return errors.Join(err, aerr)
	}
	if err == nil && flag[0] != 0 {
		return fmt.Errorf("rank 0 could not take the run directory %s (its error names the cause)", j.opts.OutDir)
	}
	return err
}

// loop runs the remaining epochs, from the checkpoint's position (an epoch end
// or a step inside an epoch), calling the hooks after every step and epoch, and
// the checkpointer where control asks for a mid-epoch checkpoint.
func (j *job) loop(ctx context.Context, st *checkpoint, h *loopHooks) (*Summary, error) {
	c := j.cfg
	globalStep := st.GlobalStep
	elapsed, samples := st.Elapsed, st.Samples
	epochs := st.Epochs
	j.workers = st.Workers
	if j.lastCkptTime.IsZero() {
		j.lastCkptTime = time.Now()
	}
	for epoch := st.Epoch; epoch < c.Train.Epochs; epoch++ {
		perm := j.sampler.Permutation(epoch)
		first, lossSum, priorSeconds := 0, 0.0, 0.0
		if epoch == st.Epoch {
			first, lossSum, priorSeconds = st.StepInEpoch, st.LossSum, st.EpochSeconds
		}
		t0 := time.Now()
		var lr float64
		for step := first; step < j.stepsPerEpoch; step++ {
			stop, due, err := j.control(ctx, globalStep, step > first)
			if err != nil {
				return nil, err
			}
			if (stop || due) && (j.pipelined() || j.psAsync()) {
				// Gradients are in flight inside an epoch, and draining them
				// here would make the run depend on when checkpoints are
				// taken: these runs checkpoint at epoch ends only.
				if stop {
					return nil, &Interrupted{Dir: j.opts.OutDir, Epoch: epoch + 1, Step: globalStep,
						Cause: errors.Join(ctx.Err(), errors.New("dist.pipeline 2 and the asynchronous parameter server checkpoint at epoch ends only: a resume starts from the last epoch's checkpoint"))}
				}
				due = false
			}
			if stop || due {
				path := ""
				if h.ckpt != nil {
					path, err = h.ckpt.mid(position{epoch: epoch, step: step, globalStep: globalStep, lossSum: lossSum,
						seconds: priorSeconds + time.Since(t0).Seconds(), elapsed: elapsed, samples: samples, epochs: epochs})
				}
				if stop {
					return nil, &Interrupted{Dir: j.opts.OutDir, Checkpoint: path, Epoch: epoch + 1, Step: globalStep, Cause: errors.Join(ctx.Err(), err)}
				}
				if err != nil {
					return nil, err
				}
			}
			lr = j.sched.LR(globalStep)
			loss, err := j.trainStep(perm, epoch, step, globalStep, lr)
			if err != nil {
				return nil, h.div.diverged(fmt.Errorf("epoch %d step %d: %w", epoch+1, step+1, err))
			}
			lossSum += loss
			globalStep++
			done := stepDone{epoch: epoch, step: step, globalStep: globalStep, loss: loss, lr: lr, firstStep: first, epochStart: t0}
			if err := runHooks(h.all, func(k hook) error { return k.afterStep(&done) }); err != nil {
				return nil, err
			}
		}
		// The pipeline's last gradient is applied before the epoch's
		// evaluation and checkpoint, so that they hold no gradient in flight.
		if err := j.drain(lr); err != nil {
			return nil, h.div.diverged(fmt.Errorf("epoch %d: the pipeline's last update: %w", epoch+1, err))
		}
		trainSeconds := priorSeconds + time.Since(t0).Seconds()
		elapsed += trainSeconds
		samples += int64(j.stepsPerEpoch * j.globalBatch)

		// Every replica's BatchNorm statistics saw different slices: average them
		// (over all processes) before evaluating and checkpointing.
		if err := j.averageBuffers(); err != nil {
			return nil, err
		}
		var err error
		if j.workers, err = j.gatherWorkers(); err != nil {
			return nil, err
		}
		done := epochDone{trainLoss: lossSum / float64(j.stepsPerEpoch)}
		if j.rank0 {
			ev, res, err := j.evalEpoch(h.prog, epoch, globalStep, lr, lossSum, trainSeconds)
			if err != nil {
				return nil, err
			}
			done.eval, done.res = &ev, &res
			epochs = append(epochs, res)
		}
		done.pos = position{epoch: epoch + 1, globalStep: globalStep, elapsed: elapsed, samples: samples, epochs: epochs}
		if err := runHooks(h.all, func(k hook) error { return k.afterEpoch(&done) }); err != nil {
			return nil, err
		}
	}
	if !j.rank0 {
		return nil, nil
	}
	return j.summary(globalStep, elapsed, samples, epochs)
}

// evalEpoch evaluates the model at the end of an epoch and makes the epoch's
// record, with the evaluation's time.
func (j *job) evalEpoch(prog *progress, epoch, globalStep int, lr, lossSum, trainSeconds float64) (evalResult, EpochResult, error) {
	t0 := time.Now()
	ev, val, err := j.evaluate(prog)
	if err != nil {
		return ev, EpochResult{}, fmt.Errorf("epoch %d: evaluation: %w", epoch+1, err)
	}
	res := j.epochResult(ev, val, epoch, globalStep, lr, lossSum, trainSeconds)
	res.EvalSeconds = time.Since(t0).Seconds()
	return ev, res, nil
}

// epochResult is the metrics record of an epoch; val is the validation
// split's evaluation, nil when data.validation is off.
func (j *job) epochResult(ev evalResult, val *evalResult, epoch, globalStep int, lr, lossSum, trainSeconds float64) EpochResult {
	res := EpochResult{Kind: "epoch", Epoch: epoch + 1, Step: globalStep, LR: lr, TrainLoss: lossSum / float64(j.stepsPerEpoch),
		TestLoss: ev.loss, Seconds: trainSeconds, SamplesPerSecond: float64(j.stepsPerEpoch*j.globalBatch) / trainSeconds}
	if j.isLM() {
		bpc := ev.loss / math.Ln2
		res.ValBPC = &bpc
	} else {
		acc := ev.accuracy
		res.TestAccuracy = &acc
	}
	if val != nil {
		loss, acc := val.loss, val.accuracy
		res.ValLoss, res.ValAccuracy = &loss, &acc
	}
	j.psRecord(&res)
	return res
}

// summary writes summary.json (rank 0) for a finished run.
func (j *job) summary(globalStep int, elapsed float64, samples int64, epochs []EpochResult) (*Summary, error) {
	c := j.cfg
	if len(epochs) == 0 {
		return nil, errors.New("no epoch was run")
	}
	last := epochs[len(epochs)-1]
	sum := &Summary{
		Name: c.Name, Model: c.Model.Name, Dataset: c.Data.Name, DataDir: j.dataDir, Epochs: c.Train.Epochs, Steps: globalStep,
		GlobalBatch: j.globalBatch, Workers: c.Dist.Workers, Replicas: len(j.nets), Backend: c.Dist.Backend,
		Optimizer: c.Optim.Name, Compressor: c.Compress.Name,
		Seed: c.Seed, Version: version.String(), GoVersion: version.GoVersion(), BLAS: models.BLAS,
		BLASCore: models.BLASCoreType(), Ops: c.Model.Ops, Precision: c.Model.Precision,
		Machine: version.Machine(),
		Params:  j.net.NumParams(), TestAccuracy: last.TestAccuracy, TestLoss: last.TestLoss, ValBPC: last.ValBPC,
		ValLoss: last.ValLoss, ValAccuracy: last.ValAccuracy,
		TestExamples: j.evalExamples(), TrainLossFinal: last.TrainLoss, WallSeconds: elapsed, SamplesPerSecond: float64(samples) / elapsed,
	}
	sum.EvalSeconds = evalSeconds(epochs)
	sum.OptimizerStateBytesPerParam = float64(optim.StateBytes(j.opt)) / float64(j.net.NumParams())
	sum.LayerParallel = j.lp
	j.fillTraffic(sum, j.workers)
	if err := writeJSON(filepath.Join(j.opts.OutDir, "summary.json"), sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// control decides, the same way on every process, whether the run stops here
// (its context ended) and whether a mid-epoch checkpoint is due (train.
// checkpoint_every steps or checkpoint_minutes since the last one). moved says
// whether a step was taken since the loop (re)started, so that a resumed run
// does not rewrite the checkpoint it started from.
func (j *job) control(ctx context.Context, globalStep int, moved bool) (stop, due bool, err error) {
	t := j.cfg.Train
	flags := j.ctlFlags[:] // reused: this runs every step
	flags[0], flags[1] = 0, 0
	if ctx.Err() != nil {
		flags[0] = 1
	}
	// Only rank 0's clock counts, so that every rank takes the checkpoint together.
	if j.rank0 && t.Checkpoint && t.CheckpointMinutes > 0 && time.Since(j.lastCkptTime).Minutes() >= t.CheckpointMinutes {
		flags[1] = 1
	}
	if j.world != nil {
		if err := j.world.AllReduce(flags); err != nil {
			return false, false, err
		}
	}
	stop = flags[0] > 0
	due = moved && t.Checkpoint && (flags[1] > 0 ||
		t.CheckpointEvery > 0 && globalStep-j.lastCkptStep >= t.CheckpointEvery)
	return stop, due, nil
}

// trainStep fills this process's workers' slices of the global batch, has the
// engine compute and average the gradients of all workers, and takes one
// optimizer step on replica 0, copied to the other replicas.
func (j *job) trainStep(perm []int, epoch, step, globalStep int, lr float64) (float64, error) {
	if j.psAsync() {
		return j.psStep(perm, epoch, step, globalStep, lr)
	}
	idx := j.sampler.Batch(perm, step, j.globalBatch)
	b := j.cfg.WorkerBatch()
	lo := j.engine.FirstWorker()
	idx = idx[lo*b : (lo+j.engine.LocalWorkers())*b]
	bb := &j.batch
	j.train.Fill(idx, bb.x, bb.y)
	if j.aug != nil {
		j.aug.Apply(bb.x, idx, epoch)
	}
	if j.pipelined() {
		loss, applied, err := j.engine.StepPipelined(globalStep, bb.worker)
		if err != nil {
			return 0, err
		}
		j.computeS += j.engine.ComputeSeconds()
		j.computeN++
		if applied {
			err = j.update(lr)
		}
		return loss, err
	}
	if err := j.markBackups(globalStep); err != nil {
		return 0, err
	}
	loss, err := j.engine.Step(globalStep, bb.worker)
	if err != nil {
		return 0, err
	}
	j.computeS += j.engine.ComputeSeconds()
	j.computeN++
	return loss, j.update(lr)
}

// pipelined reports whether the run exchanges gradients while the next step
// computes (dist.pipeline 2).
func (j *job) pipelined() bool { return j.cfg.Dist.Pipeline == 2 }

// drain applies the gradient a pipelined run still has in flight (nothing
// otherwise), at learning rate lr.
func (j *job) drain(lr float64) error {
	if !j.pipelined() {
		return nil
	}
	applied, err := j.engine.Drain()
	if err != nil || !applied {
		return err
	}
	return j.update(lr)
}

// update takes one optimizer step on replica 0 with the mean gradient the
// engine wrote into its Grad, and copies the parameters to the other replicas.
func (j *job) update(lr float64) error {
	params := j.net.Params()
	if j.cfg.Optim.ClipNorm > 0 {
		optim.ClipGlobalNorm(params, j.cfg.Optim.ClipNorm)
	}
	if err := j.opt.Step(params, lr); err != nil {
		return err
	}
	j.engine.SyncReplicas()
	return nil
}

func (j *job) isLM() bool { return j.train.YLen() > 1 }

type evalResult struct {
	loss     float64 // mean cross-entropy per label (nats)
	accuracy float64 // fraction of correct argmax predictions
	examples int     // test examples evaluated
}

// evaluate evaluates the test split and, when data.validation holds one out,
// the validation split (val; nil otherwise), on one code path. It reports its
// progress on prog over both, and ends the epoch there.
func (j *job) evaluate(prog *progress) (test evalResult, val *evalResult, err error) {
	defer prog.endEpoch()
	n, total := j.evalExamples(), j.evalExamples()
	if j.val != nil {
		total += j.val.Len()
	}
	if test, err = j.evaluateSplit(j.test, n, prog, 0, total); err != nil {
		return evalResult{}, nil, err
	}
	if j.val != nil {
		v, err := j.evaluateSplit(j.val, j.val.Len(), prog, n, total)
		if err != nil {
			return evalResult{}, nil, fmt.Errorf("validation split: %w", err)
		}
		val = &v
	}
	return test, val, nil
}

// evaluateSplit runs the evaluation graph (the eval batch, BatchNorm's running
// statistics) over the first n examples of ds (padded last batch, the padding
// not counted) and computes loss and accuracy from the logits in float64. It
// reports done+k of total examples evaluated on prog.
func (j *job) evaluateSplit(ds data.Dataset, n int, prog *progress, done, total int) (evalResult, error) {
	eb, in := j.net.EvalBatch(), j.net.Input()
	classes, ylen := in.Classes, in.YLen
	x := make([]float32, eb*numel(in.Shape))
	y := make([]int32, eb*ylen)
	logits := make([]float32, eb*ylen*classes)
	idx := make([]int, eb)
	var lossSum float64
	var correct, count int
	prog.evaluating(done, total)
	for start := 0; start < n; start += eb {
		real := min(eb, n-start)
		for i := range idx {
			idx[i] = start + min(i, real-1) // pad with the last real example
		}
		ds.Fill(idx, x, y)
		if err := j.net.Predict(x, logits); err != nil {
			return evalResult{}, err
		}
		for r := 0; r < real*ylen; r++ {
			row := logits[r*classes : (r+1)*classes]
			lse, arg := logSumExp(row)
			lossSum += lse - float64(row[y[r]])
			if arg == int(y[r]) {
				correct++
			}
			count++
		}
		prog.evaluating(done+start+real, total)
	}
	return evalResult{loss: lossSum / float64(count), accuracy: float64(correct) / float64(count), examples: n}, nil
}

// evalExamples is the number of test examples an evaluation reads.
func (j *job) evalExamples() int {
	n := j.test.Len()
	if j.cfg.Train.EvalLimit > 0 && j.cfg.Train.EvalLimit < n {
		n = j.cfg.Train.EvalLimit
	}
	return n
}

// logSumExp returns log(sum(exp(row))) computed stably, and the argmax.
func logSumExp(row []float32) (float64, int) {
	arg := 0
	for i, v := range row {
		if v > row[arg] {
			arg = i
		}
	}
	m := float64(row[arg])
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s), arg
}

// position is where a checkpoint sits in the run: epochs completed, steps taken
// into the next one, and the running totals of the run and of that epoch.
type position struct {
	epoch, step, globalStep int
	lossSum, seconds        float64 // of the partial epoch
	elapsed                 float64
	samples                 int64
	epochs                  []EpochResult
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// batchBuffers hold this process's workers' slices of the global batch,
// allocated once.
type batchBuffers struct {
	x            []float32
	y            []int32
	xPerW, yPerW int // input values and labels per worker batch
}

func newBatchBuffers(workers, xPerW, yPerW int) batchBuffers {
	return batchBuffers{x: make([]float32, workers*xPerW), y: make([]int32, workers*yPerW), xPerW: xPerW, yPerW: yPerW}
}

// worker is local worker w's batch.
func (b *batchBuffers) worker(w int) ([]float32, []int32) {
	return b.x[w*b.xPerW : (w+1)*b.xPerW], b.y[w*b.yPerW : (w+1)*b.yPerW]
}

// evalSeconds is the epochs' evaluation time, 0 when a record lacks it
// (written before it was measured): a partial sum would understate it.
func evalSeconds(epochs []EpochResult) float64 {
	total := 0.0
	for _, r := range epochs {
		if r.EvalSeconds <= 0 {
			return 0
		}
		total += r.EvalSeconds
	}
	return total
}
