package models

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// normOp is a BatchNorm op whose running statistics a Net manages: Gorgonia's
// *G.BatchNormOp or the fused *ops.BatchNormOp.
type normOp interface {
	Stats() (mean, variance tensor.Tensor)
	SetStats(mean, variance tensor.Tensor) error
	SetTraining(training bool) error
	Reset() error
}

// batchNorm normalises a (B, C, H, W) input per channel. Scale and shift are
// (1, C, 1, 1): with nil, Gorgonia creates full-shape tensors that do not train
// (GORGONIA.md). Both implementations keep PyTorch's running-statistics rule
// (momentum, unbiased variance). On the training graph they normalise with
// batch statistics; the evaluation graph's ops are switched to running
// statistics by New.
func (b *builder) batchNorm(x *G.Node, c int, name string) *G.Node {
	return b.norm(x, c, false, 1, name)
}

// batchNormReLU is relu(batchNorm(x)), fused into one op on the fast path.
func (b *builder) batchNormReLU(x *G.Node, c int, name string) *G.Node {
	return b.norm(x, c, true, 1, name)
}

// norm is BatchNorm(+ReLU) with its scale starting at scale0 (1, or 0 for a
// residual block's last BatchNorm under model.zero_init_residual) and its
// shift at 0.
func (b *builder) norm(x *G.Node, c int, relu bool, scale0 float64, name string) *G.Node {
	scale := b.param(name+".scale", optim.KindNorm, constant(scale0), 1, c, 1, 1)
	shift := b.param(name+".shift", optim.KindNorm, zeros, 1, c, 1, 1)
	var y *G.Node
	var op normOp
	var err error
	if b.fast() {
		y, op, err = ops.BatchNorm(b.ws, x, scale, shift, relu, b.training, b.cfg.BNMomentum, b.cfg.BNEpsilon)
	} else {
		y, _, _, op, err = G.BatchNorm(x, scale, shift, b.cfg.BNMomentum, b.cfg.BNEpsilon)
		if err == nil && relu {
			y = b.relu(y)
		}
	}
	if err != nil {
		panic(buildError{err})
	}
	b.bns = append(b.bns, op)
	b.bnNames = append(b.bnNames, name)
	return y
}
