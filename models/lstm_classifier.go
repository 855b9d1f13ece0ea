package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// lstmAccepts accepts classification images (C, H, W) with at least 2 rows: the
// LSTM classifier reads one row per time step.
func lstmAccepts(c Config, in Input) error {
	if err := image3D(c, in); err != nil {
		return err
	}
	if h := in.Shape[1]; h < 2 || h > maxSteps {
		return fmt.Errorf("reads one image row per time step: needs 2 to %d rows, got %d", maxSteps, h)
	}
	return nil
}

// buildLSTMClassifier reads a (C, H, W) image as a sequence of H time steps of
// C*W features (Fashion-MNIST: 28 steps of 28 pixels) through one LSTM layer of
// cfg.HiddenSize units and classifies its last hidden state with a linear layer.
func buildLSTMClassifier(b *builder, x *G.Node, in Input, batch int) *G.Node {
	c, h, w := in.Shape[0], in.Shape[1], in.Shape[2]
	if c > 1 { // step t takes row t of every channel: (B, C, H, W) -> (B, H, C, W)
		x = b.rearranged(x, must(G.Transpose(x, 0, 2, 1, 3)))
	}
	last := b.lstmLast(seq{whole: b.reshape(x, batch, h, c*w)}, c*w, b.cfg.HiddenSize, "lstm")
	return b.linear(last, b.cfg.HiddenSize, in.Classes, "fc")
}
