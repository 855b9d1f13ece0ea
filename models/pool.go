package models

import (
	"github.com/gradwire/gradwire/models/ops"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// maxPool is a k×k max-pool over an NCHW input with the given stride and no
// padding: the fast op, which keeps each window's argmax for the backward
// pass, or Gorgonia's.
func (b *builder) maxPool(x *G.Node, k, stride int) *G.Node {
	if b.fast() {
		return must(ops.MaxPool2d(b.ws, x, k, stride))
	}
	return maxPool(x, k, stride)
}

// maxPool is Gorgonia's k×k max-pool with the given stride and no padding.
func maxPool(x *G.Node, k, stride int) *G.Node {
	return must(G.MaxPool2D(x, tensor.Shape{k, k}, []int{0, 0}, []int{stride, stride}))
}

// globalAvgPool averages each channel of an NCHW input over its H×W positions,
// giving (B, C): the fast op, which reuses its buffers, or globalAvgPool.
func (b *builder) globalAvgPool(x *G.Node) *G.Node {
	if b.fast() {
		return must(ops.GlobalAvgPool2d(x))
	}
	return globalAvgPool(x)
}

// globalAvgPool averages each channel of an NCHW input over its H×W positions,
// giving (B, C), with Gorgonia's ops. Gorgonia's GlobalAveragePool2D has no gradient and the backward
// of AveragePool2D is wrong (GORGONIA.md), so it is written as a mean over the
// rows of a (B*C, H*W) view.
func globalAvgPool(x *G.Node) *G.Node {
	s := x.Shape()
	rows := must(G.Reshape(x, tensor.Shape{s[0] * s[1], s[2] * s[3]}))
	return must(G.Reshape(must(G.Mean(rows, 1)), tensor.Shape{s[0], s[1]}))
}
