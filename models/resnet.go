package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// resnetBlocks maps each CIFAR ResNet's registry name to n, its number of basic
// blocks per stage (depth 6n+2).
var resnetBlocks = map[string]int{"resnet20": 3, "resnet32": 5, "resnet56": 9}

// buildResNet is the CIFAR ResNet of He et al. 2016 (section 4.2): a 3×3 16-channel
// stem conv + BN + ReLU, three stages of n basic blocks with 16, 32 and 64
// channels (the first block of stages 2 and 3 halves the resolution), global
// average pooling and a linear classifier. Channels and size come from the input,
// so it runs on 1×28×28 (28, 14, 7) as well as 3×32×32 (32, 16, 8).
func buildResNet(b *builder, x *G.Node, in Input, _ int) *G.Node {
	n := resnetBlocks[b.cfg.Name]
	h := b.batchNormReLU(b.conv2d(x, in.Shape[0], 16, 3, 1, 1, false, "conv1"), 16, "bn1")
	cin := 16
	for s, cout := range []int{16, 32, 64} {
		for i := range n {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			h = b.basicBlock(h, cin, cout, stride, fmt.Sprintf("s%db%d", s+1, i+1))
			cin = cout
		}
	}
	return b.linear(b.globalAvgPool(h), 64, in.Classes, "fc")
}

// basicBlock is ResNet's two-layer residual block: relu(bn(conv(relu(bn(conv(x)))))
// + shortcut(x)). The shortcut is the identity, or, where the block changes the
// shape, a 1×1 strided conv + BN (the paper's option B, as in torchvision).
// Convolutions have no bias: the following BN's shift takes its place. With
// model.zero_init_residual the second BN's scale starts at 0 (Goyal et al. 2017,
// section 5.1; torchvision's zero_init_residual), so that every block starts
// as relu(shortcut(x)) and the network as a shallower one.
func (b *builder) basicBlock(x *G.Node, cin, cout, stride int, name string) *G.Node {
	h := b.batchNormReLU(b.conv2d(x, cin, cout, 3, stride, 1, false, name+".conv1"), cout, name+".bn1")
	scale0 := 1.0
	if b.cfg.ZeroInitResidual {
		scale0 = 0
	}
	h = b.norm(b.conv2d(h, cout, cout, 3, 1, 1, false, name+".conv2"), cout, false, scale0, name+".bn2")
	short := x
	if stride != 1 || cin != cout {
		short = b.batchNorm(b.conv2d(x, cin, cout, 1, stride, 0, false, name+".down.conv"), cout, name+".down.bn")
	}
	return b.addReLU(h, short)
}
