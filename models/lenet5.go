package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// lenetPad is the first convolution's padding for a square input of side h:
// LeNet-5 was designed for 32×32 images (no padding); 28×28 images (MNIST,
// Fashion-MNIST) are padded by 2, the usual way to give them the same 28×28
// feature map. Any other side yields 0, false.
func lenetPad(h int) (int, bool) {
	switch h {
	case 28:
		return 2, true
	case 32:
		return 0, true
	}
	return 0, false
}

// lenet5Accepts accepts (C, 28, 28) and (C, 32, 32) images: only those give the
// 5×5 maps after the second pool that the 16*5*5 classifier input expects.
func lenet5Accepts(c Config, in Input) error {
	if err := image3D(c, in); err != nil {
		return err
	}
	h, w := in.Shape[1], in.Shape[2]
	if _, ok := lenetPad(h); !ok || h != w {
		return fmt.Errorf("needs 28×28 or 32×32 images, got %d×%d", h, w)
	}
	return nil
}

// buildLeNet5 is the classic LeNet-5 with ReLU and max-pooling: conv 5×5 6 +
// ReLU, max-pool 2/2, conv 5×5 16 + ReLU, max-pool 2/2, then fully connected
// 400-120-84-classes with ReLU between (61,706 parameters for 1×28×28, 10 classes).
func buildLeNet5(b *builder, x *G.Node, in Input, _ int) *G.Node {
	pad, _ := lenetPad(in.Shape[1])
	h := b.conv2dReLU(x, in.Shape[0], 6, 5, 1, pad, "conv1")
	h = b.maxPool(h, 2, 2)
	h = b.conv2dReLU(h, 6, 16, 5, 1, 0, "conv2")
	h = b.flatten(b.maxPool(h, 2, 2))
	h = b.linearReLU(h, 16*5*5, 120, "fc1")
	h = b.linearReLU(h, 120, 84, "fc2")
	return b.linear(h, 84, in.Classes, "fc3")
}
