package models

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// sgdSteps trains a model with plain SGD (lr 0.1) for the given number of
// steps on seeded batches and returns the parameters, the last step's losses
// and the BatchNorm running statistics, as float64.
func sgdSteps(t *testing.T, cfg Config, in Input, batch, steps int, dt tensor.Dtype, opts ...Option) (flat []float64, losses []float64, stats [][]float64) {
	t.Helper()
	n, err := newNet(cfg, in, batch, 0, 7, dt, opts)
	if err != nil {
		t.Fatal(err)
	}
	for s := range steps {
		x, y := randomBatch(uint64(s+1), batch, in, false)
		loss, err := n.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
		switch f := n.flat.(type) {
		case []float64:
			for i, g := range n.grad.([]float64) {
				f[i] -= 0.1 * g
			}
		case []float32:
			for i, g := range n.grad.([]float32) {
				f[i] -= 0.1 * g
			}
		}
	}
	switch f := n.flat.(type) {
	case []float64:
		flat = slices.Clone(f)
	case []float32:
		flat = f64s(f)
	}
	for _, op := range n.train.b.bns {
		m, v := op.Stats()
		for _, s := range []tensor.Tensor{m, v} {
			switch d := s.Data().(type) {
			case []float64:
				stats = append(stats, slices.Clone(d))
			case []float32:
				stats = append(stats, f64s(d))
			}
		}
	}
	return flat, losses, stats
}

var opsModels = []struct {
	cfg   Config
	in    Input
	batch int
}{
	{Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 5},
	{Config{Name: "resnet20"}, Input{Shape: []int{3, 16, 16}, Classes: 10, YLen: 1}, 4},
	{Config{Name: "mlp", Hidden: []int{32, 16}}, Input{Shape: []int{1, 8, 8}, Classes: 5, YLen: 1}, 6},
}

// TestFastModelsMatchGorgonia trains each model for three SGD steps in float64
// with the fast ops and with Gorgonia's from the same seed: parameters,
// losses and running statistics agree to 1e-10 relative.
func TestFastModelsMatchGorgonia(t *testing.T) {
	for _, c := range opsModels {
		t.Run(c.cfg.Name, func(t *testing.T) {
			ref := c.cfg
			ref.Ops = OpsGorgonia
			wantFlat, wantLoss, wantStats := sgdSteps(t, ref, c.in, c.batch, 3, tensor.Float64)
			fast := c.cfg
			fast.Ops = OpsFast
			gotFlat, gotLoss, gotStats := sgdSteps(t, fast, c.in, c.batch, 3, tensor.Float64)
			if err := near(gotLoss, wantLoss, 1e-10); err != nil {
				t.Errorf("losses: %v", err)
			}
			if err := near(gotFlat, wantFlat, 1e-10); err != nil {
				t.Errorf("parameters after 3 steps: %v", err)
			}
			if len(gotStats) != len(wantStats) {
				t.Fatalf("%d running statistics, expected %d", len(gotStats), len(wantStats))
			}
			for i := range wantStats {
				if err := near(gotStats[i], wantStats[i], 1e-10); err != nil {
					t.Errorf("running statistics %d: %v", i, err)
				}
			}
			// The steps moved the parameters: the comparison is not vacuous.
			init, _, _ := sgdSteps(t, fast, c.in, c.batch, 0, tensor.Float64)
			if near(gotFlat, init, 1e-3) == nil {
				t.Error("parameters did not change in 3 steps")
			}
		})
	}
}

// TestFastFloat32MatchesFloat64 trains the fast models in float32 and float64
// from the same seed: after three steps the float32 losses agree to 1e-4
// relative and the parameters to 1e-4 (relative to 1 + |value|), the
// accumulated rounding of float32 sums and GEMMs over a few thousand terms.
//
// ResNet-20 runs at batch 8 here, not opsModels' 4: at batch 4 its third step
// is not a smooth function of the rounding. Perturbing the float64 model's
// initial parameters by 2e-7 relative (float32's rounding) moved the third
// loss by 6e-4 or 4e-3 relative in 6 of 11 trials, to two discrete values
// (a jump of the gradient, as where a ReLU's input crosses 0), so whether float32
// passed depended on where its rounding fell; at batch 8 the same
// perturbations moved it by at most 1e-6.
func TestFastFloat32MatchesFloat64(t *testing.T) {
	for _, c := range opsModels[:2] {
		if c.cfg.Name == "resnet20" {
			c.batch = 8
		}
		t.Run(c.cfg.Name, func(t *testing.T) {
			want, wantLoss, _ := sgdSteps(t, c.cfg, c.in, c.batch, 3, tensor.Float64)
			got, gotLoss, _ := sgdSteps(t, c.cfg, c.in, c.batch, 3, tensor.Float32)
			if err := near(gotLoss, wantLoss, 1e-4); err != nil {
				t.Errorf("losses: %v", err)
			}
			if err := near(got, want, 1e-4); err != nil {
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

// TestFastOpsWorkerCountInvariant trains ResNet-20 in float32 with 1, 2 and 3
// op workers: every reduction has a fixed order, so the parameters agree bit
// for bit.
func TestFastOpsWorkerCountInvariant(t *testing.T) {
	in := Input{Shape: []int{3, 8, 8}, Classes: 10, YLen: 1}
	var want []float64
	for _, w := range []int{1, 2, 3} {
		got, _, stats := sgdSteps(t, Config{Name: "resnet20"}, in, 19, 2, tensor.Float32, WithOpWorkers(w))
		got = append(got, slices.Concat(stats...)...)
		if want == nil {
			want = got
			continue
		}
		if err := near(got, want, 0); err != nil {
			t.Errorf("%d workers vs 1: %v", w, err)
		}
	}
}

// TestFastStepAllocations pins the fast ops' buffer reuse: a ResNet-20 step at
// batch 8 allocates far less than one of its activation tensors
// (8·16·32·32·4 bytes = 512 KiB), so no op reallocates its output per step.
func TestFastStepAllocations(t *testing.T) {
	in := Input{Shape: []int{3, 32, 32}, Classes: 10, YLen: 1}
	n, err := New(Config{Name: "resnet20"}, in, 8, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomBatch(1, 8, in, false)
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
	if perStep > 256<<10 {
		t.Errorf("a ResNet-20 step at batch 8 allocates %d bytes, expected under 256 KiB", perStep)
	}
}

// TestBuffersAliasRunningStats writes running statistics through Buffers, as a
// checkpoint restore does, and checks that Predict normalises with them, for
// both BatchNorm implementations.
func TestBuffersAliasRunningStats(t *testing.T) {
	const name = "test-bn-linear"
	registry[name] = entry{accepts: image3D, build: func(b *builder, x *G.Node, in Input, _ int) *G.Node {
		return b.linear(globalAvgPool(b.batchNorm(x, in.Shape[0], "bn")), in.Shape[0], in.Classes, "fc")
	}}
	t.Cleanup(func() { delete(registry, name) })
	in := Input{Shape: []int{2, 1, 3}, Classes: 2, YLen: 1}
	for _, ops := range OpsNames() {
		n, err := New(Config{Name: name, Ops: ops}, in, 2, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		bufs := n.Buffers()
		if len(bufs) != 2 || !strings.HasSuffix(bufs[0].Name, "running_mean") || !strings.HasSuffix(bufs[1].Name, "running_var") {
			t.Fatalf("%s: buffers %v", ops, bufs)
		}
		copy(bufs[0].Value, []float32{0.5, -1})
		copy(bufs[1].Value, []float32{4, 0.25})
		copy(n.Flat(), []float32{2, 3, 0.5, -0.5, 1, 0, 0, 1, 0, 0}) // scale, shift, fc.w, fc.b
		x := []float32{1, 2, 3, 0, 0, 0, -1, 0, 1, 2, 2, 2}
		out := make([]float32, 4)
		if err := n.Predict(x, out); err != nil {
			t.Fatal(err)
		}
		// Channel means of the examples: (2, 0) and (0, 2); fc.w is the identity.
		want := []float64{
			2*(2-0.5)/math.Sqrt(4+1e-5) + 0.5, 3*(0+1)/math.Sqrt(0.25+1e-5) - 0.5,
			2*(0-0.5)/math.Sqrt(4+1e-5) + 0.5, 3*(2+1)/math.Sqrt(0.25+1e-5) - 0.5,
		}
		if err := near(f64s(out), want, 1e-6); err != nil {
			t.Errorf("%s: logits: %v", ops, err)
		}
	}
}

func TestOpsConfig(t *testing.T) {
	in := Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	_, err := New(Config{Name: "lenet5", Ops: "turbo"}, in, 2, 0, 1)
	if want := `model.ops: "turbo": must be one of fast, gorgonia`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ops turbo: error %v, expected %q", err, want)
	}
	for ops, fast := range map[string]bool{"": true, OpsFast: true, OpsGorgonia: false} {
		n, err := New(Config{Name: "lenet5", Ops: ops}, in, 2, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n.train.b.fast() != fast {
			t.Errorf("ops %q: fast ops %v, expected %v", ops, !fast, fast)
		}
	}
}

// TestFloat64Precision: with model.precision float64 the parameters are the
// float32 model's (same seed), Step computes in float64 from them, exactly as
// a float64 net holding the same values does, and the optimizer's views are
// float32.
func TestFloat64Precision(t *testing.T) {
	in := Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	cfg := Config{Name: "lenet5"}
	n32, err := New(cfg, in, 3, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Precision = PrecisionFloat64
	n, err := New(cfg, in, 3, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Flat(), n32.Flat()) {
		t.Fatal("float64 precision starts from different parameters than float32")
	}
	if n32.Grad64() != nil {
		t.Fatal("a float32 model has a float64 gradient")
	}
	ref, err := newNet(Config{Name: "lenet5"}, in, 3, 0, 5, tensor.Float64, nil)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 2 {
		// What an optimizer does: update the float32 parameters through the views.
		for _, p := range n.Params() {
			for i := range p.Value {
				p.Value[i] -= 0.01 * float32(i%7)
			}
		}
		refFlat := ref.flat.([]float64)
		for i, v := range n.Flat() {
			refFlat[i] = float64(v)
		}
		x, y := randomBatch(uint64(step+1), 3, in, false)
		loss, err := n.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		refLoss, err := ref.Step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		if loss != refLoss || !slices.Equal(n.Grad64(), ref.grad.([]float64)) {
			t.Fatalf("step %d: float64 precision differs from a float64 net with the same parameters (loss %v vs %v)", step, loss, refLoss)
		}
	}
	// The float32 views are what the optimizer sees: Params alias Flat and Grad.
	p := n.Params()[0]
	if &p.Value[0] != &n.Flat()[0] || &p.Grad[0] != &n.Grad()[0] {
		t.Fatal("parameter views do not alias the float32 buffers")
	}
	out, refOut := make([]float32, 3*10), make([]float32, 3*10)
	x, _ := randomBatch(9, 3, in, false)
	if err := n.Predict(x, out); err != nil {
		t.Fatal(err)
	}
	if err := ref.Predict(x, refOut); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, refOut) {
		t.Fatal("Predict differs from the float64 net's")
	}

	_, err = New(Config{Name: "resnet20", Precision: PrecisionFloat64}, Input{Shape: []int{3, 16, 16}, Classes: 10, YLen: 1}, 2, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "BatchNorm") {
		t.Errorf("resnet20 in float64: err = %v, want a BatchNorm error", err)
	}
	if _, err = New(Config{Name: "lenet5", Precision: "float16"}, in, 2, 0, 1); err == nil || !strings.Contains(err.Error(), `model.precision: "float16"`) {
		t.Errorf("float16: err = %v, want a model.precision error", err)
	}
}

// TestWithOpWorkers checks that the option reaches the ops' workspaces of
// both graphs, and that nets built with different settings coexist (the
// setting is no longer process-wide).
func TestWithOpWorkers(t *testing.T) {
	in := Input{Shape: []int{1, 28, 28}, Classes: 3, YLen: 1}
	three, err := New(Config{Name: "lenet5"}, in, 2, 0, 1, WithOpWorkers(3))
	if err != nil {
		t.Fatal(err)
	}
	def, err := New(Config{Name: "lenet5"}, in, 2, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := three.OpWorkers(); got != 3 || three.EvalOpWorkers() != 3 {
		t.Errorf("WithOpWorkers(3): train graph %d, eval graph %d workers", got, three.EvalOpWorkers())
	}
	split, err := New(Config{Name: "lenet5"}, in, 2, 0, 1, WithOpWorkers(1), WithEvalOpWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	if split.OpWorkers() != 1 || split.EvalOpWorkers() != 2 {
		t.Errorf("WithOpWorkers(1), WithEvalOpWorkers(2): train graph %d, eval graph %d workers", split.OpWorkers(), split.EvalOpWorkers())
	}
	if got, want := def.OpWorkers(), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("default: %d workers, want GOMAXPROCS %d", got, want)
	}
	if got := three.OpWorkers(); got != 3 {
		t.Errorf("building a second net changed the first's workers to %d", got)
	}
}

// TestPredictWorkerCountInvariant evaluates every registered model after a
// training step (so BatchNorm's running statistics are not the initial ones)
// with 1, 2 and 3 goroutines a fast op in the evaluation graph, at an
// evaluation batch of 7 (uneven splits): the logits agree bit for bit, so a
// trainer may evaluate on more cores than it trains a replica on.
func TestPredictWorkerCountInvariant(t *testing.T) {
	image := Input{Shape: []int{3, 12, 12}, Classes: 10, YLen: 1}
	fashion := Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	text := Input{Shape: []int{9}, Classes: 20, YLen: 9}
	cases := []struct {
		cfg Config
		in  Input
	}{
		{Config{Name: "mlp", Hidden: []int{24, 16}}, image},
		{Config{Name: "lenet5"}, fashion},
		{Config{Name: "resnet20"}, image},
		{Config{Name: "resnet32"}, image},
		{Config{Name: "resnet56"}, image},
		{Config{Name: "lstm", HiddenSize: 16}, image},
		{Config{Name: "charlstm", HiddenSize: 16, Layers: 2, EmbedDim: 8}, text},
	}
	const batch, evalBatch = 4, 7
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.cfg.Name] = true
		tokens := c.cfg.Name == "charlstm"
		x, y := randomBatch(1, batch, c.in, tokens)
		ex, _ := randomBatch(2, evalBatch, c.in, tokens)
		var want []float32
		for _, w := range []int{1, 2, 3} {
			n, err := New(c.cfg, c.in, batch, evalBatch, 5, WithOpWorkers(1), WithEvalOpWorkers(w))
			if err != nil {
				t.Fatal(err)
			}
			if got := n.EvalOpWorkers(); got != w {
				t.Fatalf("%s: evaluation graph has %d workers, want %d", c.cfg.Name, got, w)
			}
			if _, err := n.Step(x, y); err != nil {
				t.Fatal(err)
			}
			logits := make([]float32, evalBatch*c.in.YLen*c.in.Classes)
			if err := n.Predict(ex, logits); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = logits
				continue
			}
			for i := range want {
				if math.Float32bits(logits[i]) != math.Float32bits(want[i]) {
					t.Errorf("%s, %d evaluation workers: logit %d = %v, with 1 worker %v", c.cfg.Name, w, i, logits[i], want[i])
					break
				}
			}
		}
	}
	for _, name := range Names() {
		if !seen[name] {
			t.Errorf("model %s is not checked", name)
		}
	}
}
