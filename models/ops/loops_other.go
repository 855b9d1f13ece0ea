//go:build !amd64

package ops

// There are no assembly element-wise loops outside amd64: the Go loops run.
var loopsAVX512, loopsAVX2 = false, false

var cpuAVX512, cpuAVX2 = false, false

func bnShiftedSumsAVX512(*float32, int, float32) (float32, float32) { panic("no AVX-512 loops") }

func bnGradDotsAVX512(_, _, _ *float32, _ int, _ float32, _ bool) (float32, float32) {
	panic("no AVX-512 loops")
}

func bnGradPlaneAVX512(_, _, _, _ *float32, _ int, _, _, _, _ float32, _ bool) {
	panic("no AVX-512 loops")
}

func bnAffineAVX512(_, _ *float32, _ int, _, _ float32, _ bool) { panic("no AVX-512 loops") }

func reluAddAVX512(_, _, _ *float32, _ int) { panic("no AVX-512 loops") }

func reluGradAVX512(_, _, _ *float32, _ int) { panic("no AVX-512 loops") }

func copyRowsAVX512(_ *float32, _ int, _ *float32, _ int, _, _ int) { panic("no AVX-512 loops") }

func gatherStride2AVX512(_ *float32, _ int, _ *float32, _ int, _, _ int) { panic("no AVX-512 loops") }

func scatterAddStride2AVX512(_ *float32, _ int, _ *float32, _ int, _, _ int) {
	panic("no AVX-512 loops")
}

func addAVX512(_, _ *float32, _ int) { panic("no AVX-512 loops") }

func add3AVX512(_, _, _ *float32, _ int) { panic("no AVX-512 loops") }

func maxPool2RowAVX512(_, _, _ *float32, _ *int32, _ int, _, _ int32) { panic("no AVX-512 loops") }

func sumAVX512(_ *float32, _ int) float32 { panic("no AVX-512 loops") }

func unpool2RowAVX512(_, _, _ *float32, _ *int32, _ int, _, _ int32) { panic("no AVX-512 loops") }

func bnShiftedSumsAVX2(*float32, int, float32) (float32, float32) { panic("no AVX2 loops") }

func bnGradDotsAVX2(_, _, _ *float32, _ int, _ float32, _ bool) (float32, float32) {
	panic("no AVX2 loops")
}

func bnGradPlaneAVX2(_, _, _, _ *float32, _ int, _, _, _, _ float32, _ bool) { panic("no AVX2 loops") }

func bnAffineAVX2(_, _ *float32, _ int, _, _ float32, _ bool) { panic("no AVX2 loops") }

func reluAddAVX2(_, _, _ *float32, _ int) { panic("no AVX2 loops") }

func reluGradAVX2(_, _, _ *float32, _ int) { panic("no AVX2 loops") }

func gatherStride2AVX2(_ *float32, _ int, _ *float32, _ int, _, _ int) { panic("no AVX2 loops") }
