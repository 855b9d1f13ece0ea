package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The vector loops of DGC give the bits of the Go loops (the path on CPUs
// without AVX2) in every accumulate mode, at lengths around whole vectors and
// with unaligned starts, on values spanning twelve decades with signed zeros.
func TestDGCVectorLoops(t *testing.T) {
	if !dgcVector {
		t.Skip("this CPU runs the Go loops only")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, rng.Float64()*12-6))
			if rng.IntN(20) == 0 {
				v[i] = float32(math.Copysign(0, -1))
			}
		}
		return v
	}
	scalar := func(f func()) {
		dgcVector = false
		defer func() { dgcVector = true }()
		f()
	}
	hypers := []Hyper{
		{Momentum: 0.9}, {Momentum: 0.9, Nesterov: true},
		{Momentum: 0.9, WeightDecay: 5e-4}, {Momentum: 0.9, WeightDecay: 5e-4, Nesterov: true},
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 64, 100, 1001} {
		for _, skew := range []int{0, 1, 3} {
			g, w := fill(n + skew)[skew:], fill(n + skew)[skew:]
			u0, v0 := fill(n + skew)[skew:], fill(n + skew)[skew:]
			for hi, h := range append(hypers, Hyper{}) {
				for _, scale := range []float32{1, 0.37} {
					name := fmt.Sprintf("n %d skew %d hyper %d scale %v", n, skew, hi, scale)
					uv, vv := slices.Clone(u0), slices.Clone(v0)
					us, vs := slices.Clone(u0), slices.Clone(v0)
					if hi == len(hypers) { // plain accumulation: no momentum
						uv, us = nil, nil
					}
					for range 3 { // the state carried from step to step
						momentumAccumulate(g, w, uv, vv, scale, h)
						scalar(func() { momentumAccumulate(g, w, us, vs, scale, h) })
					}
					for i := range vv {
						if math.Float32bits(vv[i]) != math.Float32bits(vs[i]) {
							t.Fatalf("%s: v[%d] is %v in the vector loop, %v in Go", name, i, vv[i], vs[i])
						}
						if uv != nil && math.Float32bits(uv[i]) != math.Float32bits(us[i]) {
							t.Fatalf("%s: u[%d] is %v in the vector loop, %v in Go", name, i, uv[i], us[i])
						}
					}
				}
			}
		}
	}
}

// One step of each mode against the equations written out: the vector loop
// computes what the Go loops' comments say.
func TestDGCVectorAccumulateValues(t *testing.T) {
	const n = 24
	g, w, u, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], w[i], u[i], v[i] = float32(i)-7.5, float32(i%5)+0.25, float32(i%3)-1, float32(i)*0.5
	}
	const m, wd, scale = float32(0.75), float32(0.125), float32(0.5)
	for _, c := range []struct {
		h      Hyper
		u0     []float32
		wantU  func(i int) float32
		wantDV func(i int, un float32) float32
	}{
		{Hyper{}, nil, nil, func(i int, _ float32) float32 { return g[i] * scale }},
		{Hyper{Momentum: 0.75}, u, func(i int) float32 { return m*u[i] + g[i]*scale }, func(_ int, un float32) float32 { return un }},
		{Hyper{Momentum: 0.75, Nesterov: true}, u, func(i int) float32 { return (u[i] + g[i]*scale) * m },
			func(i int, un float32) float32 { return un + g[i]*scale }},
		{Hyper{Momentum: 0.75, WeightDecay: 0.125}, u, func(i int) float32 { return m*u[i] + (g[i]*scale + wd*w[i]) },
			func(_ int, un float32) float32 { return un }},
		{Hyper{Momentum: 0.75, WeightDecay: 0.125, Nesterov: true}, u, func(i int) float32 { return (u[i] + (g[i]*scale + wd*w[i])) * m },
			func(i int, un float32) float32 { return un + (g[i]*scale + wd*w[i]) }},
	} {
		uc, vc := slices.Clone(c.u0), slices.Clone(v)
		momentumAccumulate(g, w, uc, vc, scale, c.h)
		for i := range vc {
			var un float32
			if c.wantU != nil {
				if un = c.wantU(i); uc[i] != un {
					t.Fatalf("%+v: u[%d] = %v, want %v", c.h, i, uc[i], un)
				}
			}
			if want := v[i] + c.wantDV(i, un); vc[i] != want {
				t.Fatalf("%+v: v[%d] = %v, want %v", c.h, i, vc[i], want)
			}
		}
	}
}

// The vector scan and the Go scan find the same indices, where the passing
// elements sit in either half of a sixteen-element test, in the tail, or
// nowhere.
func TestAppendAtLeastVectorScan(t *testing.T) {
	if !dgcVector {
		t.Skip("this CPU runs the Go loops only")
	}
	for _, n := range []int{8, 15, 16, 17, 23, 24, 32, 40, 47, 1000} {
		for _, hot := range [][]int{nil, {0}, {7}, {8}, {15}, {n - 1}, {3, 9, 12, 13}, {n / 2, n - 2}} {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(i%7) * 0.01
			}
			passing := 0
			for _, h := range hot {
				if h < n && v[h] != -2 {
					v[h] = -2 // the magnitude counts, not the sign
					passing++
				}
			}
			thr := magnitudeKey(1)
			got := appendAtLeast(nil, v, thr, 3)
			var want []int32
			dgcVector = false
			want = appendAtLeast(nil, v, thr, 3)
			dgcVector = true
			if !slices.Equal(got, want) {
				t.Fatalf("n %d hot %v: %v, want %v", n, hot, got, want)
			}
			if len(got) != passing {
				t.Fatalf("n %d hot %v: %d pass, want %d", n, hot, len(got), passing)
			}
		}
	}
}

// Where many pass, the vector scan refills its output as it goes: it must
// still give the Go scan's indices, after a prefix already in the slice, with
// every element passing (threshold 0), about half, or a few.
func TestAppendAtLeastVectorScanDense(t *testing.T) {
	if !dgcVector {
		t.Skip("this CPU runs the Go loops only")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{16, 24, 200, 4099} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		for _, thr := range []uint32{0, magnitudeKey(0.67), magnitudeKey(2.5)} {
			for _, prefix := range [][]int32{nil, {-1}, make([]int32, 13, 17)} {
				got := appendAtLeast(slices.Clone(prefix), v, thr, 5)
				dgcVector = false
				want := appendAtLeast(slices.Clone(prefix), v, thr, 5)
				dgcVector = true
				if !slices.Equal(got, want) {
					t.Fatalf("n %d thr %#x prefix %d: %d indices, want %d (%v...)", n, thr, len(prefix), len(got), len(want), want[:min(len(want), 20)])
				}
			}
		}
	}
}
