package models

import (
	"fmt"
	"math"

	"github.com/gradwire/gradwire/models/ops"
	G "gorgonia.org/gorgonia"
)

// groupedTape is a training graph over k worker batches at once whose ops
// write one parameter gradient per batch (ops.Workspace.SetGroups), bound to
// the Net's parameters.
type groupedTape struct {
	k     int
	g     *graph
	tm    G.VM
	run   func() error
	grads [][]float32 // per group, laid out as Grad
}

// Groupable reports whether StepGrouped can compute several worker batches'
// gradients in one pass: the model is Fusable and every parameter's gradient
// comes straight from an op that can split it by group (the fast linear,
// convolution, bias, LSTM and embedding ops).
func (n *Net) Groupable() bool {
	if !n.Fusable() || n.gradNodes == nil {
		return false
	}
	for _, g := range n.gradNodes {
		if _, ok := g.Op().(ops.GroupedOutput); !ok {
			return false
		}
	}
	return true
}

// StepGrouped runs forward and backward once over k worker batches laid end
// to end (x holds k*Batch examples, y their labels) and writes batch i's
// mean-loss gradient into GroupGrad(i) and its mean loss into losses[i]:
// what Step on batch i would give, up to float32 rounding (the examples do
// not interact), at about the cost of one pass over all k batches. It returns
// the mean of the k losses. Grad is left as it was. The k-batch graph is
// built on the first call with that k.
func (n *Net) StepGrouped(x []float32, y []int32, k int, losses []float64) (float64, error) {
	if !n.Groupable() {
		return 0, fmt.Errorf("model %s: StepGrouped: the model's examples interact within a batch, it does not run on the fast float32 ops, or a layer cannot split its gradient by batch", n.cfg.Name)
	}
	if k < 2 {
		return 0, fmt.Errorf("model %s: StepGrouped: %d batches, expected >= 2", n.cfg.Name, k)
	}
	if len(losses) != k {
		return 0, fmt.Errorf("model %s: StepGrouped: %d loss slots for %d batches", n.cfg.Name, len(losses), k)
	}
	if n.grouped == nil || n.grouped.k != k {
		if err := n.buildGrouped(k); err != nil {
			return 0, err
		}
	}
	t := n.grouped
	if err := n.setInputs(t.g, x, y); err != nil {
		return 0, err
	}
	defer t.tm.Reset()
	if err := t.run(); err != nil {
		return 0, fmt.Errorf("model %s: grouped training step: %w", n.cfg.Name, err)
	}
	if err := ops.GroupLosses(t.g.loss, losses); err != nil {
		return 0, fmt.Errorf("model %s: %w", n.cfg.Name, err)
	}
	var mean float64
	for i, l := range losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return l, fmt.Errorf("model %s: loss of batch %d of %d is %v", n.cfg.Name, i+1, k, l)
		}
		mean += l
	}
	return mean / float64(k), nil
}

// GroupGrad is batch i's gradient of the last StepGrouped (nil before one).
func (n *Net) GroupGrad(i int) []float32 {
	if n.grouped == nil || i < 0 || i >= n.grouped.k {
		return nil
	}
	return n.grouped.grads[i]
}

// buildGrouped builds the training graph over k batches with per-batch
// gradients, bound to the Net's parameters.
func (n *Net) buildGrouped(k int) (err error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	t := &groupedTape{k: k}
	if t.g, err = n.buildGroups(n.entry, k*n.batch, true, k); err != nil {
		return err
	}
	if err := n.bindBatches(t.g, k); err != nil {
		return err
	}
	grads, sub, err := n.gradients(t.g)
	if err != nil {
		return err
	}
	size := len(n.grad.([]float32))
	for range k {
		t.grads = append(t.grads, make([]float32, size))
	}
	for i, g := range grads {
		o, sz := n.offsets[i], numel(t.g.b.params[i].shape)
		views := make([][]float32, k)
		for j := range views {
			views[j] = t.grads[j][o : o+sz : o+sz]
		}
		op, ok := g.Op().(ops.GroupedOutput)
		if !ok || !op.WriteGroupsInto(views) {
			return fmt.Errorf("model %s: the gradient of %s cannot be split by batch (op %v)", n.cfg.Name, t.g.b.params[i].name, g.Op())
		}
	}
	t.tm = G.NewTapeMachine(sub, G.WithEngine(ops.Engine(t.g.b.ws)))
	t.run = t.tm.RunAll
	if d := newDirectTape(t.tm); d != nil {
		t.run = d.RunAll
	}
	if n.grouped != nil {
		n.grouped.tm.Close()
	}
	n.grouped = t
	return nil
}
