package optim

import "math"

// ClipGlobalNorm scales the gradients of params in place so that their global L2 norm
// (over all tensors together) is at most maxNorm, as torch.nn.utils.clip_grad_norm_:
// every gradient is multiplied by maxNorm/(norm+1e-6) when that factor is below 1
// (norm > maxNorm - 1e-6; the 1e-6 keeps the factor finite and, as in PyTorch, a
// norm exactly at maxNorm is scaled by maxNorm/(maxNorm+1e-6)). It returns the norm
// before clipping. maxNorm <= 0 turns clipping off (Config.ClipNorm 0); the norm is
// still returned.
//
// A non-finite norm (an Inf or NaN gradient) leaves the gradients unchanged, unlike
// PyTorch, which would scale them to zeros and NaNs: the caller sees the norm and can
// skip the step with the cause intact.
func ClipGlobalNorm(params []Param, maxNorm float64) (norm float64) {
	var sum float64
	for i := range params {
		sum += sumSquares(params[i].Grad)
	}
	norm = math.Sqrt(sum)
	if maxNorm <= 0 || !finite(norm) {
		return norm
	}
	f := maxNorm / (norm + 1e-6)
	if f >= 1 {
		return norm
	}
	for i := range params {
		g := params[i].Grad
		for j, x := range g {
			g[j] = float32(float64(x) * f)
		}
	}
	return norm
}

// sumSquares returns the sum of squares of x in float64, where squares of float32
// values cannot overflow and a million small terms do not lose precision. Four
// partial sums break the dependency chain on one accumulator (about 4x faster).
func sumSquares(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(x); i++ {
		a := float64(x[i])
		s0 += a * a
	}
	return (s0 + s1) + (s2 + s3)
}
