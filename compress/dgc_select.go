package compress

import (
	"math"
	"slices"
)

// DGC's top-k selection: the exact top-k (the shared selector of
// selection.go: a heap scan for small k, a radix select otherwise) and the
// sampled threshold of the reference implementation
// (synxlin/deep-gradient-compression, dgc/compression.py).

// Bounds of the sampled threshold (reference defaults): more than dgcUpper*k
// passing falls back to the exact top-k among them; fewer than dgcLower*k
// lowers the threshold by the factor dgcLower, at most dgcRetries times.
const (
	dgcUpper   = 1.3
	dgcLower   = 0.8
	dgcRetries = 10
)

// dgcSampling is the sampling plan of a tensor at a density.
type dgcSampling struct {
	n      int // the tensor's size
	whole  bool
	stride int     // distance between samples
	dens   float64 // the density
}

// dgcPlan samples every stride-th element of the n from a random offset below
// the stride to the end of the tensor, the stride odd and at most n/want for
// want = max(ratio·n, ceil(2/density)) samples, so that the threshold rests
// on at least two sampled elements. An odd stride does not alias with the
// power-of-two row lengths of weight matrices (the reference's strides are
// 32j+1 for the same reason). Where the stride would be 1 (the tensor holds
// fewer than three times want elements) the tensor is taken whole (exact
// top-k): a run of consecutive elements from offset 0 would estimate the
// threshold from the tensor's first part alone.
func dgcPlan(n int, density, ratio float64) dgcSampling {
	want := max(int(math.Ceil(float64(n)*ratio)), int(math.Ceil(2/density)))
	stride := n / want
	if stride%2 == 0 {
		stride--
	}
	if stride < 2 {
		return dgcSampling{n: n, whole: true, stride: 1, dens: density}
	}
	return dgcSampling{n: n, stride: stride, dens: density}
}

// count is the number of samples from offset: offset, offset+stride, ...
// up to the tensor's end.
func (p dgcSampling) count(offset int) int { return (p.n-1-offset)/p.stride + 1 }

// top is the rank of the threshold among count samples: the sample's share
// of the density.
func (p dgcSampling) top(count int) int { return sparseK(count, p.dens) }

// dgcSelect is the reusable scratch of DGC's selection: the buffers grow to
// the largest size met and are reused, so steady-state steps do not allocate.
type dgcSelect struct {
	sel  selector
	vals []float32 // sampled magnitudes, or the values of the candidates
	pass []int32   // indices whose magnitude reaches the threshold
	out  []int32   // exact top-k
}

// exact returns the indices of the k largest magnitudes of v in increasing
// order (ties to the lowest index).
func (s *dgcSelect) exact(v []float32, k int) []int32 {
	s.out = slices.Grow(s.out[:0], k)
	return s.sel.topK(v, k, s.out[:k])
}

// sampledKth is the threshold estimated on the samples v[offset],
// v[offset+stride], ... of an accumulated v: the magnitude bits of the
// p.top-th largest.
func (s *dgcSelect) sampledKth(v []float32, p dgcSampling, offset int) uint32 {
	vals := s.vals[:0]
	for i := offset; i < len(v); i += p.stride {
		vals = append(vals, v[i])
	}
	s.vals = vals
	thr, _ := s.sel.kth(vals, p.top(len(vals)))
	return thr
}

// exactAmong is the exact top-k among the elements v[src[i]] (src increasing),
// as indices into v in increasing order.
func (s *dgcSelect) exactAmong(v []float32, src []int32, k int) []int32 {
	vals := s.vals[:0]
	for _, i := range src {
		vals = append(vals, v[i])
	}
	s.vals = vals
	idx := s.exact(vals, k)
	for i, j := range idx {
		idx[i] = src[j]
	}
	return idx
}

// atLeast returns the indices of v whose magnitude reaches thr (magnitude
// bits), in increasing order.
func (s *dgcSelect) atLeast(v []float32, thr uint32) []int32 {
	s.pass = appendAtLeast(s.pass[:0], v, thr, 0)
	return s.pass
}

// appendAtLeast appends to pass the indices base+i of the elements of v whose
// magnitude bits reach thr, in increasing order. Few elements pass: eight
// are tested at once, without branches. For keys and thr below 2^31
// (magnitudes, sign bit clear), key-thr as uint32 has bit 31 set exactly
// when key < thr, so the AND of eight differences keeps it only when all
// eight are below.
func appendAtLeast(pass []int32, v []float32, thr uint32, base int) []int32 {
	pass, i := appendAtLeastVec(pass, v, thr, base) // the whole vectors, where the CPU has them
	for ; i+8 <= len(v); i += 8 {
		b := v[i : i+8 : i+8]
		below := (magnitudeKey(b[0]) - thr) & (magnitudeKey(b[1]) - thr) & (magnitudeKey(b[2]) - thr) & (magnitudeKey(b[3]) - thr) &
			(magnitudeKey(b[4]) - thr) & (magnitudeKey(b[5]) - thr) & (magnitudeKey(b[6]) - thr) & (magnitudeKey(b[7]) - thr)
		if below>>31 != 0 {
			continue
		}
		for j, x := range b {
			if magnitudeKey(x) >= thr {
				pass = append(pass, int32(base+i+j))
			}
		}
	}
	for ; i < len(v); i++ {
		if magnitudeKey(v[i]) >= thr {
			pass = append(pass, int32(base+i))
		}
	}
	return pass
}

// settle selects about k elements of v from those (pass) whose magnitude
// reaches thr, the threshold estimated on a sample (sampledKth):
// when more than 1.3k pass, the exact top-k among them is taken; when fewer
// than 0.8k pass, the threshold is lowered by 0.8 and tried again, at most
// 10 times, after which what passes is sent. pass must be s.pass, as atLeast
// leaves it.
func (s *dgcSelect) settle(v []float32, k int, thr uint32, pass []int32) []int32 {
	for try := 0; ; try++ {
		switch {
		case float64(len(pass)) > dgcUpper*float64(k):
			return s.exactAmong(v, pass, k)
		case float64(len(pass)) >= dgcLower*float64(k) || try == dgcRetries:
			return pass
		}
		thr = magnitudeKey(math.Float32frombits(thr) * dgcLower)
		pass = s.atLeast(v, thr)
	}
}
