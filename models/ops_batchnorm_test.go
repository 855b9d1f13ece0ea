package models

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var bnShapes = [][]int{{4, 3, 2, 3}, {2, 2, 5, 5}, {1, 3, 4, 4}, {5, 1, 1, 2}}

func bnLayer(relu bool) func(b *builder, x *G.Node) *G.Node {
	return func(b *builder, x *G.Node) *G.Node {
		if relu {
			return b.batchNormReLU(x, x.Shape()[1], "bn")
		}
		return b.batchNorm(x, x.Shape()[1], "bn")
	}
}

func TestFastBatchNormGrad(t *testing.T) {
	for _, relu := range []bool{false, true} {
		for _, s := range bnShapes {
			t.Run(fmt.Sprintf("in%v_relu%v", s, relu), func(t *testing.T) {
				checkLayer(t, Config{Ops: OpsFast}, s, bnLayer(relu))
			})
		}
	}
}

// TestFastBatchNormMatchesGorgonia compares outputs, gradients and the running
// statistics after two training steps with Gorgonia's op (+ Rectify).
func TestFastBatchNormMatchesGorgonia(t *testing.T) {
	for _, relu := range []bool{false, true} {
		for _, s := range bnShapes {
			t.Run(fmt.Sprintf("in%v_relu%v", s, relu), func(t *testing.T) {
				fastMatchesGorgonia(t, s, bnLayer(relu))
				ref := runLayer(t, OpsGorgonia, 0, s, bnLayer(relu)).bns[0]
				fast := runLayer(t, OpsFast, 2, s, bnLayer(relu)).bns[0]
				for i, name := range []string{"mean", "variance"} {
					w, g := ref.Stats()
					f, h := fast.Stats()
					want, got := []tensor.Tensor{w, g}[i], []tensor.Tensor{f, h}[i]
					if err := near(got.Data().([]float64), want.Data().([]float64), 1e-12); err != nil {
						t.Errorf("running %s: %v", name, err)
					}
				}
			})
		}
	}
}

// TestBatchNormByHand runs both BatchNorm implementations on an input small
// enough to work out by hand, (2, 2, 1, 2) with channel 0 = {1, 3, 5, 7}
// (mean 4, biased variance 5, unbiased 20/3) and channel 1 = {2, 2, 4, 0}
// (mean 2, biased variance 2, unbiased 8/3), scale (2, 0.5), shift (1, -1).
func TestBatchNormByHand(t *testing.T) {
	const eps = 1e-5
	x := []float64{
		1, 3, 2, 2, // sample 0: channel 0, channel 1
		5, 7, 4, 0, // sample 1
	}
	// Training: (x - batch mean) / sqrt(biased variance + eps) * scale + shift.
	s0, s1 := 2/math.Sqrt(5+eps), 0.5/math.Sqrt(2+eps)
	train := []float64{
		(1-4)*s0 + 1, (3-4)*s0 + 1, 0*s1 - 1, 0*s1 - 1, // channel 1 of sample 0 is its mean, 2
		(5-4)*s0 + 1, (7-4)*s0 + 1, (4-2)*s1 - 1, (0-2)*s1 - 1,
	}
	// Running statistics after two steps on x from mean 0, variance 1, momentum 0.1:
	// m1 = 0.1·mean, m2 = 0.9·m1 + 0.1·mean; v1 = 0.9 + 0.1·unbiased, v2 = 0.9·v1 + 0.1·unbiased.
	m2 := []float64{0.9*0.4 + 0.4, 0.9*0.2 + 0.2}
	v2 := []float64{0.9*(0.9+2.0/3) + 2.0/3, 0.9*(0.9+0.8/3) + 0.8/3}
	// Evaluation on the same x: the running statistics replace the batch's.
	e0, e1 := 2/math.Sqrt(v2[0]+eps), 0.5/math.Sqrt(v2[1]+eps)
	eval := []float64{
		(1-m2[0])*e0 + 1, (3-m2[0])*e0 + 1, (2-m2[1])*e1 - 1, (2-m2[1])*e1 - 1,
		(5-m2[0])*e0 + 1, (7-m2[0])*e0 + 1, (4-m2[1])*e1 - 1, (0-m2[1])*e1 - 1,
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-6
		}
		for _, ops := range OpsNames() {
			for _, relu := range []bool{false, true} {
				name := fmt.Sprintf("%v_%s_relu%v", dt, ops, relu)
				if ops == OpsGorgonia && dt == tensor.Float32 {
					tol = 3e-6 // Gorgonia's float32 op keeps its statistics in float32
				}
				t.Run(name, func(t *testing.T) {
					bnByHand(t, dt, ops, relu, x, train, eval, m2, v2, tol)
				})
			}
		}
	}
}

func bnByHand(t *testing.T, dt tensor.Dtype, ops string, relu bool, x, train, eval, mean, variance []float64, tol float64) {
	b := newBuilder(withDefaults(Config{Ops: ops}), dt, true, 0)
	xn := b.input("x", 2, 2, 1, 2)
	var y *G.Node
	if relu {
		y = b.batchNormReLU(xn, 2, "bn")
	} else {
		y = b.batchNorm(xn, 2, "bn")
	}
	params := []float64{2, 0.5, 1, -1} // scale, then shift
	var flat any = params
	xv := tensor.New(tensor.WithShape(2, 2, 1, 2), tensor.WithBacking(x))
	if dt == tensor.Float32 {
		flat = f32s(params)
		xv = tensor.New(tensor.WithShape(2, 2, 1, 2), tensor.WithBacking(f32s(x)))
	}
	if _, err := b.bind(flat); err != nil {
		t.Fatal(err)
	}
	if err := G.Let(xn, xv); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(b.g)
	defer vm.Close()
	op := b.bns[0]
	if err := op.Reset(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, got any, want []float64, relu bool) {
		t.Helper()
		w := append([]float64(nil), want...)
		if relu {
			for i := range w {
				w[i] = math.Max(w[i], 0)
			}
		}
		g, ok := got.([]float64)
		if !ok {
			g = f64s(got.([]float32))
		}
		if err := near(g, w, tol); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	for step := range 2 {
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("training output, step %d", step+1), y.Value().Data(), train, relu)
		vm.Reset()
	}
	m, v := op.Stats()
	check("running mean", m.Data(), mean, false)
	check("running variance", v.Data(), variance, false)
	if err := op.SetTraining(false); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	check("evaluation output", y.Value().Data(), eval, relu)
	m, v = op.Stats()
	check("running mean after evaluation", m.Data(), mean, false)
	check("running variance after evaluation", v.Data(), variance, false)
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
