// Package train runs a training job from a resolved config: data, model,
// optimizer, schedule, the epoch loop, evaluation, checkpoints and the run's
// output files.
package train

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/schollz/progressbar/v3"

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
	OutDir string       // run directory; created if missing
	Resume bool         // continue from the last checkpoint in OutDir
	Log    *slog.Logger // progress messages (stderr); nil = discard
	Stderr io.Writer    // where the progress bar goes; nil = no bar
}

// job is one run's state.
type job struct {
	cfg     configs.Config
	opts    Options
	log     *slog.Logger
	train   data.Dataset
	test    data.Dataset
	aug     *data.Augmenter
	net     *models.Net   // replica 0: the parameters the optimizer updates, evaluation
	nets    []*models.Net // every replica
	engine  *dist.Engine
	world   dist.Collective   // the process-level collective; nil for the local backend
	members []dist.Collective // this process's logical workers
	rank0   bool              // this process writes outputs (always true for the local backend)
	opt     optim.Optimizer
	sched   *optim.Schedule
	sampler *data.Sampler

	globalBatch   int
	stepsPerEpoch int
	metrics       *os.File
	metricsW      *bufio.Writer

	// Batch buffers for this process's workers, allocated once.
	gx        []float32
	y         []int32
	xPerW     int // input values per worker batch
	yPerW     int // labels per worker batch
	computeS  float64
	computeN  int
	workers   []workerState // every logical worker's exchange state at the last epoch end
	exchanges []*compress.Exchange
}

// Run trains according to cfg and writes the run directory. It returns the summary.
func Run(ctx context.Context, cfg configs.Config, opts Options) (*Summary, error) {
	j := &job{cfg: cfg, opts: opts, log: opts.Log}
	if j.log == nil {
		j.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := j.setup(); err != nil {
		j.close()
		return nil, err
	}
	defer j.close()
	if !j.rank0 {
		// Only rank 0 writes the run directory; the others log nothing.
		j.log = slog.New(slog.NewTextHandler(io.Discard, nil))
		j.opts.Stderr = nil
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	state := &checkpoint{}
	if opts.Resume {
		var path string
		var skipped []error
		var err error
		if state, path, skipped, err = latestCheckpoint(opts.OutDir, layoutOf(j.net, cfg.Dist.Workers)); err != nil {
			return nil, err
		}
		for _, e := range skipped {
			j.log.Warn("skipping damaged checkpoint", "error", e)
		}
		if err := state.restore(path, j.net, j.opt); err != nil {
			return nil, err
		}
		j.engine.SyncReplicas()
		if err := j.setBuffers(state.Buffers); err != nil {
			return nil, err
		}
		if err := j.restoreWorkers(path, state.Workers); err != nil {
			return nil, err
		}
		j.log.Info("resuming", "checkpoint", path, "epochs_done", state.Epoch)
	} else if j.rank0 {
		if err := cfg.WriteYAML(filepath.Join(opts.OutDir, "config.yaml")); err != nil {
			return nil, err
		}
	}
	if j.rank0 {
		if err := j.openMetrics(state.MetricsOffset); err != nil {
			return nil, err
		}
		defer j.metrics.Close()
	} else {
		j.metricsW = bufio.NewWriter(io.Discard)
	}
	sum, err := j.loop(ctx, state)
	if ferr := j.metricsW.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	return sum, err
}

// setup opens the data, builds the model, optimizer and schedule.
func (j *job) setup() error {
	c := j.cfg
	dopts := data.Options{Name: c.Data.Name, Dir: c.Data.Dir, SeqLen: c.Data.SeqLen, Normalize: c.Data.Normalize}
	var err error
	if j.train, err = data.Open(dopts, "train"); err != nil {
		return err
	}
	if j.test, err = data.Open(dopts, "test"); err != nil {
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
	if err := j.setupWorkers(); err != nil {
		return err
	}
	j.globalBatch = c.WorkerBatch() * c.Dist.Workers
	j.sampler = data.NewSampler(j.train.Len(), c.Seed)
	j.stepsPerEpoch = j.sampler.StepsPerEpoch(j.globalBatch)
	if j.stepsPerEpoch == 0 {
		return fmt.Errorf("data.batch_size: global batch %d (batch_size %d x %d workers) is larger than the %d training examples",
			j.globalBatch, c.WorkerBatch(), c.Dist.Workers, j.train.Len())
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
	if err := j.setupReplicas(in, evalBatch); err != nil {
		return err
	}
	// The replicas compute in parallel, one per core: each op's own workers get
	// the cores left per replica, so the two levels do not oversubscribe.
	models.SetOpWorkers(max(1, runtime.GOMAXPROCS(0)/len(j.nets)))
	if j.opt, err = optim.New(c.Optim); err != nil {
		return err
	}
	if j.sched, err = optim.NewSchedule(c.Schedule, c.Optim.LR, j.globalBatch, j.stepsPerEpoch, j.stepsPerEpoch*c.Train.Epochs); err != nil {
		return err
	}
	local := j.engine.LocalWorkers()
	j.xPerW, j.yPerW = c.WorkerBatch()*numel(in.Shape), c.WorkerBatch()*in.YLen
	j.gx = make([]float32, local*j.xPerW)
	j.y = make([]int32, local*j.yPerW)
	j.log.Info("model", "name", c.Model.Name, "params", j.net.NumParams(), "ops", c.Model.Ops,
		"blas", models.BLAS, "blas_core", models.BLASCoreType(), "op_workers", models.OpWorkers())
	j.log.Info("workers", "workers", c.Dist.Workers, "replicas", len(j.nets), "backend", c.Dist.Backend)
	j.log.Info("data", "name", c.Data.Name, "train", j.train.Len(), "test", j.test.Len(),
		"global_batch", j.globalBatch, "steps_per_epoch", j.stepsPerEpoch)
	return nil
}

// openMetrics opens metrics.jsonl for appending, cut back to the size it had at
// the checkpoint being resumed (records after it belong to lost work).
func (j *job) openMetrics(offset int64) error {
	path := filepath.Join(j.opts.OutDir, "metrics.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(offset); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	j.metrics, j.metricsW = f, bufio.NewWriter(f)
	return nil
}

func (j *job) record(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	j.metricsW.Write(b)
	return j.metricsW.WriteByte('\n')
}

// loop runs the remaining epochs.
func (j *job) loop(ctx context.Context, st *checkpoint) (*Summary, error) {
	c := j.cfg
	globalStep := st.GlobalStep
	elapsed, samples := st.Elapsed, st.Samples
	epochs := st.Epochs
	j.workers = st.Workers
	for epoch := st.Epoch; epoch < c.Train.Epochs; epoch++ {
		t0 := time.Now()
		perm := j.sampler.Permutation(epoch)
		bar := j.newBar(epoch)
		var lossSum float64
		var lr float64
		for step := 0; step < j.stepsPerEpoch; step++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			lr = j.sched.LR(globalStep)
			loss, err := j.trainStep(perm, epoch, step, globalStep, lr)
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d: %w", epoch+1, step+1, err)
			}
			lossSum += loss
			globalStep++
			if globalStep%c.Dist.CheckEvery == 0 {
				if err := j.engine.CheckAgreement(globalStep); err != nil {
					return nil, err
				}
			}
			if globalStep%c.Train.LogEvery == 0 && j.rank0 {
				// Flushed at once so that a long epoch's progress can be followed in the file.
				if err := j.record(stepRecord{Kind: "step", Epoch: epoch + 1, Step: globalStep, Loss: loss, LR: lr}); err != nil {
					return nil, err
				}
				if err := j.metricsW.Flush(); err != nil {
					return nil, err
				}
			}
			if bar != nil {
				rate := float64((step+1)*j.globalBatch) / time.Since(t0).Seconds()
				bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f %.0f samples/s", epoch+1, c.Train.Epochs, loss, rate))
				bar.Add(1)
			}
		}
		if bar != nil {
			bar.Finish()
			fmt.Fprintln(j.opts.Stderr)
		}
		trainSeconds := time.Since(t0).Seconds()
		elapsed += trainSeconds
		samples += int64(j.stepsPerEpoch * j.globalBatch)
		trainLoss := lossSum / float64(j.stepsPerEpoch)

		// Every replica's BatchNorm statistics saw different slices: average them
		// (over all processes) before evaluating and checkpointing.
		if err := j.averageBuffers(); err != nil {
			return nil, err
		}
		var err error
		if j.workers, err = j.gatherWorkers(); err != nil {
			return nil, err
		}
		if !j.rank0 {
			continue
		}
		ev, err := j.evaluate()
		if err != nil {
			return nil, fmt.Errorf("epoch %d: evaluation: %w", epoch+1, err)
		}
		res := EpochResult{Kind: "epoch", Epoch: epoch + 1, Step: globalStep, LR: lr, TrainLoss: trainLoss,
			TestLoss: ev.loss, Seconds: trainSeconds, SamplesPerSecond: float64(j.stepsPerEpoch*j.globalBatch) / trainSeconds}
		if j.isLM() {
			bpc := ev.loss / math.Ln2
			res.ValBPC = &bpc
			j.log.Info("epoch", "epoch", epoch+1, "train_loss", fmt.Sprintf("%.4f", trainLoss), "val_loss", fmt.Sprintf("%.4f", ev.loss),
				"val_bpc", fmt.Sprintf("%.4f", bpc), "samples_per_s", fmt.Sprintf("%.0f", res.SamplesPerSecond))
		} else {
			acc := ev.accuracy
			res.TestAccuracy = &acc
			j.log.Info("epoch", "epoch", epoch+1, "train_loss", fmt.Sprintf("%.4f", trainLoss), "test_loss", fmt.Sprintf("%.4f", ev.loss),
				"test_accuracy", fmt.Sprintf("%.4f", acc), "samples_per_s", fmt.Sprintf("%.0f", res.SamplesPerSecond))
		}
		epochs = append(epochs, res)
		if err := j.record(res); err != nil {
			return nil, err
		}
		if err := j.metricsW.Flush(); err != nil {
			return nil, err
		}
		if c.Train.Checkpoint {
			if err := j.checkpoint(epoch+1, globalStep, elapsed, samples, epochs); err != nil {
				return nil, err
			}
		}
	}
	if !j.rank0 {
		return nil, nil
	}
	if len(epochs) == 0 {
		return nil, errors.New("no epoch was run")
	}
	last := epochs[len(epochs)-1]
	sum := &Summary{
		Model: c.Model.Name, Dataset: c.Data.Name, Epochs: c.Train.Epochs, Steps: globalStep,
		GlobalBatch: j.globalBatch, Workers: c.Dist.Workers, Replicas: len(j.nets), Backend: c.Dist.Backend,
		Optimizer: c.Optim.Name, Compressor: c.Compress.Name,
		Seed: c.Seed, Version: version.String(), GoVersion: version.GoVersion(), BLAS: models.BLAS,
		BLASCore: models.BLASCoreType(), Ops: c.Model.Ops, Precision: c.Model.Precision,
		Machine: version.Machine(),
		Params:  j.net.NumParams(), TestAccuracy: last.TestAccuracy, TestLoss: last.TestLoss, ValBPC: last.ValBPC,
		TrainLossFinal: last.TrainLoss, WallSeconds: elapsed, SamplesPerSecond: float64(samples) / elapsed,
	}
	sum.OptimizerStateBytesPerParam = float64(optim.StateBytes(j.opt)) / float64(j.net.NumParams())
	j.fillTraffic(sum, j.workers)
	if err := writeJSON(filepath.Join(j.opts.OutDir, "summary.json"), sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// trainStep fills this process's workers' slices of the global batch, has the
// engine compute and average the gradients of all workers, and takes one
// optimizer step on replica 0, copied to the other replicas.
func (j *job) trainStep(perm []int, epoch, step, globalStep int, lr float64) (float64, error) {
	idx := j.sampler.Batch(perm, step, j.globalBatch)
	b := j.cfg.WorkerBatch()
	lo := j.engine.FirstWorker()
	idx = idx[lo*b : (lo+j.engine.LocalWorkers())*b]
	j.train.Fill(idx, j.gx, j.y)
	if j.aug != nil {
		j.aug.Apply(j.gx, idx, epoch)
	}
	loss, err := j.engine.Step(globalStep, func(w int) ([]float32, []int32) {
		return j.gx[w*j.xPerW : (w+1)*j.xPerW], j.y[w*j.yPerW : (w+1)*j.yPerW]
	})
	if err != nil {
		return 0, err
	}
	j.computeS += j.engine.ComputeSeconds()
	j.computeN++
	params := j.net.Params()
	if j.cfg.Optim.ClipNorm > 0 {
		optim.ClipGlobalNorm(params, j.cfg.Optim.ClipNorm)
	}
	if err := j.opt.Step(params, lr); err != nil {
		return 0, err
	}
	j.engine.SyncReplicas()
	return loss, nil
}

func (j *job) isLM() bool { return j.train.YLen() > 1 }

type evalResult struct {
	loss     float64 // mean cross-entropy per label (nats)
	accuracy float64 // fraction of correct argmax predictions
}

// evaluate runs the evaluation graph over the test split (padded last batch, the
// padding not counted) and computes loss and accuracy from the logits in float64.
func (j *job) evaluate() (evalResult, error) {
	n := j.test.Len()
	if j.cfg.Train.EvalLimit > 0 && j.cfg.Train.EvalLimit < n {
		n = j.cfg.Train.EvalLimit
	}
	eb, in := j.net.EvalBatch(), j.net.Input()
	classes, ylen := in.Classes, in.YLen
	x := make([]float32, eb*numel(in.Shape))
	y := make([]int32, eb*ylen)
	logits := make([]float32, eb*ylen*classes)
	idx := make([]int, eb)
	var lossSum float64
	var correct, count int
	for start := 0; start < n; start += eb {
		real := min(eb, n-start)
		for i := range idx {
			idx[i] = start + min(i, real-1) // pad with the last real example
		}
		j.test.Fill(idx, x, y)
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
	}
	return evalResult{loss: lossSum / float64(count), accuracy: float64(correct) / float64(count)}, nil
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

func (j *job) checkpoint(epoch, globalStep int, elapsed float64, samples int64, epochs []EpochResult) error {
	off, err := j.metrics.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	c := newCheckpoint(version.String(), j.net, j.opt)
	c.Epoch, c.GlobalStep, c.MetricsOffset, c.Elapsed, c.Samples, c.Epochs = epoch, globalStep, off, elapsed, samples, epochs
	c.Workers = j.workers
	return saveCheckpoint(checkpointPath(j.opts.OutDir, globalStep), c)
}

func (j *job) newBar(epoch int) *progressbar.ProgressBar {
	if !j.cfg.Train.Progress || j.opts.Stderr == nil {
		return nil
	}
	return progressbar.NewOptions(j.stepsPerEpoch,
		progressbar.OptionSetWriter(j.opts.Stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch+1, j.cfg.Train.Epochs)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
	)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
