package optim

// Param is one parameter tensor: a view into the model's flat parameter buffer and
// the matching view into its flat gradient buffer.
type Param struct {
	Name    string
	Shape   []int
	Kind    Kind      // what the tensor is (weights of a conv, a linear layer, a bias, ...)
	Value   []float32 // aliases the flat parameter buffer
	Grad    []float32 // aliases the flat gradient buffer
	NoDecay bool      // biases and BatchNorm parameters: no weight decay
}

// Kind tells which sort of layer a parameter tensor belongs to; compressors and
// parameter groups use it.
type Kind string

const (
	KindConv   Kind = "conv"   // convolution weights (out, in, kh, kw)
	KindLinear Kind = "linear" // fully-connected weights (in, out)
	KindLSTM   Kind = "lstm"   // recurrent weights
	KindEmbed  Kind = "embed"  // embedding table
	KindBias   Kind = "bias"   // biases of any layer
	KindNorm   Kind = "norm"   // BatchNorm scale and shift
)

// Optimizer updates parameters in place from their gradients.
type Optimizer interface {
	// Step applies one update with learning rate lr.
	Step(params []Param, lr float64) error
	// State returns the optimizer state for checkpoints (copies).
	State() State
	// SetState restores a state returned by State; it checks names and sizes.
	SetState(State) error
}

// State is an optimizer's checkpointable state: a step counter and named buffers,
// keyed "<slot>/<param name>".
type State struct {
	Step    int64
	Buffers map[string][]float32
}
