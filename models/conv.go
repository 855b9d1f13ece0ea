package models

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// conv2d is a 2-D convolution of an NCHW input with a square k×k kernel, cout
// output channels, and the same stride and zero padding on both spatial axes.
// The weights are (cout, cin, k, k), PyTorch's layout, He-normal initialised with
// fan-in cin*k*k. The optional bias is stored as (cout), like PyTorch's, and
// starts at zero; leave it off before a BatchNorm, whose shift makes it redundant.
func (b *builder) conv2d(x *G.Node, cin, cout, k, stride, pad int, bias bool, name string) *G.Node {
	return b.conv(x, cin, cout, k, stride, pad, bias, false, name)
}

// conv2dReLU is relu(conv2d(x) + bias), with the bias and ReLU fused into one op
// on the fast path.
func (b *builder) conv2dReLU(x *G.Node, cin, cout, k, stride, pad int, name string) *G.Node {
	return b.conv(x, cin, cout, k, stride, pad, true, true, name)
}

func (b *builder) conv(x *G.Node, cin, cout, k, stride, pad int, bias, relu bool, name string) *G.Node {
	if s := x.Shape(); len(s) != 4 || s[1] != cin {
		b.fail("models: %s: input shape %v, expected (B, %d, H, W)", name, s, cin)
	}
	w := b.param(name+".w", optim.KindConv, heNormal(cin*k*k), cout, cin, k, k)
	s := x.Shape()
	hout, wout := (s[2]+2*pad-k)/stride+1, (s[3]+2*pad-k)/stride+1
	b.addProductFLOPs(s[0]*hout*wout, cin*k*k, cout)
	var bv *G.Node
	if bias {
		bv = b.param(name+".b", optim.KindBias, zeros, cout)
	}
	if b.fast() {
		// The graph's input image needs no gradient: skip its backward GEMMs.
		y := must(ops.Conv2d(b.ws, x, w, stride, pad, !b.inputs[x]))
		if bv != nil {
			y = must(ops.BiasAct(b.ws, y, bv, relu))
		}
		return y
	}
	y := must(G.Conv2d(x, w, tensor.Shape{k, k}, []int{pad, pad}, []int{stride, stride}, nil))
	if bv != nil {
		// Broadcasting needs equal ranks: view the bias as (1, cout, 1, 1) and
		// repeat it along batch, height and width.
		b4 := must(G.Reshape(bv, tensor.Shape{1, cout, 1, 1}))
		y = must(G.BroadcastAdd(y, b4, nil, []byte{0, 2, 3}))
	}
	if relu {
		y = b.relu(y)
	}
	return y
}
