package ops

import "github.com/gradwire/gradwire/models/ops/internal/kernels"

// archSgemmKernels lists the assembly kernels (models/ops/internal/kernels)
// this process may run.
func archSgemmKernels() []*sgemmKernel {
	var ks []*sgemmKernel
	if kernels.HasAVX2 {
		ks = append(ks, &sgemmKernel{name: "avx2", mr: 6, nr: 16, fn: kernels.SgemmAVX2, dot: kernels.SgemmDotAVX2, tapsStrip: kernels.SgemmTapsAVX2})
	}
	if kernels.HasAVX512 {
		ks = append(ks, &sgemmKernel{name: "avx512", mr: 8, nr: 32, maskedB: true, fn: kernels.SgemmAVX512, dot: kernels.SgemmDotAVX512,
			taps: kernels.SgemmTapsAVX512})
	}
	return ks
}

// sgemmPackT is kernels.PackT: see there.
func sgemmPackT(dst *float32, ldd int, src *float32, lds, rows, cols int) {
	kernels.PackT(dst, ldd, src, lds, rows, cols)
}
