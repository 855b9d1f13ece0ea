//go:build !amd64

package compress

var dgcVector = false

func dgcAccumulateVec(g, w, u, v []float32, scale, m, wd float32, mode int) int { return 0 }

func appendAtLeastVec(pass []int32, v []float32, thr uint32, base int) ([]int32, int) {
	return pass, 0
}

func nextAboveVec(v []float32, thr uint32) (off int, mask uint32, scanned int) { return 0, 0, 0 }
