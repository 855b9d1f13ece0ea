package ops

import (
	"unsafe"

	"github.com/gradwire/gradwire/models/ops/internal/kernels"
)

// archSgemmKernels lists the assembly kernels (models/ops/internal/kernels)
// this process may run.
func archSgemmKernels() []*sgemmKernel {
	var ks []*sgemmKernel
	if kernels.HasAVX2 {
		ks = append(ks, &sgemmKernel{name: "avx2", mr: 6, nr: 16, fn: kernels.SgemmAVX2, taps: tapsAVX2, tapsFlat: true})
	}
	if kernels.HasAVX512 {
		ks = append(ks, &sgemmKernel{name: "avx512", mr: 8, nr: 32, maskedB: true, fn: kernels.SgemmAVX512, dot: kernels.SgemmDotAVX512,
			taps: kernels.SgemmTapsAVX512})
	}
	return ks
}

// tapsAVX2 is the two-segment taps kernel from kernels.SgemmTapsAVX2, one
// call a segment (its 6×16 tile leaves no registers for a second).
func tapsAVX2(k, taps int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int) {
	kernels.SgemmTapsAVX2(k, taps, a, ars, b, offs, bks, c, ldc, mr, n1)
	if n2 > 0 {
		b, c = (*float32)(unsafe.Add(unsafe.Pointer(b), 4*b2)), (*float32)(unsafe.Add(unsafe.Pointer(c), 4*c2))
		kernels.SgemmTapsAVX2(k, taps, a, ars, b, offs, bks, c, ldc, mr, n2)
	}
}

// sgemmPackT is kernels.PackT: see there.
func sgemmPackT(dst *float32, ldd int, src *float32, lds, rows, cols int) {
	kernels.PackT(dst, ldd, src, lds, rows, cols)
}
