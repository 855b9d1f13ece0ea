package configs

import (
	"fmt"
	"regexp"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/problem"
	"github.com/gradwire/gradwire/models"
)

// Names accepted by the string keys of this package's own sections. The names of
// models, optimizers, schedules and compressors come from their registries.
var (
	dataNames     = []string{"fashion-mnist", "mnist", "cifar10", "cifar100", "tinyshakespeare"}
	backendNames  = []string{"local", "mpi"}
	distModes     = []string{"allreduce", "ps"}
	distPasses    = []string{"auto", "one_by_one"}
	trainModes    = []string{TrainModeSerial, TrainModeLayerParallel}
	delayNames    = []string{"none", "exp"}
	topologyNames = dist.AlgorithmNames()
)

// Values of train.mode.
const (
	TrainModeSerial        = "serial"
	TrainModeLayerParallel = "layer_parallel"
)

// Validate checks every key's range and the rules between keys, and reports all
// problems at once, one per line, each as "key: value: what is expected".
func (c Config) Validate() error { return problem.Join(c.problems()) }

// Upper bounds on the sizes of this package's sections (models bounds its own).
// They are far above any run this trainer is for and catch typos and runaway
// sweeps before they allocate. Whether a size below them fits the machine is the
// memory check's business, at the start of a run.
const (
	// maxBatch bounds every batch size: a million examples a step, beyond
	// any data set here (the largest training split has 60,000 examples;
	// Tiny Shakespeare about a million characters).
	maxBatch = 1 << 20
	// maxWorkers bounds the logical workers, replicas and MPI ranks: each
	// worker owns a gradient buffer and compressor state the size of the
	// model, and the largest published data-parallel runs use a few
	// thousand workers.
	maxWorkers = 4096
)

// SafeName is what names that become folder names (runs, sweeps, variations) may be.
var SafeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func finite(x float64) bool { return problem.Finite(x) }

// problems lists the failed rules in key order of the struct: each section's own
// checks (those of models, optim and compress come from their Problems methods),
// then the rules that span sections.
func (c Config) problems() []problem.Problem {
	var ps problem.List

	ps.Need(c.Name == "" || SafeName.MatchString(c.Name), "name", c.Name,
		"must be letters, digits, '.', '_' or '-', starting with a letter or digit: it names the run's folder under runs/")
	d := c.Data
	ps.OneOf("data.name", d.Name, dataNames)
	ps.Within("data.batch_size", d.BatchSize, 1, maxBatch)
	ps.Within("data.eval_batch_size", d.EvalBatchSize, 0, maxBatch)
	ps.AtLeast("data.seq_len", d.SeqLen, 1)
	ps.Need(!d.Augment || d.Name == "cifar10" || d.Name == "cifar100", "data.augment", d.Augment,
		fmt.Sprintf("only cifar10 and cifar100 have augmentation (data.name is %q)", d.Name))
	// The upper bound, below the training split's size, is checked when the
	// data are loaded: the files decide it.
	ps.Need(d.Validation >= 0, "data.validation", d.Validation,
		"must be >= 0: the number of training examples held out as a validation split (0 = off)")

	ps.Need(d.LabelNoise >= 0 && d.LabelNoise < 1, "data.label_noise", d.LabelNoise, "must be a fraction in [0, 1): the training labels replaced by another class")
	ps.Need(d.LabelNoise == 0 || d.Name != "tinyshakespeare", "data.label_noise", d.LabelNoise, "only for classification data sets (data.name is tinyshakespeare)")
	m := c.Model
	ps.Add(m.Problems()...)
	ps.Need(m.Precision != models.PrecisionFloat64 || c.Compress.Name == "none" && !c.Compress.DenseFP16, "model.precision", m.Precision,
		fmt.Sprintf("float64 gradients travel dense and uncompressed: needs compress.name none and compress.dense_fp16 false (have %q, %v)", c.Compress.Name, c.Compress.DenseFP16))
	// The character model only reads text, and text is only read by it.
	ps.Need(m.Name != "charlstm" || d.Name == "tinyshakespeare", "model.name", m.Name,
		fmt.Sprintf("needs data.name tinyshakespeare (data.name is %q)", d.Name))
	ps.Need(d.Name != "tinyshakespeare" || m.Name == "charlstm", "data.name", d.Name,
		fmt.Sprintf("needs model.name charlstm (model.name is %q)", m.Name))

	ps.Add(c.Optim.Problems()...)

	s := c.Schedule
	ps.Add(s.Problems()...)
	// Against an invalid train.epochs the bound means nothing: that key's own error says it.
	ps.Need(ps.Has("schedule.warmup_epochs") || c.Train.Epochs < 1 || s.WarmupEpochs <= float64(c.Train.Epochs), "schedule.warmup_epochs", s.WarmupEpochs,
		fmt.Sprintf("must be in [0, train.epochs] = [0, %d]", c.Train.Epochs))

	t := c.Train
	ps.AtLeast("train.epochs", t.Epochs, 1)
	ps.AtLeast("train.log_every", t.LogEvery, 1)
	ps.AtLeast("train.max_steps", t.MaxSteps, 0)
	ps.AtLeast("train.eval_limit", t.EvalLimit, 0)
	ps.AtLeast("train.checkpoint_every", t.CheckpointEvery, 0)
	ps.Need(t.CheckpointMinutes >= 0, "train.checkpoint_minutes", t.CheckpointMinutes, "must be >= 0 (0 = off)")
	ps.AtLeast("train.keep_checkpoints", t.KeepCheckpoints, 1)
	ps.Need(t.MaxLoss >= 0 && finite(t.MaxLoss), "train.max_loss", t.MaxLoss, "must be a finite value >= 0 (0 = 100 x ln(classes))")
	ps.AtLeast("train.stall_epochs", t.StallEpochs, 0)

	ps.Within("dist.workers", c.Dist.Workers, 1, maxWorkers)
	ps.Within("dist.replicas", c.Dist.Replicas, 0, maxWorkers)
	ps.OneOf("dist.backend", c.Dist.Backend, backendNames)
	ps.Within("dist.ranks", c.Dist.Ranks, 0, maxWorkers)
	ps.AtLeast("dist.check_every", c.Dist.CheckEvery, 1)
	ps.Need(c.Dist.Pipeline == 1 || c.Dist.Pipeline == 2, "dist.pipeline", c.Dist.Pipeline,
		"must be 1 (exchange, then the next step) or 2 (exchange while the next step computes; wider pipelines only add staleness)")
	ps.Need(c.Dist.Pipeline != 2 || m.Precision != models.PrecisionFloat64, "dist.pipeline", c.Dist.Pipeline,
		"2 needs model.precision float32 (float64 gradients are exchanged synchronously)")
	ps.OneOf("dist.mode", c.Dist.Mode, distModes)
	ps.OneOf("dist.passes", c.Dist.Passes, distPasses)
	ps.Need(c.Dist.Staleness >= -1, "dist.staleness", c.Dist.Staleness, "must be -1 (asynchronous), 0 (synchronous) or a bound k > 0")
	ps.OneOf("dist.delay", c.Dist.Delay, delayNames)
	ps.Need(c.Dist.DelayMean > 0 && finite(c.Dist.DelayMean), "dist.delay_mean", c.Dist.DelayMean, "must be a finite mean delay > 0, in units of a step's compute time")
	ps.Need(c.Dist.Backups >= 0 && (c.Dist.Workers < 1 || c.Dist.Backups < c.Dist.Workers), "dist.backups", c.Dist.Backups,
		fmt.Sprintf("must be >= 0 and below dist.workers (%d): the step keeps the first workers-backups gradients", c.Dist.Workers))
	if b := c.Dist.Backups; b > 0 {
		why := "with dist.backups %d (the slowest workers' gradients left out) needs %s"
		ps.Need(c.Dist.Delay != "none", "dist.delay", c.Dist.Delay, fmt.Sprintf(why, b, "a delay model (exp): with equal step times the same workers would always be left out"))
		ps.Need(c.Compress.Name == "none", "compress.name", c.Compress.Name, fmt.Sprintf(why, b, "compress.name none (a compressor keeps residuals of the gradients it leaves out)"))
		ps.Need(c.Dist.Pipeline == 1, "dist.pipeline", c.Dist.Pipeline, fmt.Sprintf(why, b, "dist.pipeline 1"))
		ps.Need(m.Precision != models.PrecisionFloat64, "model.precision", m.Precision, fmt.Sprintf(why, b, "model.precision float32"))
		ps.Need(c.Dist.Mode == "allreduce" || c.Dist.Staleness == 0, "dist.staleness", c.Dist.Staleness, fmt.Sprintf(why, b, "a synchronous step (dist.staleness 0)"))
	}
	if c.Optim.SAMRho > 0 {
		why := "with optim.sam_rho %v (each worker's gradient taken at a perturbed point) needs %s"
		ps.Need(m.Precision != models.PrecisionFloat64, "model.precision", m.Precision, fmt.Sprintf(why, c.Optim.SAMRho, "model.precision float32"))
		ps.Need(c.Dist.Mode == "allreduce" || c.Dist.Staleness == 0, "dist.mode", c.Dist.Mode, fmt.Sprintf(why, c.Optim.SAMRho, "synchronous steps (dist.mode allreduce, or ps with dist.staleness 0)"))
	}
	if c.Dist.Mode == "ps" && c.Dist.Staleness != 0 {
		// The asynchronous server applies one dense gradient at a time, on
		// one process.
		why := "with dist.mode ps and dist.staleness %d (asynchronous updates) needs %s"
		ps.Need(c.Dist.Backend == "local", "dist.backend", c.Dist.Backend, fmt.Sprintf(why, c.Dist.Staleness, "dist.backend local"))
		ps.Need(c.Compress.Name == "none", "compress.name", c.Compress.Name, fmt.Sprintf(why, c.Dist.Staleness, "compress.name none"))
		ps.Need(c.Dist.Pipeline == 1, "dist.pipeline", c.Dist.Pipeline, fmt.Sprintf(why, c.Dist.Staleness, "dist.pipeline 1"))
		ps.Need(m.Precision != models.PrecisionFloat64, "model.precision", m.Precision, fmt.Sprintf(why, c.Dist.Staleness, "model.precision float32"))
	}
	ps.Within("data.global_batch", c.Data.GlobalBatch, 0, maxBatch)
	ps.Need(c.Data.GlobalBatch <= 0 || c.Dist.Workers < 1 || c.Data.GlobalBatch%c.Dist.Workers == 0, "data.global_batch", c.Data.GlobalBatch,
		fmt.Sprintf("must split evenly over dist.workers=%d (a multiple of %d)", c.Dist.Workers, c.Dist.Workers))

	ps.Add(c.Compress.Problems()...)
	ps.Need(!c.Compress.OwnsMomentum() || c.Optim.Name == "sgd", "compress.name", c.Compress.Name,
		fmt.Sprintf("dgc with momentum correction applies momentum itself and needs optim.name sgd (got %s), or set compress.dgc.momentum_correction false", c.Optim.Name))
	// optim.clip_norm clips the exchanged update; with momentum correction
	// that is the sparse sum of accumulated velocities, not a gradient.
	if c.Optim.ClipNorm != 0 && c.Compress.OwnsMomentum() {
		instead := "set it to 0 and use compress.dgc.clip_norm, DGC's local clipping of each worker's gradient before compression"
		if c.Compress.Name != "dgc" {
			instead = "set it to 0, or turn momentum correction off"
		}
		ps.Need(false, "optim.clip_norm", c.Optim.ClipNorm, fmt.Sprintf("clips after the exchange, where compress.name %s "+
			"(momentum correction) hands over its sparse accumulated velocity, not a gradient: %s", c.Compress.Name, instead))
	}

	ps.Need(d.TrainLimit >= 0, "data.train_limit", d.TrainLimit,
		"must be >= 0: train on the first this many training examples (0 = all)")
	ps.OneOf("train.mode", c.Train.Mode, trainModes)
	ps.Add(c.LayerParallel.Problems()...)
	if c.Train.Mode == TrainModeLayerParallel {
		ps.Add(c.layerParallelProblems()...)
	}

	n := c.Network
	ps.Positive("network.bandwidth_gbps", n.BandwidthGbps)
	ps.NonNegative("network.latency_us", n.LatencyUs)
	ps.OneOf("network.topology", n.Topology, topologyNames)

	return ps
}

// layerParallelProblems are the rules train.mode layer_parallel adds: a CIFAR
// ResNet on images, cut into dist.workers stages (one MPI rank each under
// dist.backend mpi), and the plain synchronous data-parallel step for the
// serial epochs.
func (c Config) layerParallelProblems() []problem.Problem {
	var ps problem.List
	why := "with train.mode layer_parallel needs %s"
	m := c.Model
	blocks, err := models.ResNetBlocks(m.Name, models.Input{Shape: []int{1, 28, 28}})
	ps.Need(err == nil, "model.name", m.Name, fmt.Sprintf(why, "a CIFAR ResNet (resnet20, resnet32 or resnet56), which the method cuts at block boundaries"))
	if err == nil {
		ps.Add(c.LayerParallel.CrossProblems(c.Dist.Workers, len(blocks), c.Train.Epochs)...)
	}
	ps.Need(m.Precision != models.PrecisionFloat64, "model.precision", m.Precision, fmt.Sprintf(why, "model.precision float32"))
	ps.Need(c.Dist.Mode == "allreduce", "dist.mode", c.Dist.Mode, fmt.Sprintf(why, "dist.mode allreduce (its serial epochs are synchronous)"))
	ps.Need(c.Dist.Pipeline == 1, "dist.pipeline", c.Dist.Pipeline, fmt.Sprintf(why, "dist.pipeline 1"))
	ps.Need(c.Dist.Backups == 0, "dist.backups", c.Dist.Backups, fmt.Sprintf(why, "dist.backups 0"))
	ps.Need(c.Compress.Name == "none", "compress.name", c.Compress.Name, fmt.Sprintf(why, "compress.name none (the stages exchange boundary tensors, not gradients)"))
	ps.Need(c.Optim.SAMRho == 0, "optim.sam_rho", c.Optim.SAMRho, fmt.Sprintf(why, "optim.sam_rho 0"))
	ps.Need(c.Train.StallEpochs == 0, "train.stall_epochs", c.Train.StallEpochs,
		fmt.Sprintf(why, "train.stall_epochs 0 (its parallel rounds minimise the stages' own objectives, not the training loss)"))
	ps.Need(c.Dist.Backend != "mpi" || c.Dist.Ranks == 0 || c.Dist.Ranks == c.Dist.Workers, "dist.ranks", c.Dist.Ranks,
		fmt.Sprintf(why, fmt.Sprintf("one MPI rank per stage: dist.ranks 0 or dist.workers (%d)", c.Dist.Workers)))
	return ps
}
