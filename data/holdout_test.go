package data

import (
	"slices"
	"strings"
	"testing"
)

// TestHoldOutSplit: the two parts are disjoint, sorted, of sizes n-k and k,
// and together every example once; the split depends on (n, k) alone, and a
// larger k holds out every example of a smaller one.
func TestHoldOutSplit(t *testing.T) {
	const n = 1000
	for _, k := range []int{0, 1, 100, 999} {
		train, val, err := HoldOut(n, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(train) != n-k || len(val) != k {
			t.Fatalf("k=%d: %d training and %d validation examples, want %d and %d", k, len(train), len(val), n-k, k)
		}
		if !slices.IsSorted(train) || !slices.IsSorted(val) {
			t.Errorf("k=%d: parts not in ascending order", k)
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(train), val...)))
		for i, v := range all {
			if v != i {
				t.Fatalf("k=%d: the parts together are not 0..%d once each (sorted[%d] = %d)", k, n-1, i, v)
			}
		}
		train2, val2, _ := HoldOut(n, k)
		if !slices.Equal(train, train2) || !slices.Equal(val, val2) {
			t.Errorf("k=%d: two calls split differently", k)
		}
	}
	_, small, _ := HoldOut(n, 10)
	_, large, _ := HoldOut(n, 300)
	for _, i := range small {
		if !slices.Contains(large, i) {
			t.Errorf("example %d is held out with k=10 but not with k=300", i)
		}
	}
	// Not the first or last examples of the file: a shuffle, spread over the split.
	if _, val, _ := HoldOut(n, 100); val[0] > 50 || val[99] < 950 || slices.Equal(val, seqInts(0, 100)) {
		t.Errorf("held-out examples %v... not spread over 0..999", val[:10])
	}
}

// TestHoldOutGolden pins the held-out examples of a small split, so that a
// change that would move every run's validation set is noticed: they are the
// first 3 of Sampler's permutation of 0..9 with seed 0x76616c, epoch 0.
func TestHoldOutGolden(t *testing.T) {
	perm := NewSampler(10, 0x76616c).Permutation(0)
	want := slices.Sorted(slices.Values(perm[:3]))
	_, val, err := HoldOut(10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(val, want) {
		t.Fatalf("held out %v, want %v (the first 3 of %v)", val, want, perm)
	}
	if got := []int{1, 5, 8}; !slices.Equal(val, got) {
		t.Errorf("held out %v, pinned %v: the validation split of every data set changed", val, got)
	}
}

func TestHoldOutRefuses(t *testing.T) {
	for _, k := range []int{-1, 10, 11} {
		if _, _, err := HoldOut(10, k); err == nil || !strings.Contains(err.Error(), "0 <= k < 10") {
			t.Errorf("k=%d of 10: error %v, want a refusal stating 0 <= k < 10", k, err)
		}
	}
}

// TestSubsetFill: a subset's examples are the underlying ones at its indices,
// over more indices than Fill maps at a time.
func TestSubsetFill(t *testing.T) {
	const n, size = 200, 2 * 2
	pix := make([]uint8, n*size)
	labels := make([]uint8, n)
	for i := range n {
		for k := range size {
			pix[i*size+k] = uint8(i + k)
		}
		labels[i] = uint8(i % 7)
	}
	ds := newImages("fake", []int{1, 2, 2}, 7, pix, labels, nil, nil, false)
	idx := make([]int, 150)
	for i := range idx {
		idx[i] = (i*37 + 11) % n
	}
	sub, err := NewSubset(ds, idx)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Len() != len(idx) || !slices.Equal(sub.Indices(), idx) || sub.Classes() != 7 || !slices.Equal(sub.XShape(), []int{1, 2, 2}) {
		t.Fatalf("subset: len %d, classes %d, shape %v", sub.Len(), sub.Classes(), sub.XShape())
	}
	ask := make([]int, 140)
	for i := range ask {
		ask[i] = len(idx) - 1 - i
	}
	x, y := make([]float32, len(ask)*size), make([]int32, len(ask))
	sub.Fill(ask, x, y)
	wx, wy := make([]float32, size), make([]int32, 1)
	for i, j := range ask {
		ds.Fill([]int{idx[j]}, wx, wy)
		if !slices.Equal(x[i*size:(i+1)*size], wx) || y[i] != wy[0] {
			t.Fatalf("subset example %d: %v label %d, want example %d's %v label %d", j, x[i*size:(i+1)*size], y[i], idx[j], wx, wy[0])
		}
	}
	if _, err := NewSubset(ds, []int{0, n}); err == nil {
		t.Error("a subset with an index past the end was accepted")
	}
}

func seqInts(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// TestHoldOutOfText: a text corpus holds out its last windows, one stretch
// of text after every window it trains on; other data sets take HoldOut's
// permutation.
func TestHoldOutOfText(t *testing.T) {
	corpus := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 40))
	text, err := newText("tinyshakespeare", corpus, "train", 16)
	if err != nil {
		t.Fatal(err)
	}
	n := text.Len()
	train, val, err := HoldOutOf(text, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(val, seqInts(n-10, 10)) || !slices.Equal(train, seqInts(0, n-10)) {
		t.Fatalf("text of %d windows: held out %v, trains on %d windows from %v", n, val, len(train), train[:3])
	}
	if _, _, err := HoldOutOf(text, n); err == nil || !strings.Contains(err.Error(), "expected 0 <= k <") {
		t.Errorf("holding out all %d windows: %v, want a range error", n, err)
	}
	sub, _ := NewSubset(text, seqInts(0, n)) // not a *Text: the permutation
	_, val2, _ := HoldOutOf(sub, 10)
	_, want, _ := HoldOut(n, 10)
	if !slices.Equal(val2, want) {
		t.Errorf("a subset holds out %v, HoldOut gives %v", val2, want)
	}
}
