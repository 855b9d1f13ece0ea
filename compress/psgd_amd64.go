package compress

import "golang.org/x/sys/cpu"

// psgdVector: the CPU runs psgd_amd64.s's loops (AVX). The loops do each
// element's arithmetic as the Go loops in powersgd.go do, multiply then add
// without fused multiply-adds (Go does not fuse them on amd64), so either
// path gives the same bits.
var psgdVector = cpu.X86.HasAVX

// psgdDotLanesAVX adds x[i]*y[i] into lanes[i mod 8] for i < n, n a multiple
// of 8.
//
//go:noescape
func psgdDotLanesAVX(x, y *float32, n int, lanes *[8]float32)

// psgdDot2LanesAVX is psgdDotLanesAVX for y0 into lanes0 and y1 into lanes1
// in one pass over x.
//
//go:noescape
func psgdDot2LanesAVX(x, y0, y1 *float32, n int, lanes0, lanes1 *[8]float32)

// psgdCompensateDotAVX is psgdCompensateAVX for r 1 or 2 with, in the same
// pass, the new m times q[k·qstride+j] added into lanes_k (k < r) as
// psgdDotLanesAVX adds.
//
//go:noescape
func psgdCompensateDotAVX(m, grad, lq, q *float32, qstride int, coef *float32, r, n int, lanes0, lanes1 *[8]float32)

// The *Vec functions run their kernel on the longest prefix of whole
// vectors and return its length; the caller finishes the tail.

func psgdDotVec(x, y []float32, lanes *[8]float32) int {
	n := len(x) &^ 7
	if !psgdVector || n == 0 {
		return 0
	}
	_ = y[n-1]
	psgdDotLanesAVX(&x[0], &y[0], n, lanes)
	return n
}

// psgdLowRankSubAVX: out[j] = Σ_k coef[k]·q[k·qstride+j] for k < r (summed
// from zero in k's order) and, with e not nil, e[j] = m[j] - out[j]; j < n,
// n a multiple of 8.
//
//go:noescape
func psgdLowRankSubAVX(out, e, m, q *float32, qstride int, coef *float32, r, n int)

// psgdOuterAddAVX: q[k·qstride+j] += coef[k]·row[j] for k < r, j < n, n a
// multiple of 8.
//
//go:noescape
func psgdOuterAddAVX(q *float32, qstride int, coef *float32, r int, row *float32, n int)

func psgdDot2Vec(x, y0, y1 []float32, lanes0, lanes1 *[8]float32) int {
	n := len(x) &^ 7
	if !psgdVector || n == 0 {
		return 0
	}
	_, _ = y0[n-1], y1[n-1]
	psgdDot2LanesAVX(&x[0], &y0[0], &y1[0], n, lanes0, lanes1)
	return n
}

func psgdCompensateDotVec(m, g, lq, q []float32, qstride int, coef []float32, lanes0, lanes1 *[8]float32) int {
	n := len(m) &^ 7
	if !psgdVector || n == 0 || len(coef) == 0 || len(coef) > 2 {
		return 0
	}
	last := (len(coef)-1)*qstride + n - 1
	_, _, _ = g[n-1], lq[last], q[last]
	psgdCompensateDotAVX(&m[0], &g[0], &lq[0], &q[0], qstride, &coef[0], len(coef), n, lanes0, lanes1)
	return n
}

func psgdLowRankSubVec(out, e, m, q []float32, qstride int, coef []float32) int {
	n := len(out) &^ 7
	if !psgdVector || n == 0 || len(coef) == 0 {
		return 0
	}
	_ = q[(len(coef)-1)*qstride+n-1]
	var ep, mp *float32
	if e != nil {
		_, _ = e[n-1], m[n-1]
		ep, mp = &e[0], &m[0]
	}
	psgdLowRankSubAVX(&out[0], ep, mp, &q[0], qstride, &coef[0], len(coef), n)
	return n
}

func psgdOuterAddVec(q []float32, qstride int, coef, row []float32) int {
	n := len(row) &^ 7
	if !psgdVector || n == 0 || len(coef) == 0 {
		return 0
	}
	_ = q[(len(coef)-1)*qstride+n-1]
	psgdOuterAddAVX(&q[0], qstride, &coef[0], len(coef), &row[0], n)
	return n
}

// psgdCompensateAVX: m[j] = grad[j] + (m[j] - Σ_k coef[k]·q[k·qstride+j]) for
// k < r (the sum from zero in k's order), j < n, n a multiple of 8.
//
//go:noescape
func psgdCompensateAVX(m, grad, q *float32, qstride int, coef *float32, r, n int)

func psgdCompensateVec(m, g, q []float32, qstride int, coef []float32) int {
	n := len(m) &^ 7
	if !psgdVector || n == 0 || len(coef) == 0 {
		return 0
	}
	_, _ = g[n-1], q[(len(coef)-1)*qstride+n-1]
	psgdCompensateAVX(&m[0], &g[0], &q[0], qstride, &coef[0], len(coef), n)
	return n
}
