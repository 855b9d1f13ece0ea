//go:build openblas

package ops

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
*/
import "C"

import (
	"os"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"
)

func init() {
	sgemmImpl, dgemmImpl = netlib.Implementation{}, netlib.Implementation{}
	nativeGEMM = false
	// gradwire parallelises over samples (the ops' workers) and replicas, so
	// the GEMMs run one thread each; OpenBLAS's extra threads would busy-wait
	// against those workers. OPENBLAS_NUM_THREADS, when set, still wins.
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" {
		C.openblas_set_num_threads(1)
	}
}

// OpenBLAS is OpenBLAS for Gorgonia's own matrix products (gorgonia.Use) in
// the openblas build, with Sgemm on the assembly GEMM when the CPU has a
// kernel for it: on the models' shapes it is faster than OpenBLAS 0.3.21's
// SkylakeX kernels (README, Speed).
type OpenBLAS struct{ netlib.Implementation }

// Sgemm computes c = alpha·op(a)·op(b) + beta·c (row-major).
func (impl OpenBLAS) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmSplit(impl.Implementation, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
