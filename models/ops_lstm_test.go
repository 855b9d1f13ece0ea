package models

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lstmCase is one fused-LSTM layer: input (B, T, in), hidden units, and
// whether only the last hidden state is returned.
type lstmCase struct {
	b, t, in, h int
	last        bool
}

func (c lstmCase) String() string {
	return fmt.Sprintf("B%d_T%d_in%d_H%d_last%v", c.b, c.t, c.in, c.h, c.last)
}

func (c lstmCase) layer(b *builder, x *G.Node) *G.Node {
	if c.last {
		return b.lstmLast(seq{whole: x}, c.in, c.h, "lstm")
	}
	return b.wholeSeq(b.lstmSeq(seq{whole: x}, c.in, c.h, "lstm"))
}

// lstmCases cover one chunk per sequence (B <= lstmMaxChunks), chunks of
// unequal sizes (B = 9 in 4 chunks), and a single step's hidden state.
var lstmCases = []lstmCase{
	{2, 3, 3, 4, false},
	{2, 3, 3, 4, true},
	{5, 4, 2, 3, false},
	{9, 5, 6, 5, false},
	{9, 5, 6, 5, true},
}

// TestFastLSTMGrad checks the fused op's gradients (input, Wx, Wh, bias)
// against central differences, on one and two workers.
func TestFastLSTMGrad(t *testing.T) {
	for _, c := range lstmCases {
		for _, w := range []int{1, 2} {
			t.Run(fmt.Sprintf("%v/workers%d", c, w), func(t *testing.T) {
				checkLayerOn(t, Config{Ops: OpsFast}, w, []int{c.b, c.t, c.in}, c.layer)
			})
		}
	}
}

// TestFastLSTMMatchesGorgonia compares the fused op with the per-step
// Gorgonia layer (outputs and every gradient to 1e-10 relative), and checks
// that 1, 2 and 3 workers give the same bits.
func TestFastLSTMMatchesGorgonia(t *testing.T) {
	for _, c := range lstmCases {
		t.Run(c.String(), func(t *testing.T) {
			fastMatchesGorgonia(t, []int{c.b, c.t, c.in}, c.layer)
		})
	}
}

// TestFastLSTMForward pins the fused op's hidden states against a direct
// evaluation of the equations (gate order i, f, g, o), with a bias that
// differs per gate.
func TestFastLSTMForward(t *testing.T) {
	c := lstmCase{3, 4, 2, 5, false}
	out, xv, flat := forward(t, []int{c.b, c.t, c.in}, func(b *builder, x *G.Node) *G.Node {
		if !b.fast() {
			t.Fatal("forward builds with the default model.ops, expected fast")
		}
		return c.layer(b, x)
	})
	g4 := 4 * c.h
	wx, wh, bias := flat[:c.in*g4], flat[c.in*g4:(c.in+c.h)*g4], flat[(c.in+c.h)*g4:]
	got := out.Data().([]float64)
	if len(bias) != g4 || len(got) != c.b*c.t*c.h {
		t.Fatalf("%d bias values and %d outputs", len(bias), len(got))
	}
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for n := range c.b {
		h, cell := make([]float64, c.h), make([]float64, c.h)
		for s := range c.t {
			pre := make([]float64, g4)
			for k := range pre {
				pre[k] = bias[k]
				for j := range c.in {
					pre[k] += xv[(n*c.t+s)*c.in+j] * wx[j*g4+k]
				}
				for j := range c.h {
					pre[k] += h[j] * wh[j*g4+k]
				}
			}
			for j := range c.h {
				i, f := sigmoid(pre[j]), sigmoid(pre[c.h+j])
				g, o := math.Tanh(pre[2*c.h+j]), sigmoid(pre[3*c.h+j])
				cell[j] = f*cell[j] + i*g
				h[j] = o * math.Tanh(cell[j])
				if v := got[(n*c.t+s)*c.h+j]; math.Abs(v-h[j]) > 1e-12 {
					t.Fatalf("sequence %d step %d unit %d: h = %v, expected %v", n, s, j, v, h[j])
				}
			}
		}
	}
}

// TestFastLSTMInputNoGrad checks the layer on the graph's input: no input
// gradient is built, and the weight gradients match Gorgonia's.
func TestFastLSTMInputNoGrad(t *testing.T) {
	c := lstmCase{3, 4, 2, 5, true}
	grads := map[string][][]float64{}
	for _, ops := range OpsNames() {
		b := newBuilder(withDefaults(Config{Ops: ops}), tensor.Float64, true, 0)
		buildMu.Lock()
		x := b.input("x", c.b, c.t, c.in)
		loss := must(G.Sum(must(G.Square(c.layer(b, x)))))
		flat := make([]float64, b.size())
		offsets, err := b.bind(flat)
		if err != nil {
			buildMu.Unlock()
			t.Fatal(err)
		}
		b.initialise(flat, offsets, 3)
		xv := make([]float64, c.b*c.t*c.in)
		for i := range xv {
			xv[i] = math.Sin(float64(i))
		}
		if err := G.Let(x, tensor.New(tensor.WithShape(c.b, c.t, c.in), tensor.WithBacking(xv))); err != nil {
			buildMu.Unlock()
			t.Fatal(err)
		}
		var nodes G.Nodes
		for _, p := range b.params {
			nodes = append(nodes, p.node)
		}
		_, err = G.Grad(loss, nodes...)
		vm := G.NewTapeMachine(b.g, G.BindDualValues(nodes...))
		buildMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if ops == OpsFast {
			for _, n := range b.g.AllNodes() {
				if opKind(n.Op()) == "LSTMGradX" {
					t.Errorf("the input's LSTM built %v", n.Op())
				}
			}
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		for _, p := range nodes {
			gv, err := p.Grad()
			if err != nil {
				t.Fatal(err)
			}
			grads[ops] = append(grads[ops], slices.Clone(gv.Data().([]float64)))
		}
		vm.Close()
	}
	for i := range grads[OpsGorgonia] {
		if err := near(grads[OpsFast][i], grads[OpsGorgonia][i], 1e-10); err != nil {
			t.Errorf("gradient %d: %v", i, err)
		}
	}
}

// TestFastEmbeddingMatchesGorgonia compares the sparse embedding product with
// Gorgonia's dense one on real-valued rows with zeros among them (input and
// table gradients included).
func TestFastEmbeddingMatchesGorgonia(t *testing.T) {
	fastMatchesGorgonia(t, []int{6, 5}, func(b *builder, x *G.Node) *G.Node {
		// Zero some entries so that rows hold 0 to 5 nonzeros.
		mask := make([]float64, 30)
		for i := range mask {
			if i%7 != 3 && i%4 != 1 {
				mask[i] = 1
			}
		}
		for i := 25; i < 30; i++ {
			mask[i] = 0
		}
		m := G.NewConstant(tensor.New(tensor.WithShape(6, 5), tensor.WithBacking(mask)), G.WithName("mask"))
		return b.embedding([]*G.Node{must(G.HadamardProd(x, m))}, 5, 3, "embed")[0]
	})
}

// lstmModels are the LSTM models compared with fast and Gorgonia ops: the
// classifier (one and two channels) and the char-LSTM.
var lstmModels = []struct {
	cfg   Config
	in    Input
	batch int
}{
	{Config{Name: "lstm", HiddenSize: 7}, Input{Shape: []int{1, 6, 5}, Classes: 4, YLen: 1}, 6},
	{Config{Name: "lstm", HiddenSize: 5}, Input{Shape: []int{2, 4, 3}, Classes: 3, YLen: 1}, 3},
	{Config{Name: "charlstm", Layers: 2, HiddenSize: 6, EmbedDim: 4}, Input{Shape: []int{7}, Classes: 9, YLen: 7}, 5},
}

// lstmSGD trains a model with plain SGD (lr 0.5) from seed 7 for the given
// steps on seeded batches (token ids for the char-LSTM) and returns the
// parameters and losses as float64.
func lstmSGD(t *testing.T, cfg Config, in Input, batch, steps int, dt tensor.Dtype, opts ...Option) (flat, losses []float64) {
	t.Helper()
	n, err := newNet(cfg, in, batch, 0, 7, dt, opts)
	if err != nil {
		t.Fatal(err)
	}
	for s := range steps {
		x, y := randomBatch(uint64(s+1), batch, in, n.tokens)
		loss, err := n.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
		switch f := n.flat.(type) {
		case []float64:
			for i, g := range n.grad.([]float64) {
				f[i] -= 0.5 * g
			}
		case []float32:
			for i, g := range n.grad.([]float32) {
				f[i] -= 0.5 * g
			}
		}
	}
	switch f := n.flat.(type) {
	case []float64:
		return slices.Clone(f), losses
	default:
		return f64s(f.([]float32)), losses
	}
}

// TestFastLSTMModelsMatchGorgonia trains the LSTM models for three SGD steps
// in float64 with the fast ops and with Gorgonia's from the same seed: losses
// and parameters agree to 1e-10 relative.
func TestFastLSTMModelsMatchGorgonia(t *testing.T) {
	for _, c := range lstmModels {
		t.Run(fmt.Sprintf("%s_%v", c.cfg.Name, c.in.Shape), func(t *testing.T) {
			ref := c.cfg
			ref.Ops = OpsGorgonia
			want, wantLoss := lstmSGD(t, ref, c.in, c.batch, 3, tensor.Float64)
			fast := c.cfg
			fast.Ops = OpsFast
			got, gotLoss := lstmSGD(t, fast, c.in, c.batch, 3, tensor.Float64)
			if err := near(gotLoss, wantLoss, 1e-10); err != nil {
				t.Errorf("losses: %v", err)
			}
			if err := near(got, want, 1e-10); err != nil {
				t.Errorf("parameters after 3 steps: %v", err)
			}
			init, _ := lstmSGD(t, fast, c.in, c.batch, 0, tensor.Float64)
			if near(got, init, 1e-3) == nil {
				t.Error("parameters did not change in 3 steps")
			}
		})
	}
}

// TestFastLSTMFloat32MatchesFloat64 trains the fast LSTM models in float32
// and float64 from the same seed: after three steps the losses and the
// parameters agree to 1e-5 (relative to 1 + |value|).
func TestFastLSTMFloat32MatchesFloat64(t *testing.T) {
	for _, c := range lstmModels {
		t.Run(fmt.Sprintf("%s_%v", c.cfg.Name, c.in.Shape), func(t *testing.T) {
			want, wantLoss := lstmSGD(t, c.cfg, c.in, c.batch, 3, tensor.Float64)
			got, gotLoss := lstmSGD(t, c.cfg, c.in, c.batch, 3, tensor.Float32)
			if err := near(gotLoss, wantLoss, 1e-5); err != nil {
				t.Errorf("losses: %v", err)
			}
			if err := near(got, want, 1e-5); err != nil {
				t.Errorf("parameters: %v", err)
			}
			worst := 0.0
			for i := range got {
				worst = math.Max(worst, math.Abs(got[i]-want[i])/(1+math.Abs(want[i])))
			}
			t.Logf("largest float32 - float64 parameter difference: %.3g", worst)
		})
	}
}

// TestFastLSTMWorkerCountInvariant trains the LSTM models in float32 with 1,
// 2 and 3 op workers, at batches that cut into uneven chunks: the parameters
// agree bit for bit.
func TestFastLSTMWorkerCountInvariant(t *testing.T) {
	for _, c := range lstmModels {
		t.Run(fmt.Sprintf("%s_%v", c.cfg.Name, c.in.Shape), func(t *testing.T) {
			var want []float64
			for _, w := range []int{1, 2, 3} {
				got, _ := lstmSGD(t, c.cfg, c.in, 11, 2, tensor.Float32, WithOpWorkers(w))
				if want == nil {
					want = got
					continue
				}
				if err := near(got, want, 0); err != nil {
					t.Errorf("%d workers vs 1: %v", w, err)
				}
			}
		})
	}
}

// TestFastLSTMGraphSize pins what the fused ops are for: the char-LSTM graph
// no longer grows with the sequence length.
func TestFastLSTMGraphSize(t *testing.T) {
	nodes := func(steps int) int {
		in := Input{Shape: []int{steps}, Classes: 5, YLen: steps}
		n, err := New(Config{Name: "charlstm", HiddenSize: 4, EmbedDim: 3}, in, 2, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(n.train.b.g.AllNodes())
	}
	if a, b := nodes(4), nodes(40); a != b {
		t.Errorf("%d graph nodes at T = 4, %d at T = 40", a, b)
	}
}

// TestFastLSTMStepAllocations checks the buffer reuse of the fused ops in the
// models: a training step allocates less than one layer's gates (B·T·4H
// values). What remains is Gorgonia's output layer and loss: the char-LSTM's
// output product allocates the gradient of its (B·T, H) input every step.
func TestFastLSTMStepAllocations(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		in    Input
		batch int
		limit uint64
	}{
		// Gates 16·28·512·4 bytes = 896 KiB.
		{Config{Name: "lstm"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 16, 64 << 10},
		// Gates 8·64·512·4 bytes = 1 MiB per layer; a small vocabulary keeps
		// the logits small.
		{Config{Name: "charlstm"}, Input{Shape: []int{64}, Classes: 5, YLen: 64}, 8, 1 << 20},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			n, err := New(c.cfg, c.in, c.batch, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			x, y := randomBatch(1, c.batch, c.in, n.tokens)
			for range 2 {
				if _, err := n.Step(x, y); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			const steps = 3
			runtime.ReadMemStats(&before)
			for range steps {
				if _, err := n.Step(x, y); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perStep := (after.TotalAlloc - before.TotalAlloc) / steps
			t.Logf("%d bytes, %d objects per step", perStep, (after.Mallocs-before.Mallocs)/steps)
			if perStep > c.limit {
				t.Errorf("a step allocates %d bytes, expected under %d", perStep, c.limit)
			}
		})
	}
}

// TestFastLSTMModelsSkipInputGrad checks that no gradient is built for the
// graph's input: the classifier's LSTM reads the image through a reshape (and
// a transpose for several channels), the char-LSTM's embedding reads the
// one-hot tokens. The char-LSTM's layers do pass input gradients on, down to
// the embedding table.
func TestFastLSTMModelsSkipInputGrad(t *testing.T) {
	for _, c := range []struct {
		cfg           Config
		in            Input
		lstms, lstmDX int
	}{
		{Config{Name: "lstm", HiddenSize: 4}, Input{Shape: []int{1, 4, 5}, Classes: 3, YLen: 1}, 1, 0},
		{Config{Name: "lstm", HiddenSize: 4}, Input{Shape: []int{2, 4, 3}, Classes: 3, YLen: 1}, 1, 0},
		{Config{Name: "charlstm", HiddenSize: 4, EmbedDim: 3}, Input{Shape: []int{5}, Classes: 6, YLen: 5}, 2, 2},
	} {
		n, err := New(c.cfg, c.in, 2, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		lstms, lstmDX := 0, 0
		for _, node := range n.train.b.g.AllNodes() {
			switch opKind(node.Op()) {
			case "LSTM":
				lstms++
			case "LSTMGradX":
				lstmDX++
			case "EmbeddingDataGrad":
				t.Errorf("%s: the embedding built %v", c.cfg.Name, node.Op())
			}
		}
		if lstms != c.lstms || lstmDX != c.lstmDX {
			t.Errorf("%s %v: %d fused LSTM ops with %d input gradients, expected %d with %d",
				c.cfg.Name, c.in.Shape, lstms, lstmDX, c.lstms, c.lstmDX)
		}
	}
}

// opKind is the kind of a fast op, its name without its parameters and id
// ("LSTMGradX" for "LSTMGradX(2x4x3->4,last=true)#17"); "" for an input node's
// nil op.
func opKind(op G.Op) string {
	if op == nil {
		return ""
	}
	name := op.String()
	if i := strings.IndexAny(name, "(#"); i >= 0 {
		return name[:i]
	}
	return name
}
