package compress

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// sparseK is the number of elements a sparsifier sends from a tensor of n
// elements at the given density: ceil(n*density), at least 1 and at most n.
// The product is shrunk by one part in 10^12 before rounding up because
// decimal densities are inexact in binary (30*0.1 is 3.0000000000000004, whose
// ceiling would be 4); no realistic density puts a true product that close
// above an integer.
func sparseK(n int, density float64) int {
	k := int(math.Ceil(float64(n) * density * (1 - 1e-12)))
	return min(max(k, 1), n)
}

// checkDensity validates compress.density for the sparsifiers (as
// Config.Problems does, for builders called without Validate).
func checkDensity(d float64) error {
	if !(d > 0 && d <= 1) { // also rejects NaN
		return Problem{Key: "compress.density", Value: d, Want: "must be a fraction in (0, 1]"}
	}
	return nil
}

// checkIndexable rejects tensors whose element indices do not fit the int32
// indices of a sparse payload.
func checkIndexable(tensors []Tensor) error {
	for _, t := range tensors {
		if t.Size > math.MaxInt32 {
			return fmt.Errorf("compress: tensor %s has %d elements: sparse payloads index at most %d", t.Name, t.Size, math.MaxInt32)
		}
	}
	return nil
}

// magnitudeKey is |x| as its IEEE bits: for non-negative floats the bit patterns
// order like the values, so magnitudes compare as uint32. NaN sorts above
// +Inf (a NaN gradient is always selected, so it is not hidden in a residual).
func magnitudeKey(x float32) uint32 { return math.Float32bits(x) &^ (1 << 31) }

// The three radix digits of a 31-bit magnitude, most significant first.
const (
	digit1Shift = 20 // bits 30..20: sign-free exponent and top 3 mantissa bits
	digit2Shift = 9  // bits 19..9
	digit2Mask  = 1<<11 - 1
	digit3Mask  = 1<<9 - 1
)

// selector is exact top-k selection by magnitude. It is a radix select: the
// partition step of quickselect with 2048 histogram buckets as pivots, on the
// magnitude bits 11, 11 and 9 at a time. The first digit is counted over the
// input directly; only the elements of the bucket holding the k-th largest
// magnitude are copied, and then filtered twice more. That is O(n) with no
// data-dependent recursion depth, two reads of the input plus the final
// gather, and no scratch beyond one bucket's keys (kept between calls, so
// steady-state selection does not allocate). The zero value is ready to use.
//
// For small k (at most smallTopMax) one scan keeps the k largest seen so far
// in a heap instead: the scan compares eight elements at a time with the
// heap's smallest and rarely finds one above it, where the radix select
// would clear and walk its 2048 buckets three times, which dominates on the
// few thousand elements of a sampled threshold or a small tensor. A scan
// that keeps finding new entries (magnitudes rising along v) gives up for
// the radix select.
type selector struct {
	hist [1 << 11]int
	keys []uint32
	heap []heapEntry
	// The sampled prefilter's scratch (prefilter).
	samp  []float32
	cand  []int32
	cvals []float32
}

// smallTopMax is the largest k that the heap scan takes.
const smallTopMax = 64

// heapEntry is an element of v in the heap scan: its magnitude bits and index.
type heapEntry struct {
	key uint32
	idx int32
}

// worse orders the heap: the smaller magnitude, or at equal magnitudes the
// higher index (top-k takes ties from the lowest index up).
func (a heapEntry) worse(b heapEntry) bool {
	return a.key < b.key || a.key == b.key && a.idx > b.idx
}

// siftDown restores the heap property (worst at the root) below i.
func siftDown(h []heapEntry, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].worse(h[c]) {
			c++
		}
		if !h[c].worse(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// heapTop leaves in s.heap the k largest elements of v by (magnitude, then
// lowest index), 1 <= k <= min(len(v), smallTopMax), the worst at the root.
// It reports false, with s.heap undefined, when the scan replaced more
// entries than the radix select would be worth.
func (s *selector) heapTop(v []float32, k int) bool {
	h := slices.Grow(s.heap[:0], smallTopMax)[:k]
	s.heap = h
	for i := range h {
		h[i] = heapEntry{magnitudeKey(v[i]), int32(i)}
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	// Random order replaces about k·ln(n/k) entries; rising magnitudes
	// replace one per element.
	budget := 4*k + len(v)/16
	for i := k; i < len(v); {
		off, mask := nextAbove(v[i:], h[0].key)
		if mask == 0 {
			return true
		}
		i += off
		for ; mask != 0; mask &= mask - 1 {
			j := i + bits.TrailingZeros32(mask)
			// The root rises as entries are replaced: test again.
			if m := magnitudeKey(v[j]); m > h[0].key {
				if budget--; budget < 0 {
					return false
				}
				h[0] = heapEntry{m, int32(j)}
				siftDown(h, 0)
			}
		}
		i += 8
	}
	return true
}

// nextAbove returns the offset of the first block of eight elements of v (the
// last block may be shorter) holding magnitude bits above thr, with the mask
// of those elements in the block (bit j: v[off+j]); mask 0 when none is above.
func nextAbove(v []float32, thr uint32) (off int, mask uint32) {
	off, mask, i := nextAboveVec(v, thr) // the whole vectors, where the CPU has them
	if mask != 0 {
		return off, mask
	}
	// For keys and thr below 2^31, thr-key as uint32 has bit 31 set exactly
	// when key > thr.
	for ; i+8 <= len(v); i += 8 {
		b := v[i : i+8 : i+8]
		above := (thr - magnitudeKey(b[0])) | (thr - magnitudeKey(b[1])) | (thr - magnitudeKey(b[2])) | (thr - magnitudeKey(b[3])) |
			(thr - magnitudeKey(b[4])) | (thr - magnitudeKey(b[5])) | (thr - magnitudeKey(b[6])) | (thr - magnitudeKey(b[7]))
		if above>>31 != 0 {
			break
		}
	}
	for j := i; j < len(v) && j < i+8; j++ {
		if magnitudeKey(v[j]) > thr {
			mask |= 1 << (j - i)
		}
	}
	return i, mask
}

// topK writes to idx the indices of the k elements of v with the largest
// magnitude, in increasing order, and returns idx[:k] (k is clamped to
// [0, len(v)]; idx must hold that many). Equal magnitudes are taken from the
// lowest index up, so the result is a function of v and k alone.
func (s *selector) topK(v []float32, k int, idx []int32) []int32 {
	if k >= len(v) {
		idx = idx[:len(v)]
		for i := range idx {
			idx[i] = int32(i)
		}
		return idx
	}
	if k <= 0 {
		return idx[:0]
	}
	if s.prefilter(v, k, idx) {
		return idx[:k]
	}
	return s.topKAll(v, k, idx)
}

// topKAll is topK by a pass over all of v, for 0 < k < len(v).
func (s *selector) topKAll(v []float32, k int, idx []int32) []int32 {
	if k <= smallTopMax && s.heapTop(v, k) {
		idx = idx[:k]
		for i, e := range s.heap {
			idx[i] = e.idx
		}
		slices.Sort(idx)
		return idx
	}
	thr, above := s.radixKth(v, k)
	ties := k - above // elements of magnitude thr to take, lowest index first
	idx = idx[:k]
	j := 0
	for i, x := range v {
		m := magnitudeKey(x)
		if m < thr {
			continue
		}
		if m == thr {
			if ties == 0 {
				continue
			}
			ties--
		}
		idx[j] = int32(i)
		j++
		if j == k {
			break
		}
	}
	return idx
}

// The sampled prefilter of topK, for a k that is a small share of a large
// v: the magnitudes of every prefilterStride-th element give a bound that
// about 3k + 16·prefilterStride elements reach; one vector scan collects
// those, and the top-k is taken among them. Whenever at least k elements
// reach the bound, the k-th largest magnitude is at or above it, so every
// element of the top-k (ties included) is among those collected, in index
// order: the result is topKAll's exactly, for any v. When fewer pass (a
// sample that misjudged v, which random data does not produce) or the bound
// is zero (mostly zeros: all would pass), topKAll takes v whole.
const (
	prefilterStride = 257     // odd, so it does not alias with power-of-two rows; 1 KB apart
	prefilterMinN   = 1 << 14 // below this the pass over v is cheap anyway
	prefilterShare  = 64      // k at most n/64
)

// prefilter is topK through the sampled prefilter; it reports false, with
// idx unspecified, where topKAll must take v whole.
func (s *selector) prefilter(v []float32, k int, idx []int32) bool {
	n := len(v)
	if n < prefilterMinN || k*prefilterShare > n {
		return false
	}
	samp := s.samp[:0]
	for i := prefilterStride / 2; i < n; i += prefilterStride {
		samp = append(samp, v[i])
	}
	s.samp = samp
	// Three times the samples expected above the k-th largest, and 16 more:
	// a bound below the k-th largest, but for a vanishing chance.
	r := 3*k*len(samp)/n + 16
	if r >= len(samp) {
		return false
	}
	bound, _ := s.kth(samp, r)
	if bound == 0 {
		return false
	}
	s.cand = appendAtLeast(s.cand[:0], v, bound, 0)
	if len(s.cand) < k {
		return false
	}
	vals := s.cvals[:0]
	for _, i := range s.cand {
		vals = append(vals, v[i])
	}
	s.cvals = vals
	if k >= len(vals) {
		copy(idx, s.cand)
		return true
	}
	for j, p := range s.topKAll(vals, k, idx) {
		idx[j] = s.cand[p]
	}
	return true
}

// kth returns the magnitude bits of the k-th largest magnitude in v
// (1 <= k <= len(v)) and the number of elements strictly above it.
func (s *selector) kth(v []float32, k int) (thr uint32, above int) {
	if k <= smallTopMax && s.heapTop(v, k) {
		thr = s.heap[0].key
		for _, e := range s.heap {
			if e.key > thr {
				above++
			}
		}
		return thr, above
	}
	return s.radixKth(v, k)
}

// radixKth is kth by the radix select.
func (s *selector) radixKth(v []float32, k int) (thr uint32, above int) {
	h := &s.hist
	clear(h[:])
	for _, x := range v {
		h[magnitudeKey(x)>>digit1Shift]++
	}
	b1, a, k := radixPick(h[:], k)
	above += a

	// Keep the magnitudes of bucket b1 only. The bucket's size drifts from
	// step to step: grow the scratch geometrically, not to each new maximum.
	s.keys = slices.Grow(s.keys[:0], h[b1])
	keys := s.keys[:h[b1]]
	n := 0
	for _, x := range v {
		if m := magnitudeKey(x); m>>digit1Shift == uint32(b1) {
			keys[n] = m
			n++
		}
	}

	clear(h[:])
	for _, m := range keys {
		h[m>>digit2Shift&digit2Mask]++
	}
	b2, a, k := radixPick(h[:], k)
	above += a
	n = 0
	for _, m := range keys {
		if m>>digit2Shift&digit2Mask == uint32(b2) {
			keys[n] = m
			n++
		}
	}
	keys = keys[:n]

	clear(h[:digit3Mask+1])
	for _, m := range keys {
		h[m&digit3Mask]++
	}
	b3, a, _ := radixPick(h[:digit3Mask+1], k)
	above += a
	return uint32(b1)<<digit1Shift | uint32(b2)<<digit2Shift | uint32(b3), above
}

// radixPick finds the bucket holding the k-th largest element of a histogram: it
// returns the bucket, the count in the buckets above it, and k's rank within
// the bucket.
func radixPick(h []int, k int) (bucket, above, rank int) {
	for b := len(h) - 1; b >= 0; b-- {
		if above+h[b] >= k {
			return b, above, k - above
		}
		above += h[b]
	}
	panic("compress: selection rank exceeds the number of elements")
}
