package models

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gradwire/gradwire/internal/problem"
)

// Config selects and sizes a model (the `model` section of a run config).
type Config struct {
	Name       string  `mapstructure:"name" yaml:"name"`               // registry name: mlp, lenet5, resnet20, resnet32, resnet56, lstm, charlstm
	Hidden     []int   `mapstructure:"hidden" yaml:"hidden"`           // mlp: hidden layer sizes (default 512, 256)
	HiddenSize int     `mapstructure:"hidden_size" yaml:"hidden_size"` // lstm, charlstm: LSTM hidden units (default 128)
	Layers     int     `mapstructure:"layers" yaml:"layers"`           // charlstm: stacked LSTM layers (default 2)
	EmbedDim   int     `mapstructure:"embed_dim" yaml:"embed_dim"`     // charlstm: embedding width (default 64)
	BNMomentum float64 `mapstructure:"bn_momentum" yaml:"bn_momentum"` // BatchNorm running-stat momentum (default 0.1)
	BNEpsilon  float64 `mapstructure:"bn_epsilon" yaml:"bn_epsilon"`   // BatchNorm epsilon (default 1e-5)
	Ops        string  `mapstructure:"ops" yaml:"ops"`                 // layer implementation: fast (default; conv, pooling, BatchNorm, LSTM, embedding) or gorgonia (the reference)
	Precision  string  `mapstructure:"precision" yaml:"precision"`     // float32 (default) or float64 (graph and gradient exchange; parameters stay float32)
	// resnet20/32/56: each residual block's last BatchNorm scale starts at 0, not 1
	// (Goyal et al. 2017), so every block starts as its shortcut.
	ZeroInitResidual bool `mapstructure:"zero_init_residual" yaml:"zero_init_residual"`
	// The training loss's targets are (1-e)·onehot + e/classes instead of the
	// one-hot labels (Szegedy et al. 2016, section 7); 0 is off. Evaluation
	// losses stay the plain cross-entropy.
	LabelSmoothing float64 `mapstructure:"label_smoothing" yaml:"label_smoothing"`
}

// Values of Config.Precision. With float64 the graph computes forward and
// backward in float64 from the float32 parameters and hands the engine a
// float64 gradient (Net.Grad64), which it averages in float64 before rounding
// once: N workers then match one worker with N times the batch to far below
// float32 rounding, which a float32 sum in another order cannot do.
const (
	PrecisionFloat32 = "float32"
	PrecisionFloat64 = "float64"
)

// PrecisionNames lists the valid Config.Precision values; empty means float32.
func PrecisionNames() []string { return []string{PrecisionFloat32, PrecisionFloat64} }

// Values of Config.Ops: the fast ops of this package (conv, pooling, BatchNorm,
// fused ReLUs), or Gorgonia's own ops, kept as the reference they are tested
// against.
const (
	OpsFast     = "fast"
	OpsGorgonia = "gorgonia"
)

// OpsNames lists the valid Config.Ops values; empty means fast.
func OpsNames() []string { return []string{OpsFast, OpsGorgonia} }

// Input describes what the data set feeds a model, per example.
type Input struct {
	Shape   []int // one example: (C, H, W) for images, (T) token ids for text
	Classes int   // number of classes, or vocabulary size for a language model
	YLen    int   // labels per example: 1 for classifiers, T for a language model
}

// DefaultConfig is every default of the model section, in one place: the
// values a run config gets for the keys it leaves out, and the sizes a Config
// built in code gets for the fields it leaves at zero.
func DefaultConfig() Config {
	return Config{
		Name:       "lenet5",
		Hidden:     []int{512, 256},
		HiddenSize: 128,
		Layers:     2,
		EmbedDim:   64,
		BNMomentum: 0.1,
		BNEpsilon:  1e-5,
		Ops:        OpsFast,
		Precision:  PrecisionFloat32,
	}
}

// withDefaults fills the fields c leaves at zero from DefaultConfig, except
// the name, which has no meaningful default for a model built in code.
func withDefaults(c Config) Config {
	d := DefaultConfig()
	if len(c.Hidden) == 0 {
		c.Hidden = d.Hidden
	}
	if c.HiddenSize == 0 {
		c.HiddenSize = d.HiddenSize
	}
	if c.Layers == 0 {
		c.Layers = d.Layers
	}
	if c.EmbedDim == 0 {
		c.EmbedDim = d.EmbedDim
	}
	if c.BNMomentum == 0 {
		c.BNMomentum = d.BNMomentum
	}
	if c.BNEpsilon == 0 {
		c.BNEpsilon = d.BNEpsilon
	}
	return c
}

// Upper bounds on sizes. They are far above any model this trainer is for and
// catch typos and runaway sweeps before they allocate: beyond them a run dies
// in Go's "out of memory" or a makeslice panic, or takes minutes to build its
// graph. Whether a size below them fits the machine is the memory estimate's
// business, at the start of a run.
const (
	// MaxWidth bounds a layer's width (hidden sizes, embedding): a square
	// weight matrix of 1<<20 is already 4 TiB.
	MaxWidth = 1 << 20
	// MaxLayers bounds Hidden's length and Layers: Gorgonia's graph compiler is
	// quadratic in nodes, so 20,000 layers build for longer than 10 minutes,
	// while 64 build in well under a second.
	MaxLayers = 64
)

// Validate reports every problem of Problems at once, or nil.
func (c Config) Validate() error { return problem.Join(c.Problems()) }

// Problems checks every field of the model section on its own and lists all
// problems, keyed "model.<key>". Rules that involve other sections (the data set
// a model reads, the gradient exchange float64 needs) are the run config's.
func (c Config) Problems() []problem.Problem {
	var ps problem.List
	ps.OneOf("model.name", c.Name, Names())
	ps.Need(len(c.Hidden) > 0 && !slices.ContainsFunc(c.Hidden, func(h int) bool { return h < 1 }),
		"model.hidden", c.Hidden, "must be a non-empty list of sizes >= 1")
	ps.Need(len(c.Hidden) <= MaxLayers, "model.hidden", c.Hidden,
		fmt.Sprintf("must have at most %d layers (has %d)", MaxLayers, len(c.Hidden)))
	ps.Need(!slices.ContainsFunc(c.Hidden, func(h int) bool { return h > MaxWidth }), "model.hidden", c.Hidden,
		fmt.Sprintf("each size must be at most %d", MaxWidth))
	ps.Within("model.hidden_size", c.HiddenSize, 1, MaxWidth)
	ps.Within("model.layers", c.Layers, 1, MaxLayers)
	ps.Within("model.embed_dim", c.EmbedDim, 1, MaxWidth)
	ps.Fraction("model.bn_momentum", c.BNMomentum)
	ps.Positive("model.bn_epsilon", c.BNEpsilon)
	ps.Need(c.Ops == "" || slices.Contains(OpsNames(), c.Ops), "model.ops", c.Ops,
		"must be one of "+strings.Join(OpsNames(), ", ")+" (empty means "+OpsFast+")")
	_, resnet := resnetBlocks[c.Name]
	ps.Need(!c.ZeroInitResidual || resnet, "model.zero_init_residual", c.ZeroInitResidual,
		"applies to the ResNets only (resnet20, resnet32, resnet56; model.name is "+c.Name+"): the other models have no residual blocks")
	ps.Need(c.LabelSmoothing >= 0 && c.LabelSmoothing < 1, "model.label_smoothing", c.LabelSmoothing,
		"must be in [0, 1): the share of each training target spread evenly over the classes (0 = one-hot)")
	ps.Need(c.Precision == "" || slices.Contains(PrecisionNames(), c.Precision), "model.precision", c.Precision,
		"must be one of "+strings.Join(PrecisionNames(), ", ")+" (empty means "+PrecisionFloat32+")")
	return ps
}
