package ops

import "testing"

// TestIm2colSpan pins span, which bounds the in-image part of each column
// block, against a direct count.
func TestIm2colSpan(t *testing.T) {
	for _, c := range []struct{ k, stride, pad, in int }{{3, 1, 1, 5}, {3, 2, 1, 7}, {5, 1, 2, 4}, {1, 2, 0, 6}, {3, 2, 2, 5}, {3, 1, 2, 4}} {
		g := convGeom{k: c.k, stride: c.stride, pad: c.pad}
		out := (c.in+2*c.pad-c.k)/c.stride + 1
		for off := range c.k {
			lo, hi := g.span(off, c.in, out)
			for o := range out {
				i := o*c.stride - c.pad + off
				if inside, got := i >= 0 && i < c.in, o >= lo && o < hi; inside != got {
					t.Errorf("%+v offset %d output %d: input %d inside %v, span [%d, %d)", c, off, o, i, inside, lo, hi)
				}
			}
		}
	}
}
