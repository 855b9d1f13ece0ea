package optim

import "golang.org/x/sys/cpu"

// sgdVector: the CPU runs sgd_amd64.s's kernels (AVX).
var sgdVector = cpu.X86.HasAVX

// sgdPlainAVX is sgdPlain on n elements, n a multiple of 4.
//
//go:noescape
func sgdPlainAVX(w, grad *float32, n int, lr, wd float64)

// sgdMomentumAVX is sgdMomentum on n elements, n a multiple of 4.
//
//go:noescape
func sgdMomentumAVX(w, grad, b *float32, n int, lr, wd, m float64, nesterov bool)

// sgdPlainVec runs sgdPlain's vector kernel on the longest prefix of whole
// vectors and returns its length.
func sgdPlainVec(w, g []float32, lr, wd float64) int {
	n := len(w) &^ 3
	if !sgdVector || n == 0 {
		return 0
	}
	_ = g[n-1]
	sgdPlainAVX(&w[0], &g[0], n, lr, wd)
	return n
}

// sgdMomentumVec is sgdPlainVec for sgdMomentum.
func sgdMomentumVec(w, g, b []float32, lr, wd, m float64, nesterov bool) int {
	n := len(w) &^ 3
	if !sgdVector || n == 0 {
		return 0
	}
	_, _ = g[n-1], b[n-1]
	sgdMomentumAVX(&w[0], &g[0], &b[0], n, lr, wd, m, nesterov)
	return n
}
