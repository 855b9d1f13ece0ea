package models

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// lstm is one LSTM layer unrolled over the time steps xs, each of shape
// (B, inSize); it returns the hidden state (B, hidden) after every step. The
// state starts at h = c = 0 for every batch (truncated backpropagation through
// the window). With gates i, f, g, o in PyTorch's order:
//
//	[i f g o] = x·Wx + h·Wh + b;  i, f, o = sigmoid, g = tanh
//	c = f*c + i*g;  h = o*tanh(c)
//
// Wx (inSize, 4*hidden) and Wh (hidden, 4*hidden) are Glorot-uniform; the bias
// (4*hidden) is zero except the forget-gate quarter, which starts at 1.
//
// Models pass whole sequences to lstmSeq or lstmLast instead: with the fast
// ops, a list of steps is stacked into the fused op and its output unstacked,
// which costs the O(T²) backward of unstack.
func (b *builder) lstm(xs []*G.Node, inSize, hidden int, name string) []*G.Node {
	hs, _ := b.lstmLayer(seq{steps: xs}, inSize, hidden, false, name)
	return b.stepSeq(hs)
}

// lstmSeq is an LSTM layer over the sequence s, returning every step's hidden
// state: one (B, T, hidden) node with the fast ops, T step nodes with
// Gorgonia's.
func (b *builder) lstmSeq(s seq, inSize, hidden int, name string) seq {
	hs, _ := b.lstmLayer(s, inSize, hidden, false, name)
	return hs
}

// lstmLast is an LSTM layer over s that returns only the last hidden state
// (B, hidden).
func (b *builder) lstmLast(s seq, inSize, hidden int, name string) *G.Node {
	_, h := b.lstmLayer(s, inSize, hidden, true, name)
	return h
}

// lstmLayer declares the layer's parameters and builds it with the fast op
// (ops.LSTM) or Gorgonia's per-step ops: all steps' hidden states, or with
// last only the last one.
func (b *builder) lstmLayer(s seq, inSize, hidden int, last bool, name string) (seq, *G.Node) {
	steps := len(s.steps)
	if s.whole != nil {
		steps = s.whole.Shape()[1]
	}
	if steps < 2 {
		// One step would leave Wh and the forget gate out of the graph, and
		// Gorgonia refuses gradients of parameters that do not reach the loss.
		b.fail("models: %s: %d time steps, expected at least 2", name, steps)
	}
	wx := b.param(name+".wx", optim.KindLSTM, glorotUniform(inSize, 4*hidden), inSize, 4*hidden)
	wh := b.param(name+".wh", optim.KindLSTM, glorotUniform(hidden, 4*hidden), hidden, 4*hidden)
	bias := b.param(name+".b", optim.KindBias, forgetBias(hidden), 4*hidden)
	var batch int
	if s.whole != nil {
		batch = s.whole.Shape()[0]
	} else {
		batch = s.steps[0].Shape()[0]
	}
	// Per step: x·Wx and h·Wh for the four gates (no h·Wh at the first step).
	b.addProductFLOPs(batch*steps, inSize, 4*hidden)
	b.addProductFLOPs(batch*(steps-1), hidden, 4*hidden)
	if b.fast() {
		x := b.wholeSeq(s)
		y := must(ops.LSTM(b.ws, x, wx, wh, bias, last, !b.inputs[x]))
		if last {
			return seq{}, y
		}
		return seq{whole: y}, nil
	}
	hs := b.lstmSteps(b.stepSeq(s), wx, wh, bias, inSize, hidden)
	if last {
		return seq{}, hs[len(hs)-1]
	}
	return seq{steps: hs}, nil
}

// lstmSteps builds the layer from Gorgonia's ops, step by step, the reference
// the fast op is tested against.
//
// Each gate has its own products x·Wx_k and h·Wh_k, from column blocks of Wx and
// Wh sliced once per layer. Measured alternatives, both slower in Gorgonia
// v0.9.18: one (B, 4*hidden) product per step split into gates (each slice's
// backward allocates and adds a full (B, 4*hidden) gradient; training steps
// 10-17% slower), and x·Wx for all steps in one stacked product sliced per step
// (the same backward costs O(T²): 1.7-1.9x slower for the 28-step classifier).
// The split form has fewer graph nodes, which matters because Gorgonia's
// compiler (NewTapeMachine) is quadratic in them: New takes about 2.3 s for the
// default char-LSTM at T = 64 and 37 s at T = 256 (the split form about half).
func (b *builder) lstmSteps(xs []*G.Node, wxp, whp, biasp *G.Node, inSize, hidden int) []*G.Node {
	wx := gates(wxp, inSize, hidden)
	wh := gates(whp, hidden, hidden)
	bias := gates(biasp, 1, hidden)
	// G.BroadcastAdd adds four graph nodes per call (reshape, size, repeat,
	// add): repeat each gate's bias to (B, hidden) once, as ones(B, 1)·b_k.
	// Gorgonia merges constants by name, and its default name is the value
	// printed (elided for long tensors): name the shape.
	batch := xs[0].Shape()[0]
	ones := G.NewConstant(tensor.Ones(b.dt, batch, 1), G.WithName(fmt.Sprintf("ones(%d,1)", batch)))
	for k := range bias {
		bias[k] = must(G.Mul(ones, bias[k]))
	}

	// pre is gate k's pre-activation at one step (h is nil at the first).
	pre := func(k int, x, h *G.Node) *G.Node {
		a := must(G.Add(must(G.Mul(x, wx[k])), bias[k]))
		if h != nil {
			a = must(G.Add(a, must(G.Mul(h, wh[k]))))
		}
		return a
	}
	out := make([]*G.Node, len(xs))
	var h, c *G.Node
	for t, x := range xs {
		i := must(G.Sigmoid(pre(0, x, h)))
		g := must(G.Tanh(pre(2, x, h)))
		o := must(G.Sigmoid(pre(3, x, h)))
		ig := must(G.HadamardProd(i, g))
		if c == nil {
			c = ig // c0 = 0: the forget gate has nothing to act on
		} else {
			f := must(G.Sigmoid(pre(1, x, h)))
			c = must(G.Add(must(G.HadamardProd(f, c)), ig))
		}
		h = must(G.HadamardProd(o, must(G.Tanh(c))))
		out[t] = h
	}
	return out
}

// gates splits a (rows, 4*hidden) LSTM weight into its four gate blocks of
// shape (rows, hidden); a (4*hidden) bias, with rows = 1, into (1, hidden) rows.
// The reshape to (rows, 4, hidden) keeps slice offsets below 4, clear of
// Gorgonia's slice-hash collisions at multiples of 256 (sequence.go).
func gates(w *G.Node, rows, hidden int) [4]*G.Node {
	var out [4]*G.Node
	r := must(G.Reshape(w, tensor.Shape{rows, 4, hidden}))
	for k := range out {
		out[k] = must(G.Slice(r, nil, G.S(k)))
	}
	return out
}

// forgetBias initialises an LSTM bias: zero except the forget-gate quarter,
// set to 1 so that the cell keeps its state early in training (Gers et al.
// 2000; Jozefowicz et al. 2015) instead of forgetting half of it every step.
func forgetBias(hidden int) initFn {
	return func(_ *rand.Rand, v []float64) {
		for j := hidden; j < 2*hidden; j++ {
			v[j] = 1
		}
	}
}
