package vec

import "golang.org/x/sys/cpu"

// vector: the CPU runs vec_amd64.s's loops (AVX), which add and scale each
// element in the Go loops' order: either path gives the same bits.
var vector = cpu.X86.HasAVX

// addsAVX adds srcs[0], ..., srcs[k-1] into dst in that order, 1 <= k <= 4,
// n a multiple of 8.
//
//go:noescape
func addsAVX(dst *float32, srcs *[4]*float32, k, n int)

//go:noescape
func scaleAVX(dst *float32, n int, s float32)

//go:noescape
func addScaleAVX(out, x, a *float32, n int, s float32)

// The *Vec functions run their loop over the longest prefix of whole
// vectors and return its length; the caller finishes the tail. The slices
// are at least len(dst) long.

// addsVec adds srcs (1 to 4, each at least len(dst) long) into dst in order.
func addsVec(dst []float32, srcs ...[]float32) int {
	n := len(dst) &^ 7
	if !vector || n == 0 {
		return 0
	}
	var ptrs [4]*float32
	for i, s := range srcs {
		_ = s[n-1]
		ptrs[i] = &s[0]
	}
	addsAVX(&dst[0], &ptrs, len(srcs), n)
	return n
}

func scaleVec(dst []float32, s float32) int {
	n := len(dst) &^ 7
	if !vector || n == 0 {
		return 0
	}
	scaleAVX(&dst[0], n, s)
	return n
}

func addScaleVec(out, x, a []float32, s float32) int {
	n := len(out) &^ 7
	if !vector || n == 0 {
		return 0
	}
	_, _ = x[n-1], a[n-1]
	addScaleAVX(&out[0], &x[0], &a[0], n, s)
	return n
}
