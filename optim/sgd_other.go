//go:build !amd64

package optim

const sgdVector = false

func sgdPlainVec(w, g []float32, lr, wd float64) int                         { return 0 }
func sgdMomentumVec(w, g, b []float32, lr, wd, m float64, nesterov bool) int { return 0 }
