package compress

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector loops give the bits of the Go loops (the path on CPUs without
// AVX), at lengths around whole vectors and with unaligned starts.
func TestPowerSGDVectorLoops(t *testing.T) {
	if !psgdVector {
		t.Skip("this CPU runs the Go loops only")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, rng.Float64()*6-3))
		}
		return v
	}
	scalar := func(f func()) {
		psgdVector = false
		defer func() { psgdVector = true }()
		f()
	}
	same := func(what string, n int, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s, n %d: element %d is %v in the vector loop, %v in Go", what, n, i, a[i], b[i])
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 64, 100, 1001} {
		for _, skew := range []int{0, 1, 3} {
			x, y := fill(n + skew)[skew:], fill(n + skew)[skew:]

			var dv, ds float32
			dv = psgdDot(x, y)
			scalar(func() { ds = psgdDot(x, y) })
			same("dot", n, []float32{dv}, []float32{ds})

			// Two dot products in one pass: each gives psgdDot's bits.
			y1 := fill(n + skew)[skew:]
			a0, a1 := psgdDot2(x, y, y1)
			var s0, s1 float32
			scalar(func() { s0, s1 = psgdDot2(x, y, y1) })
			same("paired dot", n, []float32{a0, a1, s0, s1}, []float32{dv, psgdDot(x, y1), ds, psgdDot(x, y1)})

			for _, r := range []int{1, 2, 3, 5} {
				stride := n + skew + 2
				q := fill(r * stride)
				coef := fill(r)
				coef[0] = 0 // a zero coefficient is not skipped
				m := fill(n)
				ov, os, ev, es := make([]float32, n), make([]float32, n), fill(n), make([]float32, n)
				psgdLowRankSub(ov, ev, m, q, stride, coef)
				scalar(func() { psgdLowRankSub(os, es, m, q, stride, coef) })
				same("low-rank row", n, ov, os)
				same("residual", n, ev, es)
				for j := range ov { // against the sum in float64: one rounding per term
					var want, mag float64
					for k := range coef {
						want += float64(coef[k]) * float64(q[k*stride+j])
						mag += math.Abs(float64(coef[k]) * float64(q[k*stride+j]))
					}
					if math.Abs(float64(ov[j])-want) > 1e-6*mag {
						t.Fatalf("low-rank row, n %d r %d: element %d is %v, want %v", n, r, j, ov[j], want)
					}
					if ev[j] != m[j]-ov[j] {
						t.Fatalf("residual, n %d r %d: element %d is %v, want %v", n, r, j, ev[j], m[j]-ov[j])
					}
				}
				// All-zero coefficients: the sum starts from +0, so negative
				// factors (products -0) still give +0.
				zv, zs := fill(n), fill(n)
				zero := make([]float32, r)
				psgdLowRankSub(zv, nil, nil, q, stride, zero)
				scalar(func() { psgdLowRankSub(zs, nil, nil, q, stride, zero) })
				same("low-rank row, zero coefficients", n, zv, zs)
				for j, v := range zv {
					if math.Float32bits(v) != 0 {
						t.Fatalf("low-rank row, n %d r %d, zero coefficients: element %d is %v, want +0", n, r, j, v)
					}
				}
				negx := make([]float32, n)
				for j := range negx {
					negx[j] = float32(math.Copysign(0, -1))
				}
				cz, czs := append([]float32(nil), negx...), append([]float32(nil), negx...)
				psgdCompensate(cz, negx, q, stride, zero) // -0 + (-0 - (+0)) = -0
				scalar(func() { psgdCompensate(czs, negx, q, stride, zero) })
				same("compensate, zero coefficients", n, cz, czs)

				nv := make([]float32, n)
				psgdLowRankSub(nv, nil, nil, q, stride, coef)
				same("low-rank row without residual", n, nv, ov)

				cv, cs := append([]float32(nil), m...), append([]float32(nil), m...)
				psgdCompensate(cv, x, q, stride, coef)
				scalar(func() { psgdCompensate(cs, x, q, stride, coef) })
				same("compensate", n, cv, cs)
				for j := range cv { // the residual of the row above, plus the gradient
					if want := x[j] + ev[j]; cv[j] != want {
						t.Fatalf("compensate, n %d r %d: element %d is %v, want %v", n, r, j, cv[j], want)
					}
				}

				// Compensating and multiplying by the new Q in one pass (ranks 1
				// and 2) gives psgdCompensate's row and psgdDot's products,
				// with the vector loop and in Go; with zero coefficients and
				// -0 rows too.
				if r <= 2 {
					newQ := fill(r * stride)
					for _, tc := range []struct {
						name       string
						m, g, coef []float32
					}{{"compensate and dot", m, x, coef}, {"compensate and dot, zero coefficients", negx, negx, zero}} {
						var dv, ds [2]float32
						rv, rs := append([]float32(nil), tc.m...), append([]float32(nil), tc.m...)
						psgdCompensateDot(rv, tc.g, q, newQ, stride, tc.coef, &dv)
						scalar(func() { psgdCompensateDot(rs, tc.g, q, newQ, stride, tc.coef, &ds) })
						want := append([]float32(nil), tc.m...)
						scalar(func() { psgdCompensate(want, tc.g, q, stride, tc.coef) })
						same(tc.name+": row", n, rv, want)
						same(tc.name+": row in Go", n, rs, want)
						var wantDots [2]float32
						for k := range r {
							wantDots[k] = psgdDot(want, newQ[k*stride:k*stride+n])
						}
						same(tc.name+": products", n, dv[:], wantDots[:])
						same(tc.name+": products in Go", n, ds[:], wantDots[:])
					}
				}

				qv, qs := append([]float32(nil), q...), append([]float32(nil), q...)
				psgdOuterAdd(qv, stride, coef, x)
				scalar(func() { psgdOuterAdd(qs, stride, coef, x) })
				same("outer add", n, qv, qs)
				for k := range coef {
					for j := 0; j < stride; j++ {
						want := q[k*stride+j]
						if j < n {
							want += coef[k] * x[j]
						}
						if qv[k*stride+j] != want {
							t.Fatalf("outer add, n %d r %d: q[%d][%d] is %v, want %v", n, r, k, j, qv[k*stride+j], want)
						}
					}
				}
			}

		}
	}
}

// The dot product against float64 arithmetic: the order of the sum is fixed,
// its value is the dot product's to float32 rounding.
func TestPowerSGDDotValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 8, 13, 1000} {
		x, y := make([]float32, n), make([]float32, n)
		var want, mag float64
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			want += float64(x[i]) * float64(y[i])
			mag += math.Abs(float64(x[i]) * float64(y[i]))
		}
		if got := float64(psgdDot(x, y)); math.Abs(got-want) > 1e-6*mag {
			t.Fatalf("n %d: dot %v, want %v", n, got, want)
		}
	}
}
