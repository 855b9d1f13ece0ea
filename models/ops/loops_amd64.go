package ops

import "github.com/gradwire/gradwire/models/ops/internal/kernels"

// loopsAVX512 is whether the element-wise loops of BatchNorm and ReLU on
// float32 run the AVX-512 versions of models/ops/internal/kernels: the Go compiler does not
// vectorise them, and at one value per step the BatchNorm ones alone took a
// quarter of a ResNet-20 step.
var loopsAVX512 = kernels.HasAVX512

// loopsAVX2 is whether the AVX2 versions of some of those loops run instead,
// on CPUs without AVX-512: the BatchNorm, ReLU and stride-2 gather loops.
var loopsAVX2 = kernels.HasAVX2 && !kernels.HasAVX512

// cpuAVX512 and cpuAVX2 are what this CPU can run, for tests that try each
// set of loops.
var cpuAVX512, cpuAVX2 = kernels.HasAVX512, kernels.HasAVX2

// bnShiftedSumsAVX512 is kernels.BnShiftedSumsAVX512.
func bnShiftedSumsAVX512(p *float32, n int, k float32) (s1, s2 float32) {
	return kernels.BnShiftedSumsAVX512(p, n, k)
}

// bnGradDotsAVX512 is kernels.BnGradDotsAVX512.
func bnGradDotsAVX512(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32) {
	return kernels.BnGradDotsAVX512(x, y, dy, n, mean, relu)
}

// bnGradPlaneAVX512 is kernels.BnGradPlaneAVX512.
func bnGradPlaneAVX512(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool) {
	kernels.BnGradPlaneAVX512(dx, x, y, dy, n, mean, scale, m1, m2, relu)
}

// bnAffineAVX512 is kernels.BnAffineAVX512.
func bnAffineAVX512(y, x *float32, n int, a, b float32, relu bool) {
	kernels.BnAffineAVX512(y, x, n, a, b, relu)
}

// reluAddAVX512 is kernels.ReluAddAVX512.
func reluAddAVX512(y, a, b *float32, n int) { kernels.ReluAddAVX512(y, a, b, n) }

// reluGradAVX512 is kernels.ReluGradAVX512.
func reluGradAVX512(d, dy, y *float32, n int) { kernels.ReluGradAVX512(d, dy, y, n) }

// copyRowsAVX512 is kernels.CopyRowsAVX512.
func copyRowsAVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int) {
	kernels.CopyRowsAVX512(dst, ldd, src, lds, rows, cols)
}

// gatherStride2AVX512 is kernels.GatherStride2AVX512.
func gatherStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int) {
	kernels.GatherStride2AVX512(dst, ldd, src, lds, rows, cols)
}

// scatterAddStride2AVX512 is kernels.ScatterAddStride2AVX512.
func scatterAddStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int) {
	kernels.ScatterAddStride2AVX512(dst, ldd, src, lds, rows, cols)
}

// addAVX512 adds src to dst over n values (kernels.Add3AVX512 with y = a).
func addAVX512(dst, src *float32, n int) { kernels.Add3AVX512(dst, dst, src, n) }

// add3AVX512 is kernels.Add3AVX512.
func add3AVX512(y, a, b *float32, n int) { kernels.Add3AVX512(y, a, b, n) }

// maxPool2RowAVX512 is kernels.MaxPool2RowAVX512.
func maxPool2RowAVX512(x0, x1, y *float32, arg *int32, n int, base, w int32) {
	kernels.MaxPool2RowAVX512(x0, x1, y, arg, n, base, w)
}

// sumAVX512 is kernels.SumAVX512.
func sumAVX512(p *float32, n int) float32 { return kernels.SumAVX512(p, n) }

// unpool2RowAVX512 is kernels.Unpool2RowAVX512.
func unpool2RowAVX512(d0, d1, dy *float32, arg *int32, n int, base, w int32) {
	kernels.Unpool2RowAVX512(d0, d1, dy, arg, n, base, w)
}

func bnShiftedSumsAVX2(p *float32, n int, k float32) (s1, s2 float32) {
	return kernels.BnShiftedSumsAVX2(p, n, k)
}

func bnGradDotsAVX2(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32) {
	return kernels.BnGradDotsAVX2(x, y, dy, n, mean, relu)
}

func bnGradPlaneAVX2(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool) {
	kernels.BnGradPlaneAVX2(dx, x, y, dy, n, mean, scale, m1, m2, relu)
}

func bnAffineAVX2(y, x *float32, n int, a, b float32, relu bool) {
	kernels.BnAffineAVX2(y, x, n, a, b, relu)
}

func reluAddAVX2(y, a, b *float32, n int) { kernels.ReluAddAVX2(y, a, b, n) }

func reluGradAVX2(d, dy, y *float32, n int) { kernels.ReluGradAVX2(d, dy, y, n) }

func gatherStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, cols int) {
	kernels.GatherStride2AVX2(dst, ldd, src, lds, rows, cols)
}
