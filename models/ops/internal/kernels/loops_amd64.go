package kernels

// Element-wise loops of models/ops in AVX-512 (loops_amd64.s): the BatchNorm,
// ReLU, row-copy, stride-2 gather and scatter, add, max-pool and sum loops
// the Go compiler does not vectorise. The callers check HasAVX512.

// BnShiftedSumsAVX512 returns Σ(p-k) and Σ(p-k)² over p[:n].
//
//go:noescape
func BnShiftedSumsAVX512(p *float32, n int, k float32) (s1, s2 float32)

// BnGradDotsAVX512 returns Σ g and Σ g·(x - mean) over n values, g = dy
// (where the ReLU output y is positive, with relu).
//
//go:noescape
func BnGradDotsAVX512(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32)

// BnGradPlaneAVX512 writes dx = scale·(g - m1 - (x - mean)·m2), g as above.
//
//go:noescape
func BnGradPlaneAVX512(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool)

// BnAffineAVX512 writes y = x·a + b, with a ReLU if relu.
//
//go:noescape
func BnAffineAVX512(y, x *float32, n int, a, b float32, relu bool)

// ReluAddAVX512 writes y = max(a + b, 0) over n values.
//
//go:noescape
func ReluAddAVX512(y, a, b *float32, n int)

// ReluGradAVX512 writes d = dy where the ReLU output y is positive, else 0.
//
//go:noescape
func ReluGradAVX512(d, dy, y *float32, n int)

// CopyRowsAVX512 copies rows rows of cols values from src (row stride lds)
// to dst (row stride ldd).
//
//go:noescape
func CopyRowsAVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)

// GatherStride2AVX512 writes dst[r·ldd + i] = src[r·lds + 2i] for r < rows,
// i < cols.
//
//go:noescape
func GatherStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)

// ScatterAddStride2AVX512 adds src[r·lds + i] to dst[r·ldd + 2i] for
// r < rows, i < cols.
//
//go:noescape
func ScatterAddStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)

// Add3AVX512 writes y = a + b over n values (y may be a or b).
//
//go:noescape
func Add3AVX512(y, a, b *float32, n int)

// MaxPool2RowAVX512 computes one output row of a 2×2 stride-2 max-pool
// (n outputs from input rows x0 and x1) with the argmax offsets base + 2j +
// (0, 1, w or w+1) of the first of each window's values, in row-major
// order, equal to its maximum.
//
//go:noescape
func MaxPool2RowAVX512(x0, x1, y *float32, arg *int32, n int, base, w int32)

// SumAVX512 returns Σ p[:n].
//
//go:noescape
func SumAVX512(p *float32, n int) float32

// Unpool2RowAVX512 writes one output row's gradient of a 2×2 stride-2
// max-pool into input rows d0 and d1 (see maxPool2RowAVX512 for arg).
//
//go:noescape
func Unpool2RowAVX512(d0, d1, dy *float32, arg *int32, n int, base, w int32)

// The AVX2 versions of the loops above (loops_avx2_amd64.s), for CPUs
// without AVX-512: 8 values a step, the callers check HasAVX2.

// BnShiftedSumsAVX2 is BnShiftedSumsAVX512 in AVX2.
//
//go:noescape
func BnShiftedSumsAVX2(p *float32, n int, k float32) (s1, s2 float32)

// BnGradDotsAVX2 is BnGradDotsAVX512 in AVX2.
//
//go:noescape
func BnGradDotsAVX2(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32)

// BnGradPlaneAVX2 is BnGradPlaneAVX512 in AVX2.
//
//go:noescape
func BnGradPlaneAVX2(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool)

// BnAffineAVX2 is BnAffineAVX512 in AVX2.
//
//go:noescape
func BnAffineAVX2(y, x *float32, n int, a, b float32, relu bool)

// ReluAddAVX2 is ReluAddAVX512 in AVX2.
//
//go:noescape
func ReluAddAVX2(y, a, b *float32, n int)

// ReluGradAVX2 is ReluGradAVX512 in AVX2.
//
//go:noescape
func ReluGradAVX2(d, dy, y *float32, n int)

// GatherStride2AVX2 is GatherStride2AVX512 in AVX2.
//
//go:noescape
func GatherStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, cols int)
