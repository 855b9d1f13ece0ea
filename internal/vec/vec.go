// Package vec holds the float32 loops of the in-process all-reduce and the
// fused step's mean: each runs eight values at a time where the CPU allows
// (vec_amd64.s, AVX) and one at a time otherwise, with the same additions in
// the same order and the same multiplication, so both give the same bits.
// The source slices are at least as long as dst (or out).
package vec

// Scale multiplies dst by s.
func Scale(dst []float32, s float32) {
	for i := scaleVec(dst, s); i < len(dst); i++ {
		dst[i] *= s
	}
}

// Add4 adds a, b, c and d into dst, in that order for every element.
func Add4(dst, a, b, c, d []float32) {
	a, b, c, d = a[:len(dst)], b[:len(dst)], c[:len(dst)], d[:len(dst)]
	for i := addsVec(dst, a, b, c, d); i < len(dst); i++ {
		s := dst[i]
		s += a[i]
		s += b[i]
		s += c[i]
		s += d[i]
		dst[i] = s
	}
}

// Add3 adds a, b and c into dst, in that order for every element.
func Add3(dst, a, b, c []float32) {
	a, b, c = a[:len(dst)], b[:len(dst)], c[:len(dst)]
	for i := addsVec(dst, a, b, c); i < len(dst); i++ {
		s := dst[i]
		s += a[i]
		s += b[i]
		s += c[i]
		dst[i] = s
	}
}

// Add2 adds a and b into dst, in that order for every element.
func Add2(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := addsVec(dst, a, b); i < len(dst); i++ {
		s := dst[i]
		s += a[i]
		s += b[i]
		dst[i] = s
	}
}

// Add1 adds a into dst.
func Add1(dst, a []float32) {
	a = a[:len(dst)]
	for i := addsVec(dst, a); i < len(dst); i++ {
		dst[i] += a[i]
	}
}

// AddScale writes (x + a) * s into out, as Add1 then Scale would: out may
// be x itself.
func AddScale(out, x, a []float32, s float32) {
	x, a = x[:len(out)], a[:len(out)]
	for i := addScaleVec(out, x, a, s); i < len(out); i++ {
		v := x[i]
		v += a[i]
		out[i] = v * s
	}
}
