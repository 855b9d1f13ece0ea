//go:build openblas

package ops

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
*/
import "C"

import (
	"os"

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
