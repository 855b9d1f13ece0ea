package data

import (
	"slices"
	"strings"
	"testing"
)

// decode maps token ids back to text.
func decode(vocab []byte, ids []float32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = vocab[int(id)]
	}
	return string(b)
}

func TestTextWindows(t *testing.T) {
	// 20 characters: the first 18 (90%) are train, "!!" is validation.
	const corpus = "hello world, hello!!"
	train, err := newText("tinyshakespeare", []byte(corpus), "train", 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(train.Vocab()); got != " !,dehlorw" {
		t.Errorf("vocab %q, want %q", got, " !,dehlorw")
	}
	// "hello world, hello" has 18 characters: (18-1)/4 = 4 windows; the last
	// character is only ever a target.
	if train.Len() != 4 || train.Classes() != 10 || train.YLen() != 4 || !slices.Equal(train.XShape(), []int{4}) {
		t.Fatalf("len %d classes %d ylen %d shape %v, want 4, 10, 4, [4]", train.Len(), train.Classes(), train.YLen(), train.XShape())
	}
	x := make([]float32, 3*4)
	y := make([]int32, 3*4)
	train.Fill([]int{0, 1, 3}, x, y)
	// Token ids: ' '=0 '!'=1 ','=2 'd'=3 'e'=4 'h'=5 'l'=6 'o'=7 'r'=8 'w'=9.
	if want := []float32{5, 4, 6, 6}; !slices.Equal(x[:4], want) {
		t.Errorf("window 0 x = %v, want %v", x[:4], want)
	}
	if want := []int32{4, 6, 6, 7}; !slices.Equal(y[:4], want) {
		t.Errorf("window 0 y = %v, want %v", y[:4], want)
	}
	vocab := train.Vocab()
	ys := make([]float32, len(y))
	for i, v := range y {
		ys[i] = float32(v)
	}
	for i, want := range [][2]string{{"hell", "ello"}, {"o wo", " wor"}, {" hel", "hell"}} {
		if gx, gy := decode(vocab, x[4*i:4*i+4]), decode(vocab, ys[4*i:4*i+4]); gx != want[0] || gy != want[1] {
			t.Errorf("example %d: x %q y %q, want %q %q", i, gx, gy, want[0], want[1])
		}
	}

	val, err := newText("tinyshakespeare", []byte(corpus), "test", 1)
	if err != nil {
		t.Fatal(err)
	}
	if val.Len() != 1 || val.Classes() != 10 {
		t.Errorf("validation: len %d classes %d, want 1 and 10 (the vocabulary of the whole corpus)", val.Len(), val.Classes())
	}
	val.Fill([]int{0}, x[:1], y[:1])
	if x[0] != 1 || y[0] != 1 {
		t.Errorf("validation window: x %v y %v, want 1 and 1 ('!')", x[0], y[0])
	}

	if _, err := newText("tinyshakespeare", []byte(corpus), "test", 2); err == nil || !strings.Contains(err.Error(), "test split has 2 characters") {
		t.Errorf("too short a split: error %v", err)
	}
	if _, err := newText("tinyshakespeare", []byte(corpus), "train", 0); err == nil {
		t.Error("sequence length 0: no error")
	}
}

func TestOpenText(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "tinyshakespeare/input.txt", []byte(strings.Repeat("To be, or not to be.\n", 10)))
	if _, err := Open(Options{Name: "tinyshakespeare", Dir: root}, "train"); err == nil || !strings.Contains(err.Error(), "sequence length 0") {
		t.Errorf("SeqLen 0: error %v", err)
	}
	ds, err := Open(Options{Name: "tinyshakespeare", Dir: root, SeqLen: 8}, "val")
	if err != nil {
		t.Fatal(err)
	}
	// 210 characters: 189 train, 21 validation, (21-1)/8 = 2 windows.
	if ds.Len() != 2 {
		t.Errorf("validation windows %d, want 2", ds.Len())
	}
	x := make([]float32, 16)
	y := make([]int32, 16)
	idx := []int{1, 0}
	if n := testing.AllocsPerRun(100, func() { ds.Fill(idx, x, y) }); n != 0 {
		t.Errorf("Fill allocates %v times per call", n)
	}
}
