package models

import (
	"fmt"
	"math"

	"github.com/gradwire/gradwire/models/ops"
	G "gorgonia.org/gorgonia"
)

// fusedTape is a second training graph over k worker batches at once, bound
// to the Net's parameters and gradient buffer.
type fusedTape struct {
	k         int
	g         *graph
	tm        G.VM
	run       func() error
	gradNodes G.Nodes
}

// gradients builds the parameters' gradient nodes of a training graph and the
// subgraph a step runs: only what the loss and those gradients need (G.Grad
// also builds the gradients of the inputs, for the MLP a product as large as
// its first layer's, which nothing reads).
func (n *Net) gradients(tg *graph) (G.Nodes, *G.ExprGraph, error) {
	learnables := make(G.Nodes, len(tg.b.params))
	for i, p := range tg.b.params {
		learnables[i] = p.node
	}
	grads, err := G.Grad(tg.loss, learnables...)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: gradient: %w", n.cfg.Name, err)
	}
	return grads, tg.b.g.ExactSubgraphRoots(append(G.Nodes{tg.loss}, grads...)...), nil
}

// Fusable reports whether StepFused can stand for several worker steps: the
// model's examples do not interact within a batch (no BatchNorm, whose batch
// statistics would cover the union of the batches), and it runs on the fast
// ops in float32.
func (n *Net) Fusable() bool {
	return n.train.b.fast() && len(n.train.b.bns) == 0 && n.master == nil && n.grad != nil && isFloat32(n.grad)
}

func isFloat32(v any) bool { _, ok := v.([]float32); return ok }

// StepFused runs forward and backward once over k worker batches laid end to
// end (x holds k*Batch examples, y their labels) and overwrites Grad with the
// mean-loss gradient over all k*Batch examples: the mean of what k calls of
// Step would give, up to float32 rounding, since the examples do not interact
// (Fusable). It returns the mean loss over the k*Batch examples (the mean of
// the k batches' losses). The k-batch graph is built on the first call with
// that k.
func (n *Net) StepFused(x []float32, y []int32, k int) (float64, error) {
	if !n.Fusable() {
		return 0, fmt.Errorf("model %s: StepFused: the model's examples interact within a batch or it does not run on the fast float32 ops", n.cfg.Name)
	}
	if k < 1 {
		return 0, fmt.Errorf("model %s: StepFused: %d batches, expected >= 1", n.cfg.Name, k)
	}
	if n.fused == nil || n.fused.k != k {
		if err := n.buildFused(k); err != nil {
			return 0, err
		}
	}
	f := n.fused
	if err := n.setInputs(f.g, x, y); err != nil {
		return 0, err
	}
	defer f.tm.Reset()
	if err := f.run(); err != nil {
		return 0, fmt.Errorf("model %s: fused training step: %w", n.cfg.Name, err)
	}
	if err := n.readGrads(f.g, f.gradNodes); err != nil {
		return 0, err
	}
	loss := scalar(f.g.loss.Value())
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, fmt.Errorf("model %s: loss is %v", n.cfg.Name, loss)
	}
	return loss, nil
}

// bindBatches binds a graph over k batches to the Net's parameters, which it
// must lay out as the training graph does.
func (n *Net) bindBatches(g *graph, k int) error {
	offsets, err := g.b.bind(n.flat)
	if err != nil {
		return err
	}
	for i, o := range offsets {
		if o != n.offsets[i] {
			return fmt.Errorf("model %s: the %d-batch graph lays out parameter %d at %d, the training graph at %d", n.cfg.Name, k, i, o, n.offsets[i])
		}
	}
	return nil
}

// buildFused builds the training graph over k batches, bound to the Net's
// parameters, with gradients written into the Net's gradient buffer.
func (n *Net) buildFused(k int) (err error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	f := &fusedTape{k: k}
	if f.g, err = n.build(n.entry, k*n.batch, true); err != nil {
		return err
	}
	if err := n.bindBatches(f.g, k); err != nil {
		return err
	}
	grads, sub, err := n.gradients(f.g)
	if err != nil {
		return err
	}
	f.gradNodes = grads
	f.tm = G.NewTapeMachine(sub, G.WithEngine(ops.Engine(f.g.b.ws)))
	f.run = f.tm.RunAll
	if d := newDirectTape(f.tm); d != nil {
		f.run = d.RunAll
	}
	n.gradsInPlace(f.g, f.gradNodes)
	if n.fused != nil {
		n.fused.tm.Close()
	}
	n.fused = f
	return nil
}
