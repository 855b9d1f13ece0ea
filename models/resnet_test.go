package models

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
)

func TestGradBasicBlock(t *testing.T) {
	t.Run("identity", func(t *testing.T) {
		checkLayer(t, Config{}, []int{3, 4, 4, 4}, func(b *builder, x *G.Node) *G.Node { return b.basicBlock(x, 4, 4, 1, "blk") })
	})
	t.Run("downsample", func(t *testing.T) {
		checkLayer(t, Config{}, []int{3, 2, 6, 6}, func(b *builder, x *G.Node) *G.Node { return b.basicBlock(x, 2, 4, 2, "blk") })
	})
}

func TestGradResNet20(t *testing.T) {
	checkModel(t, Config{Name: "resnet20"}, Input{Shape: []int{3, 8, 8}, Classes: 5, YLen: 1}, 3, 2)
}

// TestNumParams pins each model's size against a count by hand from its
// architecture (conv: out*in*k*k + bias, BN: 2*C, linear: in*out + out).
func TestNumParams(t *testing.T) {
	cifar := Input{Shape: []int{3, 32, 32}, Classes: 10, YLen: 1}
	fashion := Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	for _, c := range []struct {
		name string
		in   Input
		want int
	}{
		// conv1 1*6*25+6 = 156, conv2 6*16*25+16 = 2,416, fc1 400*120+120 = 48,120,
		// fc2 120*84+84 = 10,164, fc3 84*10+10 = 850.
		{"lenet5", fashion, 61706},
		{"lenet5", cifar, 61706 + 2*6*25}, // conv1 reads 3 channels, no padding
		// Stem 3*16*9 + BN 32 = 464. Per stage, n-1 identity blocks of
		// 2*(c*c*9) + 2*2c each (16: 4,672; 32: 18,560; 64: 73,984) and one first
		// block: 16: 4,672; 32: 16*32*9 + 32*32*9 + 2*64 + 1x1 16*32 + BN 64 = 14,528;
		// 64: 32*64*9 + 64*64*9 + 2*128 + 32*64 + 128 = 57,728. fc 64*10+10 = 650.
		// n = 3: 272,474 (269,722 without the option-B shortcuts' 2,752, the paper's 0.27M);
		// each further block per stage adds 4,672 + 18,560 + 73,984 = 97,216.
		{"resnet20", cifar, 272474},
		{"resnet20", fashion, 272474 - 2*16*9}, // stem reads 1 channel; 28, 14, 7
		{"resnet32", cifar, 272474 + 2*97216},
		{"resnet56", cifar, 272474 + 6*97216},
	} {
		n, err := New(Config{Name: c.name}, c.in, 1, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.NumParams(); got != c.want {
			t.Errorf("%s on %v: %d parameters, expected %d", c.name, c.in.Shape, got, c.want)
		}
	}
}

// channelStats returns the per-channel mean and unbiased variance of an NCHW batch.
func channelStats(x []float64, b, c, hw int) (mean, variance []float64) {
	mean, variance = make([]float64, c), make([]float64, c)
	for ch := range c {
		s := 0.0
		for n := range b {
			for _, v := range x[(n*c+ch)*hw : (n*c+ch+1)*hw] {
				s += v
			}
		}
		mean[ch] = s / float64(b*hw)
		ss := 0.0
		for n := range b {
			for _, v := range x[(n*c+ch)*hw : (n*c+ch+1)*hw] {
				ss += (v - mean[ch]) * (v - mean[ch])
			}
		}
		variance[ch] = ss / float64(b*hw-1)
	}
	return mean, variance
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestBatchNormRunningStats checks the first BatchNorm of ResNet-20 after one
// training step: starting from mean 0 and variance 1, momentum 0.1 gives
// 0.1*batch mean and 0.9 + 0.1*unbiased batch variance of the stem conv's
// output, computed here by the textbook convolution.
func TestBatchNormRunningStats(t *testing.T) {
	in := Input{Shape: []int{3, 8, 8}, Classes: 5, YLen: 1}
	const batch = 4
	n, err := New(Config{Name: "resnet20"}, in, batch, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomBatch(9, batch, in, false)
	if _, err := n.Step(x, y); err != nil {
		t.Fatal(err)
	}
	w := n.Params()[0]
	if w.Name != "conv1.w" {
		t.Fatalf("first parameter %q, expected conv1.w", w.Name)
	}
	conv, _ := naiveConv2d(f64s(x), append([]int{batch}, in.Shape...), f64s(w.Value), 16, 3, 1, 1, nil)
	mean, variance := channelStats(conv, batch, 16, 64)
	bufs := n.Buffers()
	if bufs[0].Name != "bn1.running_mean" || bufs[1].Name != "bn1.running_var" {
		t.Fatalf("buffers %q, %q, expected bn1's running mean and variance", bufs[0].Name, bufs[1].Name)
	}
	for c := range 16 {
		wantM, wantV := 0.1*mean[c], 0.9+0.1*variance[c]
		if m := float64(bufs[0].Value[c]); math.Abs(m-wantM) > 1e-5*(1+math.Abs(wantM)) {
			t.Errorf("channel %d: running mean %g, expected %g", c, m, wantM)
		}
		if v := float64(bufs[1].Value[c]); math.Abs(v-wantV) > 1e-5*(1+math.Abs(wantV)) {
			t.Errorf("channel %d: running variance %g, expected %g", c, v, wantV)
		}
	}
}

// TestPredictUsesRunningStats checks the evaluation graph end to end on a model
// small enough to compute by hand: BatchNorm, global average pool, linear. After
// one training step Predict must normalise with the running statistics (not the
// evaluation batch's), so each example's logits follow the formula alone.
func TestPredictUsesRunningStats(t *testing.T) {
	// A temporary registry entry: this test must not run in parallel with others.
	const name = "test-bn-pool-linear"
	registry[name] = entry{accepts: image3D, build: func(b *builder, x *G.Node, in Input, _ int) *G.Node {
		c := in.Shape[0]
		return b.linear(globalAvgPool(b.batchNorm(x, c, "bn")), c, in.Classes, "fc")
	}}
	t.Cleanup(func() { delete(registry, name) })
	in := Input{Shape: []int{2, 3, 3}, Classes: 3, YLen: 1}
	const c, hw, batch = 2, 9, 4
	n, err := New(Config{Name: name}, in, batch, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomBatch(1, batch, in, false)
	if _, err := n.Step(x, y); err != nil {
		t.Fatal(err)
	}
	mean, variance := channelStats(f64s(x), batch, c, hw)
	// Parameters that differ from their initial values, so that each one matters.
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range n.Flat() {
		n.Flat()[i] = float32(rng.NormFloat64())
	}
	p := map[string][]float64{}
	for _, q := range n.Params() {
		p[q.Name] = f64s(q.Value)
	}
	x2, _ := randomBatch(2, batch, in, false)
	got := make([]float32, batch*in.Classes)
	if err := n.Predict(x2, got); err != nil {
		t.Fatal(err)
	}
	for e := range batch {
		for k := range in.Classes {
			want := p["fc.b"][k]
			for ch := range c {
				s := 0.0
				for _, v := range x2[(e*c+ch)*hw : (e*c+ch+1)*hw] {
					s += float64(v)
				}
				rm, rv := 0.1*mean[ch], 0.9+0.1*variance[ch]
				norm := p["bn.scale"][ch]*(s/hw-rm)/math.Sqrt(rv+1e-5) + p["bn.shift"][ch]
				want += norm * p["fc.w"][ch*in.Classes+k]
			}
			if g := float64(got[e*in.Classes+k]); math.Abs(g-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("example %d class %d: logit %g, expected %g", e, k, g, want)
			}
		}
	}
}

// TestGradResNet20ZeroInitResidual checks the gradients where the blocks'
// second BatchNorm scales are 0. Their shifts are moved off 0 first: with both
// at 0 each block adds nothing to its input, a previous ReLU's output, so many
// of its ReLU's inputs sit exactly at the kink, where a central difference
// gives half the one-sided slope.
func TestGradResNet20ZeroInitResidual(t *testing.T) {
	checkModel(t, Config{Name: "resnet20", ZeroInitResidual: true}, Input{Shape: []int{3, 8, 8}, Classes: 5, YLen: 1}, 3, 2, func(n *Net) {
		rng := rand.New(rand.NewPCG(5, 6))
		flat := n.flat.([]float64)
		for i, p := range n.train.b.params {
			if strings.HasSuffix(p.name, ".bn2.shift") {
				for j := range numel(p.shape) {
					flat[n.offsets[i]+j] = 0.2 * rng.NormFloat64()
				}
			}
		}
	})
}

// TestZeroInitResidual: each block's second BatchNorm scale starts at 0 and
// every other scale at 1, so each block's residual branch outputs its shift
// (0) and passes no gradient back: after one step its convolutions and first
// BatchNorm have zero gradients, while its second BatchNorm, the shortcuts'
// convolutions, the stem and the classifier have gradients. Without the
// option nothing is zero.
func TestZeroInitResidual(t *testing.T) {
	in := Input{Shape: []int{1, 8, 8}, Classes: 5, YLen: 1}
	for _, zero := range []bool{true, false} {
		n, err := New(Config{Name: "resnet20", ZeroInitResidual: zero}, in, 4, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		x, y := randomBatch(3, 4, in, false)
		if _, err := n.Step(x, y); err != nil {
			t.Fatal(err)
		}
		branch, blocks := 0, 0
		for _, p := range n.Params() {
			inBranch := strings.Contains(p.Name, ".conv1.") || strings.Contains(p.Name, ".conv2.") || strings.Contains(p.Name, ".bn1.")
			if strings.HasPrefix(p.Name, "s") && strings.HasSuffix(p.Name, ".bn2.scale") {
				blocks++
				want := float32(1)
				if zero {
					want = 0
				}
				if slices.ContainsFunc(p.Value, func(v float32) bool { return v != want }) {
					t.Fatalf("zero_init_residual %v: %s does not start at %v: %v", zero, p.Name, want, p.Value)
				}
			} else if strings.HasSuffix(p.Name, ".scale") && slices.ContainsFunc(p.Value, func(v float32) bool { return v != 1 }) {
				t.Errorf("zero_init_residual %v: %s does not start at 1", zero, p.Name)
			}
			allZero := !slices.ContainsFunc(p.Grad, func(g float32) bool { return g != 0 })
			if strings.HasPrefix(p.Name, "s") && inBranch {
				branch++
				if allZero != zero {
					t.Errorf("zero_init_residual %v: %s's gradient all zero: %v", zero, p.Name, allZero)
				}
			} else if allZero {
				t.Errorf("zero_init_residual %v: %s has no gradient", zero, p.Name)
			}
		}
		if blocks != 9 || branch != 9*4 {
			t.Errorf("found %d blocks and %d branch tensors, want 9 and 36", blocks, branch)
		}
	}
}
