package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// convCases cover stride 1 and 2, padding 0 to 2, kernels 1, 3 and 5, several
// channels, with and without bias, including sizes that the stride does not divide.
var convCases = []convCase{
	{[]int{2, 3, 5, 5}, 4, 3, 1, 1, true},
	{[]int{2, 3, 5, 5}, 4, 3, 1, 1, false},
	{[]int{2, 2, 7, 7}, 3, 3, 2, 1, false},
	{[]int{1, 2, 6, 6}, 3, 3, 2, 0, true},
	{[]int{2, 2, 6, 6}, 3, 1, 2, 0, false},
	{[]int{1, 2, 4, 4}, 2, 1, 1, 0, true},
	{[]int{2, 2, 6, 6}, 3, 5, 1, 2, true},
	{[]int{1, 3, 7, 7}, 2, 5, 1, 0, false},
}

// convCase is one conv2d configuration under test.
type convCase struct {
	shape                []int // input (B, C, H, W)
	cout, k, stride, pad int
	bias                 bool
}

func (c convCase) String() string {
	return fmt.Sprintf("in%v_out%d_k%d_s%d_p%d_bias%v", c.shape, c.cout, c.k, c.stride, c.pad, c.bias)
}

func TestGradConv2d(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.String(), func(t *testing.T) {
			checkLayer(t, Config{}, c.shape, func(b *builder, x *G.Node) *G.Node {
				return b.conv2d(x, c.shape[1], c.cout, c.k, c.stride, c.pad, c.bias, "conv")
			})
		})
	}
}

// naiveConv2d is the textbook convolution (cross-correlation, as in PyTorch) of x
// (B, C, H, W) with w (O, C, k, k) and an optional bias (O).
func naiveConv2d(x []float64, shape []int, w []float64, cout, k, stride, pad int, bias []float64) ([]float64, []int) {
	bs, cin, h, wd := shape[0], shape[1], shape[2], shape[3]
	oh, ow := (h+2*pad-k)/stride+1, (wd+2*pad-k)/stride+1
	out := make([]float64, bs*cout*oh*ow)
	for n := range bs {
		for o := range cout {
			for i := range oh {
				for j := range ow {
					s := 0.0
					if bias != nil {
						s = bias[o]
					}
					for c := range cin {
						for p := range k {
							for q := range k {
								y, xx := i*stride+p-pad, j*stride+q-pad
								if y < 0 || y >= h || xx < 0 || xx >= wd {
									continue
								}
								s += x[((n*cin+c)*h+y)*wd+xx] * w[((o*cin+c)*k+p)*k+q]
							}
						}
					}
					out[((n*cout+o)*oh+i)*ow+j] = s
				}
			}
		}
	}
	return out, []int{bs, cout, oh, ow}
}

// TestConv2dForward pins conv2d's layout (NCHW, weights (out, in, k, k)) and its
// padding and stride against the textbook loop: a gradient check alone would
// pass for a consistently transposed convolution.
func TestConv2dForward(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.String(), func(t *testing.T) {
			out, want, wantShape := runConv(t, c.shape, c.cout, c.k, c.stride, c.pad, c.bias)
			if got := out.Shape(); !got.Eq(tensor.Shape(wantShape)) {
				t.Fatalf("output shape %v, expected %v", got, wantShape)
			}
			for j, v := range out.Data().([]float64) {
				if math.Abs(v-want[j]) > 1e-12 {
					t.Fatalf("output[%d] = %g, expected %g", j, v, want[j])
				}
			}
		})
	}
}

// runConv evaluates conv2d on random input, weights and bias, and returns its
// output with the naive reference.
func runConv(t *testing.T, shape []int, cout, k, stride, pad int, bias bool) (G.Value, []float64, []int) {
	t.Helper()
	out, xv, flat := forward(t, shape, func(b *builder, x *G.Node) *G.Node {
		return b.conv2d(x, shape[1], cout, k, stride, pad, bias, "conv")
	})
	nw := cout * shape[1] * k * k
	var bv []float64
	if bias {
		bv = flat[nw:]
	}
	want, wantShape := naiveConv2d(xv, shape, flat[:nw], cout, k, stride, pad, bv)
	return out, want, wantShape
}

// forward runs one layer in float64 on a random input of the given shape, with
// random parameters, and returns its output, the input and the flat parameters
// (in declaration order).
func forward(t *testing.T, shape []int, layer func(b *builder, x *G.Node) *G.Node) (G.Value, []float64, []float64) {
	t.Helper()
	buildMu.Lock()
	b := newBuilder(withDefaults(Config{}), tensor.Float64, false, 0)
	x := b.input("x", shape...)
	y := layer(b, x)
	flat := make([]float64, b.size())
	_, err := b.bind(flat)
	if err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(b.g)
	buildMu.Unlock()
	defer vm.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range flat {
		flat[i] = rng.NormFloat64()
	}
	xv := make([]float64, numel(shape))
	for i := range xv {
		xv[i] = rng.NormFloat64()
	}
	if err := G.Let(x, tensor.New(tensor.WithShape(shape...), tensor.WithBacking(xv))); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return y.Value(), xv, flat
}

func TestConv2dChannelMismatch(t *testing.T) {
	b := newBuilder(withDefaults(Config{}), tensor.Float64, true, 0)
	x := b.input("x", 1, 3, 5, 5)
	defer func() {
		if _, ok := recover().(buildError); !ok {
			t.Fatal("conv2d with 2 input channels on a 3-channel input: expected a build error")
		}
	}()
	b.conv2d(x, 2, 4, 3, 1, 1, false, "conv")
}
