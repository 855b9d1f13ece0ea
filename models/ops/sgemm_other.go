//go:build !amd64

package ops

import "unsafe"

// archSgemmKernels: there are assembly GEMM kernels for amd64 only;
// elsewhere gemm multiplies float32 matrices with gonum, or OpenBLAS in the
// openblas build.
func archSgemmKernels() []*sgemmKernel { return nil }

// sgemmPackT is the portable transpose of sgemm_amd64.s's, for the driver to
// build everywhere (it only runs with a kernel).
func sgemmPackT(dst *float32, ldd int, src *float32, lds, rows, cols int) {
	d := unsafe.Slice(dst, (cols-1)*ldd+rows)
	s := unsafe.Slice(src, (rows-1)*lds+cols)
	for r := range rows {
		for c := range cols {
			d[c*ldd+r] = s[r*lds+c]
		}
	}
}
