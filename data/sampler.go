package data

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Sampler orders the examples of each epoch. The order depends only on (seed, epoch):
// every worker computes the same global batches without talking to the others, and a
// resumed run sees the same batches as an uninterrupted one.
//
// The permutation is a Fisher-Yates shuffle driven by math/rand/v2's PCG, implemented
// here so that it is deterministic across Go releases only as far as PCG's output for
// a given seed is (a golden test pins it).
type Sampler struct {
	n    int
	seed int64
}

// NewSampler returns a sampler over examples 0..n-1.
func NewSampler(n int, seed int64) *Sampler {
	return &Sampler{n: n, seed: seed}
}

// Permutation returns the order of examples 0..n-1 for epoch.
func (s *Sampler) Permutation(epoch int) []int {
	var src rand.PCG
	src.Seed(uint64(s.seed), uint64(epoch))
	perm := make([]int, s.n)
	for i := range perm {
		perm[i] = i
	}
	for i := s.n - 1; i > 0; i-- {
		j := boundedUint64(&src, uint64(i)+1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// boundedUint64 returns a uniform value in [0, n) (Lemire's multiply-shift with
// rejection, so there is no modulo bias).
func boundedUint64(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// StepsPerEpoch is the number of whole global batches in an epoch; the last partial
// batch is dropped so that every step has the same size. It is 0 when globalBatch < 1.
func (s *Sampler) StepsPerEpoch(globalBatch int) int {
	if globalBatch < 1 {
		return 0
	}
	return s.n / globalBatch
}

// Batch returns the example indices of global batch step of an epoch's permutation: a
// sub-slice of perm, not a copy. step must be below StepsPerEpoch(globalBatch).
func (s *Sampler) Batch(perm []int, step, globalBatch int) []int {
	return perm[step*globalBatch : (step+1)*globalBatch]
}

// WorkerSlice returns worker's contiguous share of a global batch (a sub-slice, not a
// copy). The batch must divide evenly among the workers, so that every worker runs the
// same per-worker batch size and concatenating the slices gives the global batch.
func WorkerSlice(batch []int, worker, workers int) ([]int, error) {
	if workers < 1 || worker < 0 || worker >= workers {
		return nil, fmt.Errorf("worker %d of %d: expected 0 <= worker < workers", worker, workers)
	}
	if len(batch)%workers != 0 {
		return nil, fmt.Errorf("global batch of %d does not divide among %d workers", len(batch), workers)
	}
	per := len(batch) / workers
	return batch[worker*per : (worker+1)*per], nil
}
