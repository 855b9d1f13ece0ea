package models

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
