package models

import (
	"fmt"
	"math"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// mnistMLP is the benchmarked MLP, 784-512-256-10.
var mnistMLP = struct {
	cfg Config
	in  Input
}{Config{Name: "mlp"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}}

// TestFastMLPStepMatchesGorgonia takes one float32 training step of the
// 784-512-256-10 MLP at batch 64 with the fast ops (fused linear layers and
// loss) and with Gorgonia's, from the same parameters and batch. The loss
// agrees to 1e-6 relative and every gradient tensor to 1e-5 of its largest
// value: the two sum their products in different orders, which in float32
// moves them by a few 1e-7 of that value (measured); a wrong formula (a
// missing ReLU mask or 1/batch, a transposed product) is off by order 1.
func TestFastMLPStepMatchesGorgonia(t *testing.T) {
	const batch = 64
	x, y := randomBatch(3, batch, mnistMLP.in, false)
	var loss [2]float64
	var grads [2][]float32
	var params []string
	var offsets, sizes []int
	for i, ops := range []string{OpsGorgonia, OpsFast} {
		cfg := mnistMLP.cfg
		cfg.Ops = ops
		n, err := New(cfg, mnistMLP.in, batch, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if loss[i], err = n.Step(x, y); err != nil {
			t.Fatal(err)
		}
		grads[i] = slices.Clone(n.Grad())
		if i == 0 {
			for j, p := range n.Params() {
				params, offsets, sizes = append(params, p.Name), append(offsets, n.offsets[j]), append(sizes, numel(p.Shape))
			}
		}
	}
	if d := math.Abs(loss[1] - loss[0]); d > 1e-6*loss[0] {
		t.Errorf("loss %.9g, Gorgonia's %.9g", loss[1], loss[0])
	}
	for j, name := range params {
		got, want := grads[1][offsets[j]:][:sizes[j]], grads[0][offsets[j]:][:sizes[j]]
		scale, worst := 0.0, 0.0
		for k := range want {
			scale = max(scale, math.Abs(float64(want[k])))
			worst = max(worst, math.Abs(float64(got[k]-want[k])))
		}
		if scale == 0 || worst > 1e-5*scale {
			t.Errorf("gradient of %s: differs from Gorgonia's by up to %.3g, its largest value is %.3g", name, worst, scale)
		}
		t.Logf("gradient of %s: largest difference %.3g of %.3g", name, worst, scale)
	}
}

// TestFastMLPWorkerCountInvariant trains the MLP and LeNet-5 (whose fully
// connected layers are the fused op too) for two float32 SGD steps with 1, 2
// and 3 op workers: the parameters agree bit for bit.
func TestFastMLPWorkerCountInvariant(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		in    Input
		batch int
	}{
		{mnistMLP.cfg, mnistMLP.in, 33},
		{Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 7},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			var want []float64
			for _, w := range []int{1, 2, 3} {
				got, losses, _ := sgdSteps(t, c.cfg, c.in, c.batch, 2, tensor.Float32, WithOpWorkers(w))
				got = append(got, losses...)
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

// TestFastLinearWritesGradInPlace: the fused layers' parameter gradients are
// the flat gradient buffer itself (nothing to copy after a step), and a
// second step overwrites them rather than adding to them.
func TestFastLinearWritesGradInPlace(t *testing.T) {
	n, err := New(Config{Name: "mlp", Hidden: []int{16}}, Input{Shape: []int{1, 4, 4}, Classes: 3, YLen: 1}, 5, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomBatch(1, 5, n.Input(), false)
	if _, err := n.Step(x, y); err != nil {
		t.Fatal(err)
	}
	first := slices.Clone(n.Grad())
	for i, p := range n.Params() {
		d := n.gradNodes[i].Value().Data().([]float32)
		if &d[0] != &p.Grad[0] {
			t.Errorf("gradient of %s is not written into the flat gradient", p.Name)
		}
	}
	if _, err := n.Step(x, y); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Grad(), first) {
		t.Error("a second step on the same batch changed the gradient")
	}
}

// TestFastLinearSkipsInputGradient: the first layer's input is the graph's
// input (through a flatten), so its op builds no input gradient.
func TestFastLinearSkipsInputGradient(t *testing.T) {
	n, err := New(mnistMLP.cfg, mnistMLP.in, 2, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, node := range n.train.b.g.AllNodes() {
		if op := node.Op(); op != nil {
			names = append(names, fmt.Sprint(op))
		}
	}
	count := func(prefix string) int {
		c := 0
		for _, s := range names {
			if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
				c++
			}
		}
		return c
	}
	if lin, dx := count("Linear("), count("LinearGradX("); lin != 3 || dx != 2 {
		t.Errorf("%d linear ops with %d input gradients, expected 3 with 2: %v", lin, dx, names)
	}
	if c := count("SoftmaxXent("); c != 1 {
		t.Errorf("%d fused losses, expected 1: %v", c, names)
	}
}

// TestFastLinearMatchesGorgonia compares the fused layer with Gorgonia's
// Mul, BroadcastAdd and Rectify (float64, to 1e-10) and across 1, 2 and 3
// workers (bit for bit), with and without the ReLU, on a shape that fits in
// one block and on one whose products are cut into several.
func TestFastLinearMatchesGorgonia(t *testing.T) {
	for _, c := range []struct{ rows, in, out int }{{5, 7, 4}, {6, 300, 200}} {
		for _, relu := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d->%d_relu=%v", c.rows, c.in, c.out, relu), func(t *testing.T) {
				fastMatchesGorgonia(t, []int{c.rows, c.in}, func(b *builder, x *G.Node) *G.Node {
					return b.dense(x, c.in, c.out, "fc", relu)
				})
			})
		}
	}
}
