package compress

import "golang.org/x/sys/cpu"

// f16Vector: the CPU converts to and from half precision eight values at a
// time (F16C, with AVX2 for the constants).
var f16Vector = cpu.X86.HasAVX2 && cpuid1ECX()&(1<<29) != 0

//go:noescape
func cpuid1ECX() uint32

// roundF16AVX is RoundF16 on v[0:n], n a multiple of 8, with the same bits.
//
//go:noescape
func roundF16AVX(v *float32, n int)

// roundF16Vec rounds the longest prefix of whole vectors and returns its
// length; the caller rounds the rest.
func roundF16Vec(v []float32) int {
	n := len(v) &^ 7
	if !f16Vector || n == 0 {
		return 0
	}
	roundF16AVX(&v[0], n)
	return n
}
