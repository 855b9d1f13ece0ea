package ops

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The fast ops multiply matrices through gonum's BLAS interfaces: gonum's pure-Go
// implementation by default, OpenBLAS with the openblas build tag (useBLAS
// switches them together with Gorgonia's). They are package variables rather
// than blas32.Use and blas64.Use so that other packages' small level-1 calls
// stay on gonum's assembly instead of paying a cgo call each.
var (
	sgemmImpl blas.Float32 = gonum.Implementation{}
	dgemmImpl blas.Float64 = gonum.Implementation{}
)

func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemm computes the row-major c = op(a)·op(b) + beta·c, op(a) m×k and op(b) k×n,
// where op transposes when tA (tB) is set, on the calling goroutine: the fast
// ops already run one GEMM per worker. Float32 products go to the assembly
// GEMM (sgemm.go) when the CPU has a kernel for it, in every build.
//
// gonum's pure-Go GEMM spreads a product of four or more 64×64 blocks of c over
// new goroutines, allocating on every call, so gemm hands it tiles small
// enough to run serially.
func gemm[T elem](tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if aa, ok := any(a).([]float32); ok {
		if kern := sgemmAsm; kern != nil {
			sgemm(kern, tA, tB, m, n, k, 1, aa, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
			return
		}
	}
	if !pureGoBLAS() || blocks(m)*blocks(n) < gemmSerialBlocks {
		gemmCall(tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
		return
	}
	for i := 0; i < m; i += gemmTileM {
		ai := i * lda
		if tA {
			ai = i
		}
		for j := 0; j < n; j += gemmTileN {
			bj := j
			if tB {
				bj = j * ldb
			}
			gemmCall(tA, tB, min(gemmTileM, m-i), min(gemmTileN, n-j), k, a[ai:], lda, b[bj:], ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}

// gonum multiplies serially when c has fewer than gemmSerialBlocks blocks of
// 64×64; a tile of gemmTileM×gemmTileN has three.
const (
	gemmSerialBlocks = 4
	gemmTileM        = 64
	gemmTileN        = 192
)

func blocks(n int) int { return (n + 63) / 64 }

// externalFloat32 reports whether float32 products go to a BLAS linked in by
// a build tag (OpenBLAS, through cgo): in the openblas build on a CPU without
// an assembly kernel.
func externalFloat32() bool { return sgemmAsm == nil && !pureGoBLAS() }

// nativeGEMM is true while gemm runs float32 products on gonum's pure-Go
// implementation: on a CPU without an assembly kernel (sgemmAsm nil) and
// without OpenBLAS.
var nativeGEMM = sgemmAsm == nil

// NativeGEMM reports whether the ops multiply float32 matrices with gonum's
// pure-Go GEMM (true), or with the assembly GEMM or OpenBLAS (the openblas
// build tag). gonum's GEMM needs more scratch memory: the ops transpose some
// operands for it.
func NativeGEMM() bool { return nativeGEMM }

func gemmCall[T elem](tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	switch aa := any(a).(type) {
	case []float32:
		sgemmImpl.Sgemm(transpose(tA), transpose(tB), m, n, k, 1, aa, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		dgemmImpl.Dgemm(transpose(tA), transpose(tB), m, n, k, 1, aa, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}

// addTo adds src to dst element-wise with an assembly loop: the Go compiler
// does not vectorise the plain one. On float32 with AVX-512, 16 values a step
// (loops_amd64.s: col2im adds 64-value rows, where gonum's 4-wide axpy and its
// checks took twice as long); otherwise gonum's axpy. Both round each sum
// once, the same. Never a cgo call: the rows are too short to pay for one.
func addTo[T elem](dst, src []T) {
	if len(dst) == 0 {
		return
	}
	switch d := any(dst).(type) {
	case []float32:
		if s := any(src).([]float32)[:len(d)]; loopsAVX512 {
			addAVX512(&d[0], &s[0], len(d))
			return
		}
		gonum.Implementation{}.Saxpy(len(d), 1, any(src).([]float32), 1, d, 1)
	case []float64:
		gonum.Implementation{}.Daxpy(len(d), 1, any(src).([]float64), 1, d, 1)
	}
}
