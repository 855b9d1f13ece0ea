package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// NoisyLabels is a classification data set with a fixed fraction of its
// labels replaced by another class (the mislabelled-data experiments of
// TracIn, Pruthi et al. 2020): which examples, and the wrong class of each,
// come from a seeded stream, so a run and its analysis see the same flips.
type NoisyLabels struct {
	Dataset
	flip map[int]int32 // example -> the label it is given
}

// NewNoisyLabels flips round(fraction * Len) labels of ds (one label per
// example) to a class drawn uniformly from the others.
func NewNoisyLabels(ds Dataset, fraction float64, seed uint64) (*NoisyLabels, error) {
	if ds.YLen() != 1 {
		return nil, fmt.Errorf("label noise: %s has %d labels per example, expected a classification data set (1)", ds.Name(), ds.YLen())
	}
	if !(fraction >= 0 && fraction < 1) {
		return nil, fmt.Errorf("label noise: fraction %v, expected [0, 1)", fraction)
	}
	n, classes := ds.Len(), ds.Classes()
	if classes < 2 {
		return nil, fmt.Errorf("label noise: %s has %d classes, expected at least 2", ds.Name(), classes)
	}
	r := rand.New(rand.NewPCG(seed, 0x6e6f697379)) // "noisy"
	k := int(math.Round(fraction * float64(n)))
	chosen := r.Perm(n)[:k]
	slices.Sort(chosen)
	x := make([]float32, numel(ds.XShape()))
	y := make([]int32, 1)
	flip := make(map[int]int32, k)
	for _, i := range chosen {
		ds.Fill([]int{i}, x, y)
		flip[i] = (y[0] + 1 + int32(r.IntN(classes-1))) % int32(classes)
	}
	return &NoisyLabels{Dataset: ds, flip: flip}, nil
}

// Fill implements Dataset, with the flipped labels.
func (d *NoisyLabels) Fill(idx []int, x []float32, y []int32) {
	d.Dataset.Fill(idx, x, y)
	for k, i := range idx {
		if l, ok := d.flip[i]; ok {
			y[k] = l
		}
	}
}

// Flipped reports whether example i's label was replaced.
func (d *NoisyLabels) Flipped(i int) bool {
	_, ok := d.flip[i]
	return ok
}

// Count is the number of flipped labels.
func (d *NoisyLabels) Count() int { return len(d.flip) }

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}
