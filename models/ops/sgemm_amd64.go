//go:build !openblas

package ops

import "golang.org/x/sys/cpu"

// The assembly micro-kernels of sgemm_amd64.s. Both compute
// c[i, j] = alpha·Σ_l A(i, l)·B(l, j) + beta·c[i, j] for i < mr, j < nr on
// one tile, A(i, l) at a[i·ars + l·aks] and B(l, j) at b[l·bks + j]; beta 0
// never reads c.

// sgemmAVX512 runs 8×32 tiles. B's rows load masked to nr columns, so a
// partial panel needs no padding.
//
//go:noescape
func sgemmAVX512(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)

// sgemmAVX2 runs 6×16 tiles (AVX2 and FMA). It reads 16 columns of B per
// row whatever nr is.
//
//go:noescape
func sgemmAVX2(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)

// archSgemmKernels lists the kernels this process may run: x/sys/cpu reports
// AVX2 and AVX-512 only when the OS also saves their registers (XCR0).
func archSgemmKernels() []*sgemmKernel {
	var ks []*sgemmKernel
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, &sgemmKernel{name: "avx2", mr: 6, nr: 16, fn: sgemmAVX2})
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, &sgemmKernel{name: "avx512", mr: 8, nr: 32, maskedB: true, fn: sgemmAVX512, dot: sgemmDotAVX512, taps: sgemmTapsAVX512})
	}
	return ks
}

// sgemmTapsAVX512 computes 8 rows of C by two segments of up to 16 columns
// (n1 at c, n2 at c + c2) of the sum over taps t of A_t·B_t: A_t's k columns
// follow A_{t-1}'s in each row of a (row stride ars), B_t is k rows (stride
// bks) at b + offs[t], its columns for the second segment b2 further. See
// shiftGEMM.
//
//go:noescape
func sgemmTapsAVX512(k, taps int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int)

// sgemmPackT writes the transpose of the rows×cols block of src (row stride
// lds) to dst (row stride ldd): dst[c·ldd + r] = src[r·lds + c]. rows and
// cols are multiples of 8. AVX.
//
//go:noescape
func sgemmPackT(dst *float32, ldd int, src *float32, lds, rows, cols int)

// sgemmDotAVX512 computes an 8×2 tile of c = alpha·a·bᵀ + beta·c, a's
// rows i (stride lda) and b's rows j (stride ldb) both along k, for i < mr,
// j < nr, without copying either: each of the 16 values is a dot product
// summed 16 lanes wide.
//
//go:noescape
func sgemmDotAVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)
