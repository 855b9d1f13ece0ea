package models

import "testing"

func TestGradCharLSTM(t *testing.T) {
	cfg := Config{Name: "charlstm", Layers: 2, HiddenSize: 6, EmbedDim: 4}
	checkModel(t, cfg, Input{Shape: []int{5}, Classes: 7, YLen: 5}, 2, 30)
}

// TestCharLSTMRowOrder checks that logits row b*T+t belongs to token t of
// example b, and that the model is causal: changing example 1's token at step 2
// changes exactly example 1's rows from step 2 on.
func TestCharLSTMRowOrder(t *testing.T) {
	const batch, steps, vocab, changed = 2, 5, 7, 2
	in := Input{Shape: []int{steps}, Classes: vocab, YLen: steps}
	n, err := New(Config{Name: "charlstm", Layers: 2, HiddenSize: 6, EmbedDim: 4}, in, batch, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}
	before := make([]float32, batch*steps*vocab)
	if err := n.Predict(x, before); err != nil {
		t.Fatal(err)
	}
	x[1*steps+changed] = 6
	after := make([]float32, len(before))
	if err := n.Predict(x, after); err != nil {
		t.Fatal(err)
	}
	for b := range batch {
		for s := range steps {
			row := b*steps + s
			differs := false
			for c := range vocab {
				differs = differs || before[row*vocab+c] != after[row*vocab+c]
			}
			if want := b == 1 && s >= changed; differs != want {
				t.Errorf("example %d step %d (row %d): changed %v, expected %v", b, s, row, differs, want)
			}
		}
	}
}
