package data

import (
	"fmt"
	"slices"
)

// holdOutSeed drives the permutation that picks the validation examples. It is
// a constant, mixed with nothing of the run (not its seed, workers or batch
// size), so that every run of a data set holds out the same examples and the
// runs of a sweep are compared on one validation set. The value is arbitrary
// ("val" in ASCII); changing it changes every validation split.
const holdOutSeed = 0x76616c

// HoldOutOf is HoldOut for the data set ds, except that a text corpus (*Text)
// holds out its last k windows: its windows are consecutive stretches of one
// text, so a random choice would hold out windows whose neighbours, sharing
// their context, are trained on. The tail is one stretch, as the corpus's own
// test split (the last 10%) is.
func HoldOutOf(ds Dataset, k int) (train, val []int, err error) {
	if _, ok := ds.(*Text); ok {
		return HoldOutTail(ds.Len(), k)
	}
	return HoldOut(ds.Len(), k)
}

// HoldOutTail splits the examples 0..n-1 into the last k, held out, and the
// first n-k, both in ascending order.
func HoldOutTail(n, k int) (train, val []int, err error) {
	if k < 0 || k >= n {
		return nil, nil, fmt.Errorf("hold out %d of %d examples: expected 0 <= k < %d, leaving some to train on", k, n, n)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all[: n-k : n-k], all[n-k:], nil
}

// HoldOut splits the examples 0..n-1 of a training split into k held-out
// validation examples and the n-k that remain for training, both in ascending
// order. The held-out examples are the first k of a fixed permutation of
// 0..n-1 (Sampler's Fisher-Yates shuffle with holdOutSeed, epoch 0), so they
// depend on n and k alone, and the split for a larger k holds out every
// example of a smaller one. There is no stratification: with k in the
// thousands each class's share is close to its share of the training split.
func HoldOut(n, k int) (train, val []int, err error) {
	if k < 0 || k >= n {
		return nil, nil, fmt.Errorf("hold out %d of %d examples: expected 0 <= k < %d, leaving some to train on", k, n, n)
	}
	perm := NewSampler(n, holdOutSeed).Permutation(0)
	val, train = perm[:k:k], perm[k:]
	slices.Sort(val)
	slices.Sort(train)
	return train, val, nil
}

// Subset is the examples idx of a data set, renumbered 0..len(idx)-1: a view,
// not a copy. The training run uses it for the part of the training split it
// trains on and for the validation split held out of it.
type Subset struct {
	ds  Dataset
	idx []int
}

// NewSubset returns the examples idx of ds (each in [0, ds.Len())).
func NewSubset(ds Dataset, idx []int) (*Subset, error) {
	for _, i := range idx {
		if i < 0 || i >= ds.Len() {
			return nil, fmt.Errorf("subset of %s: example %d outside 0..%d", ds.Name(), i, ds.Len()-1)
		}
	}
	return &Subset{ds: ds, idx: slices.Clone(idx)}, nil
}

// Indices returns the examples of the underlying data set the subset holds, in
// its order (a copy).
func (s *Subset) Indices() []int { return slices.Clone(s.idx) }

// Name implements Dataset.
func (s *Subset) Name() string { return s.ds.Name() }

// Len implements Dataset.
func (s *Subset) Len() int { return len(s.idx) }

// XShape implements Dataset.
func (s *Subset) XShape() []int { return s.ds.XShape() }

// YLen implements Dataset.
func (s *Subset) YLen() int { return s.ds.YLen() }

// Classes implements Dataset.
func (s *Subset) Classes() int { return s.ds.Classes() }

// subsetChunk is how many indices Fill maps at a time: a fixed array on the
// stack, so that Fill neither allocates nor shares a buffer between callers.
const subsetChunk = 64

// Fill implements Dataset: example i of the subset is example idx[i] of the
// underlying data set.
func (s *Subset) Fill(idx []int, x []float32, y []int32) {
	xs, ys := 1, s.ds.YLen()
	for _, d := range s.ds.XShape() {
		xs *= d
	}
	var mapped [subsetChunk]int
	for lo := 0; lo < len(idx); lo += subsetChunk {
		hi := min(lo+subsetChunk, len(idx))
		for i, j := range idx[lo:hi] {
			mapped[i] = s.idx[j]
		}
		s.ds.Fill(mapped[:hi-lo], x[lo*xs:hi*xs], y[lo*ys:hi*ys])
	}
}
