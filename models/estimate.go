package models

import (
	"fmt"
	"github.com/gradwire/gradwire/models/ops"
	"math"
)

// Estimate is the memory one Net takes, in bytes by part, worked out from the
// model's layer sizes without building it (building a graph of a huge model
// can itself take minutes or all the memory).
//
// The figures count the tensors the graphs keep from one step to the next
// (Gorgonia's tape machine allocates every node's value once and reuses it):
// with e bytes per value (4, or 8 with model.precision float64), P parameters,
// B the training batch and E the evaluation batch,
//
//	ReplicaBytes = e·(P·g - Q) (parameters, gradient, and the training
//	               graph's gradient tensors per parameter: the backward
//	               product, and with Gorgonia's ops also its dual value: g = 3
//	               with the fast ops, 4 with Gorgonia's; Q values, those of
//	               the fast fully connected layers, have their backward
//	               product written straight into the gradient), + 4·P·2 for
//	               the float32 master copies under model.precision float64
//	TrainBytes   = e·B·(2·out + back + kept + in + l·C·Y) + e·scratch(B) + 4·B·ints
//	               (+ e·B·back + e·fixed for Gorgonia's LSTM, see sizer.lstm)
//	EvalBytes    = e·E·(out + kept + in)          + 4·E·ints
//
// per example: out is the values of every op's output (each gets a gradient
// of its size in the backward pass, hence 2·out); kept the values an op keeps
// besides its output for its backward pass (LSTM gates and cells, Gorgonia's
// im2col matrices); ints the int32 values (max-pool argmax); in the input
// (its one-hot rows for token ids); l·C·Y the labels and loss over Y rows of C
// classes: with the fast ops l = 3 (one-hot labels, the softmax the loss op
// keeps, the logits' gradient), with Gorgonia's l = 4 (one-hot labels,
// log-softmax, its product with the labels, and the gradient of the last
// two); back the backward values beyond one gradient per output (the fast
// linear layer's ReLU-masked gradient); scratch(B) the workspace the training graph's
// ops share, as large as the largest need (the LSTM backward pass's). Each
// layer's figures are in the sizer methods below. The fast convolution's
// im2col scratch is left out: a few of one layer's im2col matrices, small
// beside the activations of all layers.
type Estimate struct {
	Params int64 // learnable values

	// ParamBytes is the parameters at float32 (Params x 4), the size of one
	// copy in the optimizer, the gradient exchange or a checkpoint.
	ParamBytes uint64
	// ReplicaBytes is one replica without its activations: parameter and
	// gradient buffers and the training graph's gradient tensors.
	ReplicaBytes uint64
	// TrainBytes is one replica's training graph at the training batch:
	// forward activations, their gradients, inputs, labels and loss.
	TrainBytes uint64
	// EvalBytes is the evaluation graph at the evaluation batch. Only the
	// replica that evaluates allocates it, on its first evaluation.
	EvalBytes uint64
}

// EstimateMemory estimates the memory of New(cfg, in, batch, evalBatch, seed)
// once it has taken a training step and an evaluation (evalBatch 0 = batch).
// It fails where New would fail on the config and input, except for errors
// only building a graph finds.
func EstimateMemory(cfg Config, in Input, batch, evalBatch int) (Estimate, error) {
	e, ok := registry[cfg.Name]
	if !ok {
		return Estimate{}, fmt.Errorf("model.name: unknown model %q (valid: %v)", cfg.Name, Names())
	}
	if batch < 1 || evalBatch < 0 {
		return Estimate{}, fmt.Errorf("models: batch %d, evaluation batch %d: expected batch >= 1 and evaluation batch >= 0", batch, evalBatch)
	}
	if evalBatch == 0 {
		evalBatch = batch
	}
	if err := e.accepts(cfg, in); err != nil {
		return Estimate{}, fmt.Errorf("model %s: %w", cfg.Name, err)
	}
	cfg = withDefaults(cfg)
	s := &sizer{fast: cfg.Ops != OpsGorgonia}
	sizers[cfg.Name](s, cfg, in)

	elem := 4.0
	if cfg.Precision == PrecisionFloat64 {
		elem = 8
	}
	p := float64(s.params)
	input := float64(numel(in.Shape))
	if e.tokens {
		input = float64(in.YLen * in.Classes) // one-hot rows
	}
	labels, grads := float64(4*in.YLen*in.Classes), 4.0
	if s.fast {
		labels, grads = float64(3*in.YLen*in.Classes), 3
	}
	replica := elem * (p*grads - float64(s.gradInPlace))
	if cfg.Precision == PrecisionFloat64 {
		replica += 4 * p * 2
	}
	b, eb := float64(batch), float64(evalBatch)
	return Estimate{
		Params:       s.params,
		ParamBytes:   bytesOf(4 * p),
		ReplicaBytes: bytesOf(replica),
		TrainBytes:   bytesOf(elem*(b*(2*s.out+s.back+s.kept+input+labels)+s.fixed+s.scratchAt(b)) + 4*b*s.ints),
		EvalBytes:    bytesOf(elem*eb*(s.out+s.kept+input) + 4*eb*s.ints),
	}, nil
}

// bytesOf converts a byte count computed in float64 (sizes of absurd configs
// overflow an int) to uint64, saturating.
func bytesOf(x float64) uint64 {
	if x >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Ceil(x))
}

// sizers follow each registered model's build function layer by layer.
var sizers = map[string]func(s *sizer, cfg Config, in Input){
	"mlp":      sizeMLP,
	"lenet5":   sizeLeNet5,
	"resnet20": sizeResNet,
	"resnet32": sizeResNet,
	"resnet56": sizeResNet,
	"lstm":     sizeLSTMClassifier,
	"charlstm": sizeCharLSTM,
}

// sizer counts a model's parameters and its per-example activation values
// (see Estimate) as the layer functions of builder would create them. Sizes
// are float64: a config that overflows an int is still sized, and refused.
type sizer struct {
	fast   bool // model.ops fast, else Gorgonia's ops
	params int64
	// gradInPlace is the parameters whose gradient op writes straight into
	// the flat gradient buffer (ops.OutputInto).
	gradInPlace int64
	out         float64
	kept        float64
	ints        float64
	back        float64 // training: backward values beyond one gradient per output
	fixed       float64 // training: values that do not grow with the batch
	// Training scratch: the workspace the graph's ops share is as large as
	// the largest one needs, perEx values per example plus fixed.
	scratches []scratchNeed
}

type scratchNeed struct{ perEx, fixed float64 }

func (s *sizer) scratch(perEx, fixed float64) {
	s.scratches = append(s.scratches, scratchNeed{perEx, fixed})
}

// scratchAt is the training workspace at batch b: the largest need.
func (s *sizer) scratchAt(b float64) float64 {
	var most float64
	for _, n := range s.scratches {
		most = max(most, n.perEx*b+n.fixed)
	}
	return most
}

// image is an activation's per-example shape (C, H, W).
type image struct{ c, h, w int }

func (m image) size() float64 { return float64(m.c) * float64(m.h) * float64(m.w) }

// linear: the fast op's output (and, with a ReLU, the masked gradient its
// backward pass keeps); Gorgonia's x·W (Mul) and the broadcast bias add, each
// a (B, out) tensor, and a ReLU node.
func (s *sizer) linear(in, out int) { s.dense(in, out, false) }

func (s *sizer) linearReLU(in, out int) { s.dense(in, out, true) }

func (s *sizer) dense(in, out int, relu bool) {
	s.params += int64(in)*int64(out) + int64(out)
	if s.fast {
		s.gradInPlace += int64(in)*int64(out) + int64(out)
		s.out += float64(out)
		if relu {
			s.back += float64(out)
		}
		return
	}
	s.out += 2 * float64(out)
	if relu {
		s.relu(float64(out))
	}
}

func (s *sizer) relu(n float64) { s.out += n }

// conv: the output; with a bias, the fast path's fused bias(+ReLU) output.
// Gorgonia's convolution keeps its im2col matrix (C·k·k rows per output
// position), which takes part in the backward pass, and its bias add and
// ReLU are nodes of their own.
func (s *sizer) conv(x image, cout, k, stride, pad int, bias, relu bool) image {
	s.params += int64(cout) * int64(x.c) * int64(k) * int64(k)
	y := image{cout, (x.h+2*pad-k)/stride + 1, (x.w+2*pad-k)/stride + 1}
	s.out += y.size()
	if !s.fast {
		s.out += float64(x.c*k*k) * float64(y.h*y.w)
	}
	if bias {
		s.params += int64(cout)
		s.out += y.size()
		if relu && !s.fast {
			s.relu(y.size())
		}
	}
	return y
}

// batchNorm: the normalised output (the fast op keeps only per-channel
// statistics besides). Gorgonia's BatchNorm computes through centred,
// normalised and scaled tensors, and a separate ReLU.
func (s *sizer) batchNorm(x image, relu bool) {
	s.params += 2 * int64(x.c)
	if s.fast {
		s.out += x.size()
		return
	}
	s.out += 3 * x.size()
	if relu {
		s.relu(x.size())
	}
}

// maxPool: the output and its argmax (int32).
func (s *sizer) maxPool(x image, k, stride int) image {
	y := image{x.c, (x.h-k)/stride + 1, (x.w-k)/stride + 1}
	s.out += y.size()
	s.ints += y.size()
	return y
}

// addReLU: the residual sum; Gorgonia's adds a separate ReLU.
func (s *sizer) addReLU(x image) {
	s.out += x.size()
	if !s.fast {
		s.relu(x.size())
	}
}

// lstm over steps of in features to hidden units. The fast op keeps the four
// activated gates, the cells and their tanh for every step, and writes every
// step's h (also when only the last is returned). Gorgonia's unrolled steps
// are about 25 (B, hidden) nodes a step: four gates of two products and two
// sums and an activation each, then the cell and h updates.
func (s *sizer) lstm(steps, in, hidden int, last bool) {
	h, t := float64(hidden), float64(steps)
	s.params += int64(in)*int64(4*hidden) + int64(hidden)*int64(4*hidden) + int64(4*hidden)
	if !s.fast {
		// Gorgonia's unrolled steps: about 14 (B, hidden) nodes a step
		// forward (four gates of two products, two sums and an activation,
		// then the cell and h updates), and backward more than one gradient
		// per node, as every product and sum differentiates into new nodes:
		// 13 more a step when only the last h is used, 40 when every step's
		// h is (measured on the LSTM classifier and the char-LSTM). Each
		// step's weight products also get weight-sized gradients before
		// they are summed.
		s.out += 14 * h * t
		if last {
			s.back += 13 * h * t
		} else {
			s.back += 40 * h * t
		}
		s.fixed += t * 4 * (float64(in)*h + h*h)
		return
	}
	s.kept += 6 * h * t // gates (4), cells, tanh(cells)
	// The backward pass's scratch, shared by the graph's ops: per chunk of
	// the batch (at most ops.LSTMMaxChunks) a part of each weight gradient and
	// the carried dh and dc; with the native GEMM, each worker's transposed
	// operands for its chunk: (5·hidden + in)·T values per example when
	// every chunk has its worker.
	parts := float64(ops.LSTMMaxChunks) * float64(in*4*hidden+hidden*4*hidden+4*hidden)
	perEx := 2 * h
	if ops.NativeGEMM() {
		perEx += (5*h + float64(in)) * t
	}
	s.scratch(perEx, parts)
	if last {
		s.kept += h * t
		s.out += h
	} else {
		s.out += h * t
	}
}

// embedding of steps tokens into dim values each.
func (s *sizer) embedding(steps, vocab, dim int) {
	s.params += int64(vocab) * int64(dim)
	s.out += float64(steps) * float64(dim)
}

// The models, as their build functions lay them out.

func sizeMLP(s *sizer, cfg Config, in Input) {
	width := numel(in.Shape)
	for _, h := range cfg.Hidden {
		s.linearReLU(width, h)
		width = h
	}
	s.linear(width, in.Classes)
}

func sizeLeNet5(s *sizer, _ Config, in Input) {
	pad, _ := lenetPad(in.Shape[1])
	x := image{in.Shape[0], in.Shape[1], in.Shape[2]}
	x = s.maxPool(s.conv(x, 6, 5, 1, pad, true, true), 2, 2)
	x = s.maxPool(s.conv(x, 16, 5, 1, 0, true, true), 2, 2)
	s.linearReLU(int(x.size()), 120)
	s.linearReLU(120, 84)
	s.linear(84, in.Classes)
}

func sizeResNet(s *sizer, cfg Config, in Input) {
	x := s.conv(image{in.Shape[0], in.Shape[1], in.Shape[2]}, 16, 3, 1, 1, false, false)
	s.batchNorm(x, true)
	for st, cout := range []int{16, 32, 64} {
		for i := range resnetBlocks[cfg.Name] {
			stride := 1
			if st > 0 && i == 0 {
				stride = 2
			}
			h := s.conv(x, cout, 3, stride, 1, false, false)
			s.batchNorm(h, true)
			h = s.conv(h, cout, 3, 1, 1, false, false)
			s.batchNorm(h, false)
			if stride != 1 || x.c != cout {
				d := s.conv(x, cout, 1, stride, 0, false, false)
				s.batchNorm(d, false)
			}
			s.addReLU(h)
			x = h
		}
	}
	s.out += 64 // global average pool
	s.linear(64, in.Classes)
}

func sizeLSTMClassifier(s *sizer, cfg Config, in Input) {
	c, h, w := in.Shape[0], in.Shape[1], in.Shape[2]
	if c > 1 {
		s.kept += float64(c * h * w) // the transposed input
	}
	s.lstm(h, c*w, cfg.HiddenSize, true)
	s.linear(cfg.HiddenSize, in.Classes)
}

func sizeCharLSTM(s *sizer, cfg Config, in Input) {
	steps, vocab := in.Shape[0], in.Classes
	s.embedding(steps, vocab, cfg.EmbedDim)
	width := cfg.EmbedDim
	for range cfg.Layers {
		s.lstm(steps, width, cfg.HiddenSize, false)
		width = cfg.HiddenSize
	}
	if !s.fast {
		s.out += float64(steps) * float64(width) // Gorgonia's steps stacked into one node
	}
	// The output layer runs on every step: (B*T, hidden) -> (B*T, vocab).
	s.params += int64(width)*int64(vocab) + int64(vocab)
	s.out += 2 * float64(steps) * float64(vocab)
}
