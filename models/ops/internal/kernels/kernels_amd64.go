package kernels

import "golang.org/x/sys/cpu"

// The outer-product micro-kernels compute
// c[i, j] = alpha·Σ_l A(i, l)·B(l, j) + beta·c[i, j] for i < mr, j < nr on
// one tile, A(i, l) at a[i·ars + l·aks] and B(l, j) at b[l·bks + j]; beta 0
// never reads c. They do not check bounds.

// HasAVX512 and HasAVX2 report whether this process may run SgemmAVX512 and
// SgemmDotAVX512, or SgemmAVX2: x/sys/cpu reports AVX2 and AVX-512 only when
// the OS also saves their registers (XCR0). PackT needs AVX, which both imply.
var (
	HasAVX512 = cpu.X86.HasAVX512F
	HasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// SgemmAVX512 runs 8×32 tiles. B's rows load masked to nr columns, so a
// partial panel needs no padding.
//
//go:noescape
func SgemmAVX512(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)

// SgemmAVX2 runs 6×16 tiles (AVX2 and FMA). It reads 16 columns of B per
// row whatever nr is.
//
//go:noescape
func SgemmAVX2(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)

// PackT writes the transpose of the rows×cols block of src (row stride lds)
// to dst (row stride ldd): dst[c·ldd + r] = src[r·lds + c]. rows and cols are
// multiples of 8. AVX.
//
//go:noescape
func PackT(dst *float32, ldd int, src *float32, lds, rows, cols int)

// SgemmDotAVX512 computes an 8×2 tile of c = alpha·a·bᵀ + beta·c, a's rows
// i (stride lda) and b's rows j (stride ldb) both along k, for i < mr, j <
// nr, without copying either: each of the 16 values is a dot product summed
// 16 lanes wide.
//
//go:noescape
func SgemmDotAVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)

// SgemmDotAVX2 is SgemmDotAVX512's 8×2 tile in AVX2 and FMA: each value a
// dot product summed 8 lanes wide, the last k mod 8 values loaded under a
// mask.
//
//go:noescape
func SgemmDotAVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)

// SgemmTapsAVX512 computes 8 rows of C by two segments of up to 16 columns
// (n1 at c, n2 at c + c2) of the sum over taps t of A_t·B_t: A_t's k columns
// follow A_{t-1}'s in each row of a (row stride ars), B_t is k rows (stride
// bks) at b + offs[t], its columns for the second segment b2 further. See
// models/ops.shiftGEMM.
//
//go:noescape
func SgemmTapsAVX512(k, taps int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int)

// SgemmTapsAVX2 computes mr (at most 6) rows of C by one segment of n (at
// most 16) columns at c (row stride ldc) of the sum over taps t of A_t·B_t,
// laid out as for SgemmTapsAVX512. It reads 16 columns of each B row
// whatever n is: the 16-n values past the segment must be readable.
//
//go:noescape
func SgemmTapsAVX2(k, taps int, a *float32, ars int, b *float32, offs *int, bks int, c *float32, ldc, mr, n int)
