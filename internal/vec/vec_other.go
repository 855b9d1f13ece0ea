//go:build !amd64

package vec

var vector = false

func addsVec(dst []float32, srcs ...[]float32) int   { return 0 }
func scaleVec(dst []float32, s float32) int          { return 0 }
func addScaleVec(out, x, a []float32, s float32) int { return 0 }
