package models

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/optim"
)

// TestGradLSTM checks the LSTM layer's gradients, inputs included: one (T*B, in)
// parameter is cut into T steps of B rows, and all hidden states are scored.
func TestGradLSTM(t *testing.T) {
	const batch, steps, in, hidden = 2, 3, 4, 5
	checkLayer(t, Config{}, []int{steps * batch, in}, func(b *builder, x *G.Node) *G.Node {
		xs := make([]*G.Node, steps)
		for s := range xs {
			xs[s] = must(G.Slice(x, G.S(s*batch, (s+1)*batch)))
		}
		return b.stack(b.lstm(xs, in, hidden, "lstm"))
	})
}

// TestLSTMForward compares the layer's hidden states with a direct evaluation
// of the LSTM equations from the same parameters, which pins the gate order
// (i, f, g, o) that the gradient check cannot see.
func TestLSTMForward(t *testing.T) {
	const batch, steps, in, hidden = 2, 3, 4, 5
	buildMu.Lock()
	b := newBuilder(withDefaults(Config{}), tensor.Float64, false, 0)
	var out *G.Node
	func() {
		defer func() {
			if e := recover(); e != nil {
				buildMu.Unlock()
				t.Fatal(e)
			}
		}()
		x := b.param("x", optim.KindLinear, normal(1), steps*batch, in)
		xs := make([]*G.Node, steps)
		for s := range xs {
			xs[s] = must(G.Slice(x, G.S(s*batch, (s+1)*batch)))
		}
		out = b.stack(b.lstm(xs, in, hidden, "lstm"))
	}()
	flat := make([]float64, b.size())
	offsets, err := b.bind(flat)
	if err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	b.initialise(flat, offsets, 4)
	for i := range flat[offsets[3]:] { // a random bias, to see every gate's quarter
		flat[offsets[3]+i] = 0.1 * float64(i%7-3)
	}
	vm := G.NewTapeMachine(b.g)
	buildMu.Unlock()
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := out.Value().Data().([]float64) // (batch, steps, hidden)

	xv, wx, wh, bias := flat[offsets[0]:offsets[1]], flat[offsets[1]:offsets[2]], flat[offsets[2]:offsets[3]], flat[offsets[3]:]
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for n := range batch {
		h, c := make([]float64, hidden), make([]float64, hidden)
		for s := range steps {
			pre := make([]float64, 4*hidden)
			for k := range pre {
				pre[k] = bias[k]
				for j := range in {
					pre[k] += xv[(s*batch+n)*in+j] * wx[j*4*hidden+k]
				}
				for j := range hidden {
					pre[k] += h[j] * wh[j*4*hidden+k]
				}
			}
			for j := range hidden {
				i, f := sigmoid(pre[j]), sigmoid(pre[hidden+j])
				g, o := math.Tanh(pre[2*hidden+j]), sigmoid(pre[3*hidden+j])
				c[j] = f*c[j] + i*g
				h[j] = o * math.Tanh(c[j])
				if v := got[(n*steps+s)*hidden+j]; math.Abs(v-h[j]) > 1e-12 {
					t.Fatalf("example %d step %d unit %d: h = %v, expected %v", n, s, j, v, h[j])
				}
			}
		}
	}
}

// TestLSTMForgetBias checks the bias initialisation of every LSTM layer: the
// forget-gate quarter (PyTorch's gate order i, f, g, o) at 1, the rest at 0.
func TestLSTMForgetBias(t *testing.T) {
	const hidden = 6
	nets := map[string]Input{
		"lstm":     {Shape: []int{1, 4, 5}, Classes: 3, YLen: 1},
		"charlstm": {Shape: []int{5}, Classes: 7, YLen: 5},
	}
	for name, in := range nets {
		n, err := New(Config{Name: name, HiddenSize: hidden}, in, 2, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, p := range n.Params() {
			if !strings.HasPrefix(p.Name, "lstm") || p.Kind != optim.KindBias {
				continue
			}
			found++
			for j, v := range p.Value {
				want := float32(0)
				if j >= hidden && j < 2*hidden {
					want = 1
				}
				if v != want {
					t.Errorf("%s %s[%d] = %v, expected %v", name, p.Name, j, v, want)
				}
			}
		}
		if want := map[string]int{"lstm": 1, "charlstm": 2}[name]; found != want {
			t.Errorf("%s: %d LSTM biases, expected %d", name, found, want)
		}
	}
}

func TestLSTMNeedsTwoSteps(t *testing.T) {
	if _, err := New(Config{Name: "lstm"}, Input{Shape: []int{1, 1, 5}, Classes: 3, YLen: 1}, 2, 0, 1); err == nil {
		t.Error("lstm accepted a one-row image")
	}
	if _, err := New(Config{Name: "charlstm"}, Input{Shape: []int{1}, Classes: 7, YLen: 1}, 2, 0, 1); err == nil {
		t.Error("charlstm accepted a one-token window")
	}
}
