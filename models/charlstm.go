package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// charLSTMAccepts accepts token windows: examples of T token ids with T targets
// (the next token at every position) and a vocabulary of at least 2.
func charLSTMAccepts(_ Config, in Input) error {
	if len(in.Shape) != 1 || in.YLen != in.Shape[0] {
		return fmt.Errorf("needs windows of T token ids with T targets, got shape %v and %d labels", in.Shape, in.YLen)
	}
	if t := in.Shape[0]; t < 2 || t > maxSteps {
		return fmt.Errorf("needs 2 to %d time steps, got %d", maxSteps, t)
	}
	if in.Classes < 2 {
		return fmt.Errorf("needs a vocabulary of at least 2, got %d", in.Classes)
	}
	return nil
}

// buildCharLSTM is a character-level language model: embedding (vocab,
// cfg.EmbedDim), cfg.Layers stacked LSTM layers of cfg.HiddenSize units, and a
// linear layer from every step's last-layer hidden state to next-token logits.
// x holds one-hot rows in example-major order (row b*T+t is token t of example
// b), and so do the logits (batch*T, vocab).
func buildCharLSTM(b *builder, x *G.Node, in Input, batch int) *G.Node {
	steps, vocab := in.Shape[0], in.Classes
	hs := b.embedSeq(x, batch, steps, vocab, b.cfg.EmbedDim, "embed")
	width := b.cfg.EmbedDim
	for l := range b.cfg.Layers {
		hs = b.lstmSeq(hs, width, b.cfg.HiddenSize, fmt.Sprintf("lstm%d", l+1))
		width = b.cfg.HiddenSize
	}
	// One output product over all steps: (B, T, H) -> (B*T, H) rows b*T+t.
	h := b.reshape(b.wholeSeq(hs), batch*steps, width)
	return b.linear(h, width, vocab, "out")
}
