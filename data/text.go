package data

import (
	"fmt"
	"os"
	"slices"
)

// Text is a character-level corpus cut into non-overlapping windows of SeqLen token
// ids. Example i has inputs ids[i*T : i*T+T] and next-character targets
// ids[i*T+1 : i*T+T+1] of its split.
type Text struct {
	name   string
	vocab  []byte  // sorted distinct bytes of the whole corpus; token id = position
	ids    []uint8 // token ids of this split
	seqLen int
}

// trainPercent of the characters, from the start, form the training split; the rest is
// the validation ("test") split.
const trainPercent = 90

// openText reads the corpus at path and returns one split of it.
func openText(info Info, path, split string, seqLen int) (*Text, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := newText(info.Name, raw, split, seqLen)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// newText builds a split of corpus: the vocabulary comes from the whole corpus, so
// that both splits share token ids.
func newText(name string, corpus []byte, split string, seqLen int) (*Text, error) {
	if seqLen < 1 {
		return nil, fmt.Errorf("sequence length %d, expected >= 1", seqLen)
	}
	var seen [256]bool
	for _, b := range corpus {
		seen[b] = true
	}
	var vocab []byte
	var id [256]uint8
	for b := range 256 {
		if seen[b] {
			id[b] = uint8(len(vocab))
			vocab = append(vocab, byte(b))
		}
	}
	cut := len(corpus) * trainPercent / 100
	part := corpus[:cut]
	if split == "test" {
		part = corpus[cut:]
	}
	if len(part) < seqLen+1 {
		return nil, fmt.Errorf("%s split has %d characters, fewer than one window of %d plus its target", split, len(part), seqLen)
	}
	ids := make([]uint8, len(part))
	for i, b := range part {
		ids[i] = id[b]
	}
	return &Text{name: name, vocab: vocab, ids: ids, seqLen: seqLen}, nil
}

// Name implements Dataset.
func (t *Text) Name() string { return t.name }

// Len implements Dataset: the number of whole windows; one whose target would run past
// the end of the split is dropped.
func (t *Text) Len() int { return (len(t.ids) - 1) / t.seqLen }

// XShape implements Dataset: [SeqLen].
func (t *Text) XShape() []int { return []int{t.seqLen} }

// YLen implements Dataset: one target per input character.
func (t *Text) YLen() int { return t.seqLen }

// Classes implements Dataset: the vocabulary size.
func (t *Text) Classes() int { return len(t.vocab) }

// Vocab returns the byte each token id stands for, to decode generated text.
func (t *Text) Vocab() []byte { return slices.Clone(t.vocab) }

// Fill implements Dataset: token ids as float32 in x, next-character ids in y. It
// panics when x or y is too short, like a slice index would.
func (t *Text) Fill(idx []int, x []float32, y []int32) {
	n := t.seqLen
	if len(x) < len(idx)*n || len(y) < len(idx)*n {
		panic(fmt.Sprintf("data: %s Fill of %d windows needs %d x values and %d targets, got %d and %d",
			t.name, len(idx), len(idx)*n, len(idx)*n, len(x), len(y)))
	}
	for i, j := range idx {
		src := t.ids[j*n : j*n+n+1]
		xs, ys := x[i*n:(i+1)*n], y[i*n:(i+1)*n]
		for k := range n {
			xs[k] = float32(src[k])
			ys[k] = int32(src[k+1])
		}
	}
}
