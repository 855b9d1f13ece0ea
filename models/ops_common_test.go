package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/optim"
)

// layerResult is one layer's output and the gradients of sum(out*r) with
// respect to its input and its parameters, for a fixed random r.
type layerResult struct {
	input []float64
	out   []float64
	loss  float64
	names []string
	grads [][]float64
	bns   []normOp
}

// runLayer builds one layer in float64 with the given model.ops on a random
// input of shape inShape, declared as a parameter so that it gets a gradient,
// and returns the output and gradients of the second of two identical steps
// (after checking that both agree: ops reuse their buffers across steps). The
// parameters are seeded, so the fast and Gorgonia versions of a layer, which
// declare the same parameters, start from the same values.
func runLayer(t *testing.T, ops string, workers int, inShape []int, layer func(b *builder, x *G.Node) *G.Node) layerResult {
	t.Helper()
	b := newBuilder(withDefaults(Config{Ops: ops}), tensor.Float64, true, workers)
	var out, loss *G.Node
	var nodes G.Nodes
	var vm G.VM
	var rT *tensor.Dense
	err := func() (err error) {
		buildMu.Lock()
		defer buildMu.Unlock()
		defer func() {
			if e := recover(); e != nil {
				be, ok := e.(buildError)
				if !ok {
					panic(e)
				}
				err = be.err
			}
		}()
		x := b.param("input", optim.KindLinear, normal(1), inShape...)
		out = layer(b, x)
		r := b.input("r", out.Shape()...)
		rT = tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(out.Shape()...))
		loss = must(G.Sum(must(G.HadamardProd(out, r))))
		if err := G.Let(r, rT); err != nil {
			return err
		}
		flat := make([]float64, b.size())
		offsets, err := b.bind(flat)
		if err != nil {
			return err
		}
		b.initialise(flat, offsets, 11)
		for _, p := range b.params {
			nodes = append(nodes, p.node)
		}
		if _, err := G.Grad(loss, nodes...); err != nil {
			return err
		}
		vm = G.NewTapeMachine(b.g, G.BindDualValues(nodes...))
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	for _, op := range b.bns {
		if err := op.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i, d := 0, rT.Float64s(); i < len(d); i++ {
		d[i] = rng.NormFloat64()
	}
	var res [2]layerResult
	for step := range res {
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		r := &res[step]
		r.input = slices.Clone(b.params[0].node.Value().Data().([]float64))
		r.out = slices.Clone(out.Value().Data().([]float64))
		r.loss = loss.Value().Data().(float64)
		for _, p := range b.params {
			gv, err := p.node.Grad()
			if err != nil {
				t.Fatal(err)
			}
			d := gv.Data().([]float64)
			r.names = append(r.names, p.name)
			r.grads = append(r.grads, slices.Clone(d))
			clear(d)
		}
		vm.Reset()
	}
	// BatchNorm's running statistics change between the steps, its outputs
	// in training mode do not.
	if err := sameResults(res[0], res[1], 0); err != nil {
		t.Fatalf("second step differs from the first: %v", err)
	}
	res[1].bns = b.bns
	return res[1]
}

// sameResults compares two layer results to a relative tolerance (0: bit for bit).
func sameResults(got, want layerResult, tol float64) error {
	if want.out != nil {
		if err := near(got.out, want.out, tol); err != nil {
			return fmt.Errorf("output: %w", err)
		}
	}
	if err := near([]float64{got.loss}, []float64{want.loss}, tol); err != nil {
		return fmt.Errorf("loss: %w", err)
	}
	if !slices.Equal(got.names, want.names) {
		return fmt.Errorf("parameters %v, expected %v", got.names, want.names)
	}
	for i, name := range want.names {
		if err := near(got.grads[i], want.grads[i], tol); err != nil {
			return fmt.Errorf("gradient of %s: %w", name, err)
		}
	}
	return nil
}

// near checks |got-want| <= tol*(1+|want|) element-wise.
func near(got, want []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, expected %d", len(got), len(want))
	}
	for i, w := range want {
		if d := math.Abs(got[i] - w); !(d <= tol*(1+math.Abs(w))) {
			return fmt.Errorf("[%d] = %.17g, expected %.17g (difference %.3g)", i, got[i], w, d)
		}
	}
	return nil
}

// fastMatchesGorgonia runs a layer with Gorgonia's ops and with the fast ops
// on 1, 2 and 3 workers: the fast results must agree with Gorgonia's to
// rounding and be bit-identical across worker counts.
func fastMatchesGorgonia(t *testing.T, inShape []int, layer func(b *builder, x *G.Node) *G.Node) {
	t.Helper()
	fastMatchesGorgoniaOut(t, inShape, layer, true)
}

// fastMatchesGorgoniaOut is fastMatchesGorgonia, comparing the outputs only
// if compareOut: the value of some Gorgonia nodes is overwritten in place by
// the backward pass (their loss and gradients are right), and those layers
// check their output separately.
func fastMatchesGorgoniaOut(t *testing.T, inShape []int, layer func(b *builder, x *G.Node) *G.Node, compareOut bool) layerResult {
	t.Helper()
	ref := runLayer(t, OpsGorgonia, 0, inShape, layer)
	if !compareOut {
		ref.out = nil
	}
	one := runLayer(t, OpsFast, 1, inShape, layer)
	if err := sameResults(one, ref, 1e-10); err != nil {
		t.Fatalf("fast ops vs Gorgonia's: %v", err)
	}
	for _, w := range []int{2, 3} {
		if err := sameResults(runLayer(t, OpsFast, w, inShape, layer), one, 0); err != nil {
			t.Fatalf("%d workers vs 1: %v", w, err)
		}
	}
	return one
}
