package compress

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSparseK(t *testing.T) {
	for _, c := range []struct {
		n       int
		density float64
		want    int
	}{
		{8, 0.25, 2},
		{9, 0.25, 3},           // ceil(2.25)
		{30, 0.1, 3},           // 30*0.1 is 3.0000000000000004 in float64
		{1000, 0.001, 1},       // exactly 1
		{1001, 0.001, 2},       // ceil(1.001)
		{10, 1e-9, 1},          // at least one element
		{10, 1, 10},            // all of them
		{1200, 0.05, 60},       // the conformance fc.w at its density
		{1000000, 0.001, 1000}, // the default density
	} {
		if got := sparseK(c.n, c.density); got != c.want {
			t.Errorf("sparseK(%d, %v) = %d, want %d", c.n, c.density, got, c.want)
		}
	}
}

// referenceTopK sorts the indices by decreasing magnitude, then increasing
// index, keeps k and returns them in increasing order.
func referenceTopK(v []float32, k int) []int32 {
	idx := make([]int32, len(v))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := cmp.Compare(magnitudeKey(v[b]), magnitudeKey(v[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	idx = idx[:min(max(k, 0), len(v))]
	slices.Sort(idx)
	return idx
}

func TestSelectorTopKHandWorked(t *testing.T) {
	// |v| = 0.5 2 0 2 3 0.5 2: the top 1 is index 4 (3); the top 3 add two of
	// the three 2s (indices 1, 3, 6), the lowest indices 1 and 3; the top 5
	// take all 2s and the first 0.5 (index 0, before index 5). -0 ties with +0.
	v := []float32{0.5, -2, 0, 2, -3, -0.5, 2, float32(math.Copysign(0, -1))}
	var s selector
	idx := make([]int32, len(v))
	for _, c := range []struct {
		k    int
		want []int32
	}{
		{1, []int32{4}},
		{3, []int32{1, 3, 4}},
		{5, []int32{0, 1, 3, 4, 6}},
		{7, []int32{0, 1, 2, 3, 4, 5, 6}}, // +0 (index 2) before -0 (index 7)
		{0, []int32{}},
		{8, []int32{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		if got := s.topK(v, c.k, idx); !slices.Equal(got, c.want) {
			t.Errorf("k=%d: %v, want %v", c.k, got, c.want)
		}
	}
}

func TestSelectorTopKMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func() float32{
		// Many exact ties, including signed zeros.
		"ties": func() float32 { return float32(rng.IntN(7)-3) * 0.5 },
		// Gaussian: one first-digit bucket holds many candidates.
		"normal": func() float32 { return float32(rng.NormFloat64()) },
		// Magnitudes over 60 decades, subnormals and infinities: every digit
		// of the key is exercised.
		"wide": func() float32 {
			switch rng.IntN(50) {
			case 0:
				return float32(math.Inf(1 - 2*rng.IntN(2)))
			case 1:
				return math.Float32frombits(rng.Uint32() & 0x807fffff) // subnormal
			}
			return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30)))
		},
		// Every magnitude equal: the whole input lands in one bucket.
		"equal": func() float32 { return float32(1 - 2*rng.IntN(2)) },
	}
	var s selector // shared: scratch reuse across sizes must not leak state
	for name, gen := range gens {
		for _, n := range []int{1, 2, 7, 100, 5000} {
			v := make([]float32, n)
			for i := range v {
				v[i] = gen()
			}
			idx := make([]int32, n)
			for _, k := range []int{1, 2, n / 3, n / 2, n - 1, n} {
				if k < 1 {
					continue
				}
				want := referenceTopK(v, k)
				if got := s.topK(v, k, idx); !slices.Equal(got, want) {
					t.Fatalf("%s n=%d k=%d: %v, want %v", name, n, k, got, want)
				}
			}
		}
	}
}

func TestSelectorDoesNotAllocateWhenWarm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, 100000)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	var s selector
	idx := make([]int32, 100)
	s.topK(v, 100, idx)
	if a := testing.AllocsPerRun(5, func() { s.topK(v, 100, idx) }); a != 0 {
		t.Fatalf("%v allocations per selection", a)
	}
}

// TestSelectorHeapScan: for k up to smallTopMax, topK and kth scan with a
// heap (heapTop); both must give the radix select's answer, with the vector
// scan and the Go loops, on inputs with ties, NaNs and infinities, on
// lengths around whole vectors, and on rising magnitudes, where the scan
// gives up for the radix select.
func TestSelectorHeapScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gens := map[string]func(i int) float32{
		"ties":   func(int) float32 { return float32(rng.IntN(5)-2) * 0.25 },
		"normal": func(int) float32 { return float32(rng.NormFloat64()) },
		"nan": func(int) float32 {
			switch rng.IntN(40) {
			case 0:
				return float32(math.NaN())
			case 1:
				return float32(math.Inf(1 - 2*rng.IntN(2)))
			}
			return float32(rng.NormFloat64())
		},
		"rising":  func(i int) float32 { return float32(i) * float32(1-2*(i&1)) },
		"falling": func(i int) float32 { return -float32(i) * 1e-3 },
	}
	for _, vector := range []bool{true, false} {
		if vector && !dgcVector {
			continue
		}
		was := dgcVector
		dgcVector = vector
		var s selector
		for name, gen := range gens {
			for _, n := range []int{1, 7, 8, 9, 63, 64, 65, 200, 2017} {
				v := make([]float32, n)
				for i := range v {
					v[i] = gen(i)
				}
				idx := make([]int32, n)
				for _, k := range []int{1, 2, 3, 11, 48, smallTopMax, smallTopMax + 1} {
					if k > n {
						continue
					}
					want := referenceTopK(v, k)
					if got := s.topK(v, k, idx); !slices.Equal(got, want) {
						t.Fatalf("vector %v %s n=%d k=%d: %v, want %v", vector, name, n, k, got, want)
					}
					thr, above := s.kth(v, k)
					wthr, wabove := s.radixKth(v, k)
					if thr != wthr || above != wabove {
						t.Fatalf("vector %v %s n=%d k=%d: kth (%#x, %d), radix select (%#x, %d)", vector, name, n, k, thr, above, wthr, wabove)
					}
					least := uint32(math.MaxUint32)
					for _, i := range want {
						least = min(least, magnitudeKey(v[i]))
					}
					if thr != least {
						t.Fatalf("vector %v %s n=%d k=%d: threshold %#x, want the least selected magnitude %#x", vector, name, n, k, thr, least)
					}
				}
			}
		}
		dgcVector = was
	}
	// The rising input gives up: heapTop reports false there.
	var s selector
	v := make([]float32, 4096)
	for i := range v {
		v[i] = float32(i)
	}
	if s.heapTop(v, 8) {
		t.Error("heapTop kept scanning 4096 rising magnitudes")
	}
}

// TestSelectorPrefilter: on tensors large enough for the sampled prefilter,
// topK must still give the sort's answer (ties to the lowest index), whether
// the prefilter serves it or gives way to the whole pass: Gaussian data (the
// prefilter must serve), exact ties, mostly zeros (a zero bound), NaNs and
// infinities, rising magnitudes, and large values only at the sampled
// positions (a sample that overestimates).
func TestSelectorPrefilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gens := []struct {
		name  string
		gen   func(i int) float32
		serve bool // the prefilter must take it
	}{
		{"normal", func(int) float32 { return float32(rng.NormFloat64()) }, true},
		{"ties", func(int) float32 { return float32(rng.IntN(9)-4) * 0.25 }, true},
		{"zeros", func(int) float32 {
			if rng.IntN(200) == 0 {
				return float32(rng.NormFloat64())
			}
			return 0
		}, false},
		{"nan-inf", func(int) float32 {
			switch rng.IntN(3000) {
			case 0:
				return float32(math.NaN())
			case 1:
				return float32(math.Inf(-1))
			}
			return float32(rng.NormFloat64())
		}, true},
		{"rising", func(i int) float32 { return float32(i) }, true},
		{"sampled-positions", func(i int) float32 {
			if i%prefilterStride == prefilterStride/2 {
				return 100 + float32(rng.NormFloat64())
			}
			return float32(rng.NormFloat64())
		}, false},
	}
	var s selector
	for _, g := range gens {
		for _, n := range []int{prefilterMinN, 70001} {
			v := make([]float32, n)
			for i := range v {
				v[i] = g.gen(i)
			}
			idx := make([]int32, n)
			for _, k := range []int{1, 7, 64, 200, n / prefilterShare} {
				want := referenceTopK(v, k)
				if got := s.topK(v, k, idx); !slices.Equal(got, want) {
					t.Fatalf("%s n=%d k=%d: %d indices, want %d (first %v, want %v)", g.name, n, k, len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
				}
				served := s.prefilter(v, k, idx)
				if g.serve && !served {
					t.Errorf("%s n=%d k=%d: the prefilter gave way", g.name, n, k)
				}
				if !g.serve && served && g.name == "zeros" {
					t.Errorf("%s n=%d k=%d: the prefilter served with a zero bound", g.name, n, k)
				}
				if served && !slices.Equal(idx[:k], want) {
					t.Fatalf("%s n=%d k=%d: the prefilter's own answer differs", g.name, n, k)
				}
			}
		}
	}
}
