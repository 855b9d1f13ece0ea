package configs

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Names accepted by the string keys that have no registry in another package.
var (
	dataNames     = []string{"fashion-mnist", "mnist", "cifar10", "cifar100", "tinyshakespeare"}
	backendNames  = []string{"local", "mpi"}
	topologyNames = []string{"ring", "ps"}
)

// Validate checks every key's range and the rules between keys, and reports all
// problems at once, one per line, each as "key: value: what is expected".
func (c Config) Validate() error {
	probs := c.problems()
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = errors.New(p.String())
	}
	return errors.Join(errs...)
}

// problem is one failed rule; Load prefixes it with where the value came from.
type problem struct {
	key   string
	value any
	want  string
}

func (p problem) String() string { return p.key + ": " + show(p.value) + ": " + p.want }

// checker collects problems; each method checks one kind of rule.
type checker []problem

func (ps *checker) need(ok bool, key string, value any, want string) {
	if !ok {
		*ps = append(*ps, problem{key, value, want})
	}
}

func (ps *checker) atLeast(key string, v, lo int) {
	ps.need(v >= lo, key, v, fmt.Sprintf("must be at least %d", lo))
}

// within checks lo <= v <= hi, reporting the bound that is broken.
func (ps *checker) within(key string, v, lo, hi int) {
	ps.atLeast(key, v, lo)
	ps.need(v <= hi, key, v, fmt.Sprintf("must be at most %d", hi))
}

// Upper bounds on sizes. They are far above any run this trainer is for and
// catch typos and runaway sweeps before they allocate: beyond them a run
// dies in Go's "out of memory" or a makeslice panic, or takes minutes to
// build its graph. Whether a size below them fits the machine is the memory
// check's business, at the start of a run.
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
	// maxWidth bounds a layer's width (hidden sizes, embedding): a square
	// weight matrix of 1<<20 is already 4 TiB.
	maxWidth = 1 << 20
	// maxLayers bounds model.hidden's length and model.layers: Gorgonia's
	// graph compiler is quadratic in nodes, so 20,000 layers build for
	// longer than 10 minutes, while 64 build in well under a second.
	maxLayers = 64
)

func (ps *checker) oneOf(key, v string, names []string) {
	ps.need(slices.Contains(names, v), key, v, "must be one of "+strings.Join(names, ", "))
}

// The float checks are written so that NaN fails them, and they reject infinities.
func (ps *checker) positive(key string, x float64) {
	ps.need(finite(x) && x > 0, key, x, "must be a positive number")
}

func (ps *checker) nonNegative(key string, x float64) {
	ps.need(finite(x) && x >= 0, key, x, "must be a non-negative number")
}

// unit checks x in [0, 1), the range of a decay factor that must forget.
func (ps *checker) unit(key string, x float64) {
	ps.need(x >= 0 && x < 1, key, x, "must be in [0, 1)")
}

// fraction checks x in (0, 1], the range of a multiplier that may keep everything.
func (ps *checker) fraction(key string, x float64) {
	ps.need(x > 0 && x <= 1, key, x, "must be in (0, 1]")
}

// SafeName is what names that become folder names (runs, sweeps, variations) may be.
var SafeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// problems lists the failed rules in key order of the struct.
func (c Config) problems() []problem {
	var ps checker

	ps.need(c.Name == "" || SafeName.MatchString(c.Name), "name", c.Name,
		"must be letters, digits, '.', '_' or '-', starting with a letter or digit: it names the run's folder under runs/")
	d := c.Data
	ps.oneOf("data.name", d.Name, dataNames)
	ps.within("data.batch_size", d.BatchSize, 1, maxBatch)
	ps.within("data.eval_batch_size", d.EvalBatchSize, 0, maxBatch)
	ps.atLeast("data.seq_len", d.SeqLen, 1)
	ps.need(!d.Augment || d.Name == "cifar10" || d.Name == "cifar100", "data.augment", d.Augment,
		fmt.Sprintf("only cifar10 and cifar100 have augmentation (data.name is %q)", d.Name))

	m := c.Model
	ps.oneOf("model.name", m.Name, models.Names())
	ps.need(len(m.Hidden) > 0 && !slices.ContainsFunc(m.Hidden, func(h int) bool { return h < 1 }),
		"model.hidden", m.Hidden, "must be a non-empty list of sizes >= 1")
	ps.need(len(m.Hidden) <= maxLayers, "model.hidden", m.Hidden,
		fmt.Sprintf("must have at most %d layers (has %d)", maxLayers, len(m.Hidden)))
	ps.need(!slices.ContainsFunc(m.Hidden, func(h int) bool { return h > maxWidth }), "model.hidden", m.Hidden,
		fmt.Sprintf("each size must be at most %d", maxWidth))
	ps.within("model.hidden_size", m.HiddenSize, 1, maxWidth)
	ps.within("model.layers", m.Layers, 1, maxLayers)
	ps.within("model.embed_dim", m.EmbedDim, 1, maxWidth)
	ps.fraction("model.bn_momentum", m.BNMomentum)
	ps.positive("model.bn_epsilon", m.BNEpsilon)
	ps.need(m.Ops == "" || slices.Contains(models.OpsNames(), m.Ops), "model.ops", m.Ops,
		"must be one of "+strings.Join(models.OpsNames(), ", ")+" (empty means "+models.OpsFast+")")
	ps.need(m.Precision == "" || slices.Contains(models.PrecisionNames(), m.Precision), "model.precision", m.Precision,
		"must be one of "+strings.Join(models.PrecisionNames(), ", ")+" (empty means "+models.PrecisionFloat32+")")
	ps.need(m.Precision != models.PrecisionFloat64 || c.Compress.Name == "none" && !c.Compress.DenseFP16, "model.precision", m.Precision,
		fmt.Sprintf("float64 gradients travel dense and uncompressed: needs compress.name none and compress.dense_fp16 false (have %q, %v)", c.Compress.Name, c.Compress.DenseFP16))
	// The character model only reads text, and text is only read by it.
	ps.need(m.Name != "charlstm" || d.Name == "tinyshakespeare", "model.name", m.Name,
		fmt.Sprintf("needs data.name tinyshakespeare (data.name is %q)", d.Name))
	ps.need(d.Name != "tinyshakespeare" || m.Name == "charlstm", "data.name", d.Name,
		fmt.Sprintf("needs model.name charlstm (model.name is %q)", m.Name))

	o := c.Optim
	ps.oneOf("optim.name", o.Name, optim.Names())
	ps.positive("optim.lr", o.LR)
	ps.unit("optim.momentum", o.Momentum)
	ps.need(!o.Nesterov || o.Momentum > 0, "optim.nesterov", o.Nesterov, "needs optim.momentum > 0")
	ps.nonNegative("optim.weight_decay", o.WeightDecay)
	ps.unit("optim.beta1", o.Beta1)
	ps.unit("optim.beta2", o.Beta2)
	ps.need(o.Eps > 0 && !math.IsInf(o.Eps, 0) || o.Name == "sgd" || o.Name == "lars", "optim.eps", o.Eps, "must be a positive number")
	ps.nonNegative("optim.lars_eta", o.LARSEta)
	ps.nonNegative("optim.lamb_max_grad_norm", o.LAMBMaxGradNorm)
	ps.nonNegative("optim.clip_norm", o.ClipNorm)

	s := c.Schedule
	ps.oneOf("schedule.name", s.Name, optim.ScheduleNames())
	increasing := true
	for i, e := range s.Milestones {
		increasing = increasing && finite(e) && e > 0 && (i == 0 || e > s.Milestones[i-1])
	}
	ps.need(increasing, "schedule.milestones", s.Milestones, "must be positive epochs in increasing order")
	ps.fraction("schedule.gamma", s.Gamma)
	ps.nonNegative("schedule.min_lr", s.MinLR)
	ps.need(s.WarmupEpochs >= 0 && s.WarmupEpochs <= float64(c.Train.Epochs), "schedule.warmup_epochs", s.WarmupEpochs,
		fmt.Sprintf("must be in [0, train.epochs] = [0, %d]", c.Train.Epochs))
	ps.atLeast("schedule.base_batch", s.BaseBatch, 0)
	ps.positive("schedule.power", s.Power)
	ps.oneOf("schedule.scaling", s.Scaling, []string{"linear", "sqrt"})

	t := c.Train
	ps.atLeast("train.epochs", t.Epochs, 1)
	ps.atLeast("train.log_every", t.LogEvery, 1)
	ps.atLeast("train.max_steps", t.MaxSteps, 0)
	ps.atLeast("train.eval_limit", t.EvalLimit, 0)
	ps.atLeast("train.checkpoint_every", t.CheckpointEvery, 0)
	ps.need(t.CheckpointMinutes >= 0, "train.checkpoint_minutes", t.CheckpointMinutes, "must be >= 0 (0 = off)")
	ps.atLeast("train.keep_checkpoints", t.KeepCheckpoints, 1)
	ps.need(t.MaxLoss >= 0 && !math.IsInf(t.MaxLoss, 0), "train.max_loss", t.MaxLoss, "must be a finite value >= 0 (0 = 100 x ln(classes))")

	ps.within("dist.workers", c.Dist.Workers, 1, maxWorkers)
	ps.within("dist.replicas", c.Dist.Replicas, 0, maxWorkers)
	ps.oneOf("dist.backend", c.Dist.Backend, backendNames)
	ps.within("dist.ranks", c.Dist.Ranks, 0, maxWorkers)
	ps.atLeast("dist.check_every", c.Dist.CheckEvery, 1)
	ps.within("data.global_batch", c.Data.GlobalBatch, 0, maxBatch)
	ps.need(c.Data.GlobalBatch <= 0 || c.Dist.Workers < 1 || c.Data.GlobalBatch%c.Dist.Workers == 0, "data.global_batch", c.Data.GlobalBatch,
		fmt.Sprintf("must split evenly over dist.workers=%d (a multiple of %d)", c.Dist.Workers, c.Dist.Workers))

	for _, p := range c.Compress.Problems() {
		ps.need(false, p.Key, p.Value, p.Want)
	}
	ps.need(!c.Compress.OwnsMomentum() || c.Optim.Name == "sgd", "compress.name", c.Compress.Name,
		fmt.Sprintf("dgc with momentum correction applies momentum itself and needs optim.name sgd (got %s), or set compress.dgc.momentum_correction false", c.Optim.Name))

	n := c.Network
	ps.positive("network.bandwidth_gbps", n.BandwidthGbps)
	ps.nonNegative("network.latency_us", n.LatencyUs)
	ps.oneOf("network.topology", n.Topology, topologyNames)

	return ps
}
