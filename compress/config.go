package compress

import (
	"fmt"
	"math"
	"strings"

	"github.com/gradwire/gradwire/internal/problem"
)

// Config is the `compress` section of a run config: the algorithm, the layer
// policy shared by all algorithms, and each algorithm's own settings.
type Config struct {
	Name string `mapstructure:"name" yaml:"name"` // registry name (Names lists them)
	// MinSize: tensors with fewer elements, and tensors with one dimension
	// (biases, BatchNorm), travel dense (all-reduced float32).
	MinSize int `mapstructure:"min_size" yaml:"min_size"`
	// Density is the fraction of elements sent by topk, randomk and dgc (k = ceil(numel*density)).
	Density float64 `mapstructure:"density" yaml:"density"`
	// Residual turns on error feedback (residual accumulation) for topk and randomk.
	Residual bool `mapstructure:"residual" yaml:"residual"`
	// FP16Values sends the selected values as float16 instead of float32 (topk, randomk, dgc).
	FP16Values bool `mapstructure:"fp16_values" yaml:"fp16_values"`
	// DenseFP16 sends the tensors that travel dense as float16 (2 bytes a value).
	DenseFP16 bool `mapstructure:"dense_fp16" yaml:"dense_fp16"`
	// NarrowIndices sends the indices into tensors of at most 65,536 elements
	// as 16-bit integers instead of 32-bit ones (topk, dgc).
	NarrowIndices bool `mapstructure:"narrow_indices" yaml:"narrow_indices"`

	DGC      DGCConfig      `mapstructure:"dgc" yaml:"dgc"`
	AdaComp  AdaCompConfig  `mapstructure:"adacomp" yaml:"adacomp"`
	PowerSGD PowerSGDConfig `mapstructure:"powersgd" yaml:"powersgd"`
	TernGrad TernGradConfig `mapstructure:"terngrad" yaml:"terngrad"`
	QSGD     QSGDConfig     `mapstructure:"qsgd" yaml:"qsgd"`
	ScaleCom ScaleComConfig `mapstructure:"scalecom" yaml:"scalecom"`
	GradiVeQ GradiVeQConfig `mapstructure:"gradiveq" yaml:"gradiveq"`
	LGC      LGCConfig      `mapstructure:"lgc" yaml:"lgc"`
}

// DGCConfig holds Deep Gradient Compression's switches (Lin et al. 2018). The
// momentum and weight decay DGC applies locally are optim.momentum,
// optim.nesterov and optim.weight_decay.
type DGCConfig struct {
	// Preset names a set of the other DGC settings (DGCPresets) that the run
	// config loader fills in wherever the config leaves them out: "paper"
	// (the defaults) or "recipe".
	Preset string `mapstructure:"preset" yaml:"preset"`
	// WeightDecayAt is where momentum correction applies weight decay:
	// "velocity" adds wd*w to the gradient DGC accumulates (it reaches a
	// coordinate only when that is selected), "optimizer" leaves it out of
	// DGC's accumulation and has SGD apply it densely every step, with a
	// momentum buffer of its own (the reference code's DGCSGD).
	WeightDecayAt      string  `mapstructure:"weight_decay_at" yaml:"weight_decay_at"`
	MomentumCorrection bool    `mapstructure:"momentum_correction" yaml:"momentum_correction"` // accumulate velocity, not gradients
	FactorMasking      bool    `mapstructure:"factor_masking" yaml:"factor_masking"`           // zero momentum and accumulator where sent
	ClipNorm           float64 `mapstructure:"clip_norm" yaml:"clip_norm"`                     // local clipping at clip_norm*N^-1/2; 0 = off
	WarmupEpochs       int     `mapstructure:"warmup_epochs" yaml:"warmup_epochs"`             // exponential density warm-up
	WarmupSchedule     string  `mapstructure:"warmup_schedule" yaml:"warmup_schedule"`         // paper, reference or stages
	Sampling           bool    `mapstructure:"sampling" yaml:"sampling"`                       // sampled threshold; false = exact top-k
	SampleRatio        float64 `mapstructure:"sample_ratio" yaml:"sample_ratio"`               // fraction of elements sampled (0.01)
}

// AdaCompConfig holds AdaComp's settings (Chen et al. 2018).
type AdaCompConfig struct {
	BinConv    int  `mapstructure:"bin_conv" yaml:"bin_conv"`       // bin length L_T for convolution weights
	BinFC      int  `mapstructure:"bin_fc" yaml:"bin_fc"`           // bin length for linear, LSTM and embedding weights
	FP32Values bool `mapstructure:"fp32_values" yaml:"fp32_values"` // send values instead of sign x scale
}

// PowerSGDConfig holds PowerSGD's settings (Vogels et al. 2019; PyTorch defaults).
type PowerSGDConfig struct {
	Rank               int     `mapstructure:"rank" yaml:"rank"`                                 // r
	StartIter          int     `mapstructure:"start_iter" yaml:"start_iter"`                     // vanilla all-reduce before this step
	MinCompressionRate float64 `mapstructure:"min_compression_rate" yaml:"min_compression_rate"` // compress when (n+m)*r*rate < n*m
	ErrorFeedback      bool    `mapstructure:"error_feedback" yaml:"error_feedback"`
	WarmStart          bool    `mapstructure:"warm_start" yaml:"warm_start"` // reuse Q across steps
	Epsilon            float64 `mapstructure:"epsilon" yaml:"epsilon"`       // orthogonalisation guard
}

// TernGradConfig holds TernGrad's settings (Wen et al. 2017).
type TernGradConfig struct {
	ClipC float64 `mapstructure:"clip_c" yaml:"clip_c"` // clip each tensor at clip_c x its standard deviation; 0 = off
}

// QSGDConfig holds QSGD's settings (Alistarh et al. 2017); qsgd.go explains them.
type QSGDConfig struct {
	Levels     int    `mapstructure:"levels" yaml:"levels"`           // s: a value is sent as sign x (0..s)/s x the bucket's norm
	BucketSize int    `mapstructure:"bucket_size" yaml:"bucket_size"` // consecutive elements sharing one norm
	Norm       string `mapstructure:"norm" yaml:"norm"`               // max (the paper's experiments) or l2 (its theory)
}

// ScaleComConfig holds ScaleCom's settings (Chen et al. 2020); scalecom.go
// explains them. k per tensor comes from compress.density.
type ScaleComConfig struct {
	Beta         float64 `mapstructure:"beta" yaml:"beta"`                   // low-pass filter gain of the memory; 1 = plain error feedback
	WarmupEpochs int     `mapstructure:"warmup_epochs" yaml:"warmup_epochs"` // DGC's exponential density warm-up; 0 = off
}

// problems checks the scalecom section (also run by newScaleCom).
func (s ScaleComConfig) problems() []Problem {
	var ps problem.List
	bad := func(ok bool, key string, v any, want string) { ps.Need(ok, "compress.scalecom."+key, v, want) }
	bad(s.Beta > 0 && s.Beta <= 1, "beta", s.Beta, "must be a fraction in (0, 1]")
	bad(s.WarmupEpochs >= 0, "warmup_epochs", s.WarmupEpochs, "must be at least 0")
	return ps
}

// GradiVeQConfig holds GradiVeQ's settings (Yu et al. 2018); gradiveq.go
// explains them. Defaults are the paper's.
type GradiVeQConfig struct {
	SliceSize     int     `mapstructure:"slice_size" yaml:"slice_size"`         // K: consecutive elements projected together
	Rank          int     `mapstructure:"rank" yaml:"rank"`                     // d components kept; 0 = the fewest keeping 1-lambda of the variance
	Lambda        float64 `mapstructure:"lambda" yaml:"lambda"`                 // variance fraction a rank-0 basis may drop
	WarmupSteps   int     `mapstructure:"warmup_steps" yaml:"warmup_steps"`     // uncompressed steps before the first sampling phase
	SampleSteps   int     `mapstructure:"sample_steps" yaml:"sample_steps"`     // L_t: uncompressed steps sampled for each basis
	CompressSteps int     `mapstructure:"compress_steps" yaml:"compress_steps"` // L_c: compressed steps per basis
	Center        bool    `mapstructure:"center" yaml:"center"`                 // subtract the sampled mean slice (the paper)
	ErrorFeedback bool    `mapstructure:"error_feedback" yaml:"error_feedback"` // residual accumulation (not in the paper)
	QuantizeBits  int     `mapstructure:"quantize_bits" yaml:"quantize_bits"`   // b: coefficients as stochastically rounded b-bit levels; 0 = float32
}

// problems checks the gradiveq section (also run by newGradiVeQ).
func (g GradiVeQConfig) problems() []Problem {
	var ps problem.List
	bad := func(ok bool, key string, v any, want string) { ps.Need(ok, "compress.gradiveq."+key, v, want) }
	bad(g.SliceSize >= 1, "slice_size", g.SliceSize, "must be at least 1")
	bad(g.Rank >= 0, "rank", g.Rank, "must be at least 0 (0 = chosen by lambda)")
	bad(g.Lambda >= 0 && g.Lambda < 1, "lambda", g.Lambda, "must be a fraction in [0, 1)")
	bad(g.WarmupSteps >= 0, "warmup_steps", g.WarmupSteps, "must be at least 0")
	bad(g.SampleSteps >= 1, "sample_steps", g.SampleSteps, "must be at least 1")
	bad(g.CompressSteps >= 1, "compress_steps", g.CompressSteps, "must be at least 1")
	bad(g.QuantizeBits == 0 || g.QuantizeBits >= 2 && g.QuantizeBits <= gvqMaxQuantizeBits, "quantize_bits", g.QuantizeBits,
		fmt.Sprintf("must be 0 (float32 coefficients) or an integer in [2, %d]", gvqMaxQuantizeBits))
	return ps
}

// gvqMaxQuantizeBits keeps a GradiVeQ level within 16 bits on the wire.
const gvqMaxQuantizeBits = 16

// LGCConfig holds LGC's settings (Abrahamyan et al. 2021); lgc.go explains
// them and where each default comes from. k per tensor comes from
// compress.density.
type LGCConfig struct {
	Variant         string  `mapstructure:"variant" yaml:"variant"`                   // ps (parameter server) or rar (ring all-reduce)
	DenseSteps      int     `mapstructure:"dense_steps" yaml:"dense_steps"`           // stage 1: dense all-reduce steps
	TrainSteps      int     `mapstructure:"train_steps" yaml:"train_steps"`           // stage 2: top-k steps that train the autoencoder
	InnovationRatio float64 `mapstructure:"innovation_ratio" yaml:"innovation_ratio"` // k'/k: each node's innovation entries (PS)
	LatentRatio     float64 `mapstructure:"latent_ratio" yaml:"latent_ratio"`         // latent values per top-k value
	Hidden          int     `mapstructure:"hidden" yaml:"hidden"`                     // hidden width of encoder and decoders
	Lambda1         float64 `mapstructure:"lambda1" yaml:"lambda1"`                   // weight of the reconstruction loss
	Lambda2         float64 `mapstructure:"lambda2" yaml:"lambda2"`                   // weight of the latent similarity loss
	LR              float64 `mapstructure:"lr" yaml:"lr"`                             // the autoencoder's learning rate
	Optimizer       string  `mapstructure:"optimizer" yaml:"optimizer"`               // adam or sgd
	// DGC's momentum correction and factor masking on the sparse stages (the
	// optimizer then takes plain steps on the compressed tensors).
	MomentumCorrection bool `mapstructure:"momentum_correction" yaml:"momentum_correction"`
	FactorMasking      bool `mapstructure:"factor_masking" yaml:"factor_masking"`
}

// lgcMaxHidden bounds the hidden width (the weights grow as K x hidden).
const lgcMaxHidden = 1 << 14

// problems checks the lgc section (also run by newLGC).
func (g LGCConfig) problems() []Problem {
	var ps problem.List
	key := func(k string) string { return "compress.lgc." + k }
	ps.OneOf(key("variant"), g.Variant, []string{"ps", "rar"})
	ps.AtLeast(key("dense_steps"), g.DenseSteps, 0)
	ps.AtLeast(key("train_steps"), g.TrainSteps, 0)
	ps.Fraction(key("innovation_ratio"), g.InnovationRatio)
	ps.Fraction(key("latent_ratio"), g.LatentRatio)
	ps.Within(key("hidden"), g.Hidden, 1, lgcMaxHidden)
	ps.Positive(key("lambda1"), g.Lambda1)
	ps.NonNegative(key("lambda2"), g.Lambda2)
	ps.Positive(key("lr"), g.LR)
	ps.OneOf(key("optimizer"), g.Optimizer, []string{"adam", "sgd"})
	return ps
}

// qsgdMaxLevels keeps a level within 16 bits on the wire.
const qsgdMaxLevels = 1<<16 - 1

// DefaultConfig is every default of the compress section, in one place.
func DefaultConfig() Config {
	return Config{
		Name:     "none",
		MinSize:  1024,
		Density:  0.001,
		Residual: true,
		DGC: DGCConfig{
			Preset: DGCPresetPaper, MomentumCorrection: true, FactorMasking: true, WarmupEpochs: 4, WarmupSchedule: "paper",
			Sampling: true, SampleRatio: 0.01, WeightDecayAt: DecayAtVelocity,
		},
		AdaComp:  AdaCompConfig{BinConv: 50, BinFC: 500},
		PowerSGD: PowerSGDConfig{Rank: 1, StartIter: 1000, MinCompressionRate: 2, ErrorFeedback: true, WarmStart: true},
		TernGrad: TernGradConfig{ClipC: 2.5},
		QSGD:     QSGDConfig{Levels: 7, BucketSize: 512, Norm: "max"},
		ScaleCom: ScaleComConfig{Beta: 0.1, WarmupEpochs: 4},
		GradiVeQ: GradiVeQConfig{SliceSize: 768, Lambda: 0.01, WarmupSteps: 2500, SampleSteps: 100, CompressSteps: 400, Center: true},
		LGC: LGCConfig{Variant: "ps", DenseSteps: 200, TrainSteps: 300, InnovationRatio: 0.01, LatentRatio: 0.25, Hidden: 64,
			Lambda1: 0.5, Lambda2: 0.5, LR: 1e-3, Optimizer: "adam", MomentumCorrection: true, FactorMasking: true},
	}
}

// Problem is one invalid setting: the full config key, the value, what is
// expected. It is the type every config section reports.
type Problem = problem.Problem

// Problems checks every field of the compress section on its own and lists all
// problems, keyed "compress.<key>". Rules that involve other sections (DGC's
// momentum correction needs plain SGD) are the run config's.
func (c Config) Problems() []Problem {
	var ps problem.List
	bad := func(ok bool, key string, v any, want string) { ps.Need(ok, "compress."+key, v, want) }
	_, known := Registry[c.Name]
	bad(known, "name", c.Name, "must be one of "+strings.Join(Names(), ", "))
	bad(c.MinSize >= 0, "min_size", c.MinSize, "must be at least 0")
	bad(c.Density > 0 && c.Density <= 1, "density", c.Density, "must be a fraction in (0, 1]")
	bad(!c.NarrowIndices || c.Name == "topk" || c.Name == "dgc", "narrow_indices", c.NarrowIndices,
		fmt.Sprintf("only topk and dgc send indices (compress.name is %q)", c.Name))
	d := c.DGC
	ps.Add(c.presetProblems()...)
	bad(d.ClipNorm >= 0, "dgc.clip_norm", d.ClipNorm, "must be >= 0 (0 = off)")
	bad(d.WarmupEpochs >= 0, "dgc.warmup_epochs", d.WarmupEpochs, "must be at least 0")
	bad(d.WarmupSchedule == "paper" || d.WarmupSchedule == "reference" || d.WarmupSchedule == "stages", "dgc.warmup_schedule", d.WarmupSchedule, "must be one of paper, reference, stages")
	bad(d.SampleRatio > 0 && d.SampleRatio <= 1, "dgc.sample_ratio", d.SampleRatio, "must be a fraction in (0, 1]")
	ps.Add(d.decayProblems()...)
	a := c.AdaComp
	bad(a.BinConv >= 1, "adacomp.bin_conv", a.BinConv, "must be at least 1")
	bad(a.BinFC >= 1, "adacomp.bin_fc", a.BinFC, "must be at least 1")
	p := c.PowerSGD
	bad(p.Rank >= 1, "powersgd.rank", p.Rank, "must be at least 1")
	bad(p.StartIter >= 0, "powersgd.start_iter", p.StartIter, "must be at least 0")
	bad(p.MinCompressionRate > 0, "powersgd.min_compression_rate", p.MinCompressionRate, "must be a positive number")
	bad(p.Epsilon >= 0, "powersgd.epsilon", p.Epsilon, "must be >= 0")
	tg := c.TernGrad
	bad(tg.ClipC >= 0 && !math.IsInf(tg.ClipC, 1), "terngrad.clip_c", tg.ClipC, "must be a finite number >= 0 (0 = off)")
	ps.Add(c.QSGD.problems()...)
	ps.Add(c.ScaleCom.problems()...)
	ps.Add(c.GradiVeQ.problems()...)
	ps.Add(c.LGC.problems()...)
	return ps
}

// Validate reports every problem of Problems at once, one per line, or nil.
func (c Config) Validate() error { return problem.Join(c.Problems()) }

// Where DGC's momentum correction applies weight decay (DGCConfig.WeightDecayAt).
const (
	DecayAtVelocity  = "velocity"
	DecayAtOptimizer = "optimizer"
)

// decayProblems checks compress.dgc.weight_decay_at (also run by newDGC).
// The optimizer placement exists only under momentum correction: without it
// the optimizer applies momentum and weight decay to the gradient already.
func (d DGCConfig) decayProblems() []Problem {
	var ps problem.List
	ps.OneOf("compress.dgc.weight_decay_at", d.WeightDecayAt, []string{DecayAtVelocity, DecayAtOptimizer})
	ps.Need(d.WeightDecayAt != DecayAtOptimizer || d.MomentumCorrection, "compress.dgc.weight_decay_at", d.WeightDecayAt,
		"needs compress.dgc.momentum_correction true: without momentum correction the optimizer applies weight decay (and momentum) to the exchanged gradient already")
	return ps
}

// OwnsMomentum reports whether the configured compressor applies momentum itself
// (DGC with momentum correction), which requires plain SGD on the receiving side.
// It asks the compressor's own declaration (Needs), so there is one place that says it.
func (c Config) OwnsMomentum() bool {
	build := Registry[c.Name]
	if build == nil {
		return false
	}
	comp, err := build(c, nil, 0, 1, 0, Hyper{})
	return err == nil && comp.Needs().OwnsMomentum
}

// problems checks the qsgd section (also run by newQSGD, which may be built
// from a config that was never validated).
func (q QSGDConfig) problems() []Problem {
	var ps problem.List
	bad := func(ok bool, key string, v any, want string) { ps.Need(ok, "compress.qsgd."+key, v, want) }
	bad(q.Levels >= 1 && q.Levels <= qsgdMaxLevels, "levels", q.Levels, fmt.Sprintf("must be an integer in [1, %d]", qsgdMaxLevels))
	bad(q.BucketSize >= 1, "bucket_size", q.BucketSize, "must be at least 1")
	bad(q.Norm == "max" || q.Norm == "l2", "norm", q.Norm, "must be one of max, l2")
	return ps
}
