package compress

import (
	"slices"

	"golang.org/x/sys/cpu"
)

// dgcVector: the CPU runs dgc_amd64.s's loops (AVX2). The accumulate loop
// does each element's arithmetic as momentumAccumulate's Go loops do it
// (multiply, then add, no fused multiply-adds), so either path gives the same
// bits; the scan compares the same magnitude bits as appendAtLeast's Go loop.
var dgcVector = cpu.X86.HasAVX2

// dgcAccumulateAVX2 runs momentumAccumulate's loop of the mode on n
// elements, n a multiple of 8; w and u are read only where the mode uses
// them.
//
//go:noescape
func dgcAccumulateAVX2(grad, w, u, v *float32, n int, scale, m, wd float32, mode int)

// dgcNextAtLeastAVX2 scans v[0:n] (n a multiple of 8) eight elements at a
// time for one whose magnitude bits exceed thrBelow (a threshold minus one, as
// int32: -1 passes everything). It returns the offset of the first such block
// of eight and the mask of its passing elements (bit j: element j), or n and
// 0 when none passes.
//
//go:noescape
func dgcNextAtLeastAVX2(v *float32, n int, thrBelow uint32) (block int, mask uint32)

// dgcAccumulateVec runs the vector loop on the longest prefix of whole
// vectors and returns its length; the caller finishes the tail.
func dgcAccumulateVec(g, w, u, v []float32, scale, m, wd float32, mode int) int {
	n := len(v) &^ 7
	if !dgcVector || n == 0 {
		return 0
	}
	_ = g[n-1]
	var wp, up *float32
	if mode != dgcAccPlain {
		_ = u[n-1]
		up = &u[0]
	}
	if mode == dgcAccMomentumWD || mode == dgcAccNesterovWD {
		_ = w[n-1]
		wp = &w[0]
	}
	dgcAccumulateAVX2(&g[0], wp, up, &v[0], n, scale, m, wd, mode)
	return n
}

// dgcAppendAboveAVX2 writes to out (room slots) the indices base+i of the
// elements of v[0:n] (n a multiple of 8) whose magnitude bits exceed
// thrBelow, in increasing order; it stops early when fewer than sixteen slots
// are left and returns the count written and the elements scanned.
//
//go:noescape
func dgcAppendAboveAVX2(v *float32, n int, thrBelow uint32, base int, out *int32, room int) (written, scanned int)

// appendAtLeastVec is appendAtLeast on the longest prefix of whole vectors:
// it appends the passing indices there and returns the prefix's length.
func appendAtLeastVec(pass []int32, v []float32, thr uint32, base int) ([]int32, int) {
	n := len(v) &^ 7
	if !dgcVector || n == 0 {
		return pass, 0
	}
	for i := 0; i < n; {
		if cap(pass)-len(pass) < 16 {
			pass = slices.Grow(pass, max(64, len(pass)))
		}
		spare := pass[len(pass):cap(pass)]
		w, scanned := dgcAppendAboveAVX2(&v[i], n-i, thr-1, base+i, &spare[0], len(spare))
		pass = pass[:len(pass)+w]
		i += scanned
	}
	return pass, n
}

// nextAboveVec is nextAbove on the longest prefix of whole vectors: the
// offset and mask of the first block with a magnitude above thr there, or
// mask 0 and the prefix's length, where the scan goes on.
func nextAboveVec(v []float32, thr uint32) (off int, mask uint32, scanned int) {
	n := len(v) &^ 7
	if !dgcVector || n == 0 {
		return 0, 0, 0
	}
	off, mask = dgcNextAtLeastAVX2(&v[0], n, thr) // exceeding thr, that is
	return off, mask, n
}
