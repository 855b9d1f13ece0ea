package data

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// newTestAugmenter builds an augmenter or fails the test.
func newTestAugmenter(t *testing.T, seed int64, shape []int, pad int, flip bool, fill []float32) *Augmenter {
	t.Helper()
	a, err := NewCIFARAugmenter(seed, shape, pad, flip, fill)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAugmentByHand(t *testing.T) {
	// One 3x3 channel, values 1..9, padded by 1 with -1:
	//   -1 -1 -1 -1 -1
	//   -1  1  2  3 -1
	//   -1  4  5  6 -1
	//   -1  7  8  9 -1
	//   -1 -1 -1 -1 -1
	a := newTestAugmenter(t, 0, []int{1, 3, 3}, 1, true, []float32{-1})
	img := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		dy, dx int
		flip   bool
		want   []float32
	}{
		{1, 1, false, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{1, 1, true, []float32{3, 2, 1, 6, 5, 4, 9, 8, 7}},
		{0, 0, false, []float32{-1, -1, -1, -1, 1, 2, -1, 4, 5}},
		{2, 1, false, []float32{4, 5, 6, 7, 8, 9, -1, -1, -1}},
		{1, 2, false, []float32{2, 3, -1, 5, 6, -1, 8, 9, -1}},
		{0, 2, true, []float32{-1, -1, -1, -1, 3, 2, -1, 6, 5}},
		{2, 0, false, []float32{-1, 4, 5, -1, 7, 8, -1, -1, -1}},
	} {
		got := slices.Clone(img)
		a.transform(got, tc.dy, tc.dx, tc.flip)
		if !slices.Equal(got, tc.want) {
			t.Errorf("crop at (%d, %d) flip %v: %v, want %v", tc.dy, tc.dx, tc.flip, got, tc.want)
		}
	}
}

// reference crops by building the padded image, as torchvision does.
func reference(img []float32, c, h, w, pad, dy, dx int, flip bool, fill []float32) []float32 {
	ph, pw := h+2*pad, w+2*pad
	out := make([]float32, len(img))
	for ch := range c {
		padded := make([]float32, ph*pw)
		for i := range padded {
			padded[i] = fill[ch]
		}
		for y := range h {
			copy(padded[(y+pad)*pw+pad:], img[ch*h*w+y*w:ch*h*w+(y+1)*w])
		}
		for y := range h {
			for x := range w {
				sx := x
				if flip {
					sx = w - 1 - x
				}
				out[ch*h*w+y*w+x] = padded[(y+dy)*pw+sx+dx]
			}
		}
	}
	return out
}

func TestAugmentMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []struct{ c, h, w, pad int }{{3, 5, 4, 2}, {2, 2, 2, 3}, {3, 32, 32, 4}} {
		fill := []float32{-0.5, -1.5, -2.5}[:s.c]
		a := newTestAugmenter(t, 0, []int{s.c, s.h, s.w}, s.pad, true, fill)
		img := make([]float32, s.c*s.h*s.w)
		for i := range img {
			img[i] = rng.Float32()
		}
		for dy := range 2*s.pad + 1 {
			for dx := range 2*s.pad + 1 {
				for _, flip := range []bool{false, true} {
					got := slices.Clone(img)
					a.transform(got, dy, dx, flip)
					if want := reference(img, s.c, s.h, s.w, s.pad, dy, dx, flip, fill); !slices.Equal(got, want) {
						t.Fatalf("%+v crop (%d, %d) flip %v differs from the padded reference", s, dy, dx, flip)
					}
				}
			}
		}
	}
}

func TestAugmentDeterministic(t *testing.T) {
	shape := []int{3, 8, 8}
	size := 3 * 8 * 8
	fill := []float32{-1, -2, -3}
	idx := []int{7, 2, 11, 5, 40, 3}
	batch := make([]float32, len(idx)*size)
	for i := range batch {
		batch[i] = float32(i%size) + 0.5
	}
	a := newTestAugmenter(t, 42, shape, 4, true, fill)
	whole := slices.Clone(batch)
	a.Apply(whole, idx, 3)

	// The same batch split among workers, each with its own augmenter, in any order.
	for _, workers := range []int{2, 3, 6} {
		per := len(idx) / workers
		split := slices.Clone(batch)
		for w := workers - 1; w >= 0; w-- {
			aw := newTestAugmenter(t, 42, shape, 4, true, fill)
			aw.Apply(split[w*per*size:(w+1)*per*size], idx[w*per:(w+1)*per], 3)
		}
		if !slices.Equal(split, whole) {
			t.Errorf("%d workers: result differs from the unsplit batch", workers)
		}
	}

	other := slices.Clone(batch)
	a.Apply(other, idx, 4)
	if slices.Equal(other, whole) {
		t.Error("epochs 3 and 4 augment identically")
	}
	other = slices.Clone(batch)
	newTestAugmenter(t, 43, shape, 4, true, fill).Apply(other, idx, 3)
	if slices.Equal(other, whole) {
		t.Error("seeds 42 and 43 augment identically")
	}
	if n := testing.AllocsPerRun(20, func() { a.Apply(other, idx, 3) }); n != 0 {
		t.Errorf("Apply allocates %v times per call", n)
	}
}

func TestAugmentChoices(t *testing.T) {
	const n = 18000
	a := newTestAugmenter(t, 7, []int{3, 32, 32}, 4, true, []float32{0, 0, 0})
	var flips int
	var ys, xs [9]int
	for i := range n {
		dy, dx, flip := a.choices(i, 1)
		ys[dy]++
		xs[dx]++
		if flip {
			flips++
		}
	}
	// Binomial standard deviations: ~67 for flips, ~42 per offset bin.
	if flips < n/2-400 || flips > n/2+400 {
		t.Errorf("%d flips in %d, want about half", flips, n)
	}
	for v := range 9 {
		if ys[v] < n/9-300 || ys[v] > n/9+300 || xs[v] < n/9-300 || xs[v] > n/9+300 {
			t.Errorf("offset %d drawn %d (dy) and %d (dx) times in %d, want about %d", v, ys[v], xs[v], n, n/9)
		}
	}
	noFlip := newTestAugmenter(t, 7, []int{3, 32, 32}, 4, false, []float32{0, 0, 0})
	for i := range 100 {
		if _, _, flip := noFlip.choices(i, 1); flip {
			t.Fatal("flip disabled but chosen")
		}
	}
}

func TestNewCIFARAugmenterErrors(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		pad   int
		fill  []float32
	}{
		{[]int{32, 32}, 4, []float32{0}},
		{[]int{3, 0, 32}, 4, []float32{0, 0, 0}},
		{[]int{3, 32, 32}, -1, []float32{0, 0, 0}},
		{[]int{3, 32, 32}, 4, []float32{0}},
	} {
		if _, err := NewCIFARAugmenter(1, tc.shape, tc.pad, true, tc.fill); err == nil {
			t.Errorf("shape %v pad %d fill %v: no error", tc.shape, tc.pad, tc.fill)
		}
	}
}
