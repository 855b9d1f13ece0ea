//go:build !amd64

package compress

var psgdVector = false

func psgdDotVec(x, y []float32, lanes *[8]float32) int                { return 0 }
func psgdDot2Vec(x, y0, y1 []float32, lanes0, lanes1 *[8]float32) int { return 0 }
func psgdCompensateDotVec(m, g, lq, q []float32, qstride int, coef []float32, lanes0, lanes1 *[8]float32) int {
	return 0
}
func psgdLowRankSubVec(out, e, m, q []float32, qstride int, coef []float32) int { return 0 }
func psgdOuterAddVec(q []float32, qstride int, coef, row []float32) int         { return 0 }
func psgdCompensateVec(m, g, q []float32, qstride int, coef []float32) int      { return 0 }
