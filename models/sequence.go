package models

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Gorgonia v0.9.18's sliceOp hashes its start and end as single bytes, and a
// graph merges a new node into an existing one with the same hash: G.Slice(x,
// nil, G.S(0)) and G.Slice(x, nil, G.S(256)) are the same node, silently
// (pinned by TestSliceHashCollision). Concat's backward pass slices its gradient
// the same way. So every slice here starts below sliceSpan within its parent:
// longer sequences are cut into chunks of sliceSpan steps, whose starts
// (multiples of 255) differ modulo 256 for up to 256 chunks.
const (
	sliceSpan = 255
	maxSteps  = sliceSpan * 256
)

// seq is a batch of B sequences of T steps of D features, in the form the layer
// that made it works in: one (B, T, D) node (the fast ops) or T nodes of shape
// (B, D) (Gorgonia's per-step ops). Layers take either: wholeSeq and stepSeq
// convert only when the form differs.
type seq struct {
	whole *G.Node
	steps []*G.Node
}

// wholeSeq is s as one (B, T, D) node.
func (b *builder) wholeSeq(s seq) *G.Node {
	if s.whole != nil {
		return s.whole
	}
	return b.stack(s.steps)
}

// stepSeq is s as T nodes of shape (B, D). Unstacking a node that needs a
// gradient costs O(T²) in the backward pass (see unstack).
func (b *builder) stepSeq(s seq) []*G.Node {
	if s.steps != nil {
		return s.steps
	}
	return b.unstack(s.whole)
}

// reshape is G.Reshape that keeps the mark of a graph input (see rearranged).
func (b *builder) reshape(x *G.Node, shape ...int) *G.Node {
	return b.rearranged(x, must(G.Reshape(x, tensor.Shape(shape))))
}

// rearranged returns y, the values of x rearranged (a reshape or transpose),
// marked as an input if x is one: it needs no gradient either, and the fast
// ops skip its input gradient.
func (b *builder) rearranged(x, y *G.Node) *G.Node {
	if b.inputs[x] {
		b.inputs[y] = true
	}
	return y
}

// unstack splits x of shape (B, T, D) into T nodes of shape (B, D), one per
// time step. Use it on inputs that need no gradient: slicing a node that does
// costs a full-size gradient tensor per slice in Gorgonia, O(T²) for a sequence.
func (b *builder) unstack(x *G.Node) []*G.Node {
	s := x.Shape()
	if len(s) != 3 || s[1] > maxSteps {
		b.fail("models: unstack: shape %v, expected (B, T, D) with T <= %d", s, maxSteps)
	}
	steps := s[1]
	out := make([]*G.Node, 0, steps)
	for lo := 0; lo < steps; lo += sliceSpan {
		hi := min(lo+sliceSpan, steps)
		if hi-lo == 1 { // a one-step chunk is already the step (Slice drops the axis)
			out = append(out, must(G.Slice(x, nil, G.S(lo))))
			break
		}
		chunk := x
		if steps > sliceSpan {
			chunk = must(G.Slice(x, nil, G.S(lo, hi)))
		}
		for t := range hi - lo {
			out = append(out, must(G.Slice(chunk, nil, G.S(t))))
		}
	}
	return out
}

// stack joins T nodes of shape (B, D) into one (B, T, D) node, the inverse of
// unstack. It concatenates: Concat's backward pass slices out each step's
// gradient, O(B*T*D) in all.
func (b *builder) stack(xs []*G.Node) *G.Node {
	if len(xs) == 0 || len(xs) > maxSteps {
		b.fail("models: stack: %d steps, expected 1 to %d", len(xs), maxSteps)
	}
	var chunks []*G.Node
	for lo := 0; lo < len(xs); lo += sliceSpan {
		hi := min(lo+sliceSpan, len(xs))
		pieces := make([]*G.Node, hi-lo)
		for i, x := range xs[lo:hi] {
			s := x.Shape()
			pieces[i] = must(G.Reshape(x, tensor.Shape{s[0], 1, s[1]}))
		}
		chunks = append(chunks, concatSteps(pieces))
	}
	return concatSteps(chunks)
}

// concatSteps concatenates (B, t, D) nodes along the time axis.
func concatSteps(ns []*G.Node) *G.Node {
	if len(ns) == 1 {
		return ns[0]
	}
	return must(G.Concat(1, ns...))
}
