package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// loopVariants runs f once for each set of float32 loops this CPU can run:
// the AVX-512 ones, the AVX2 ones and the Go loops.
func loopVariants(t *testing.T, f func(t *testing.T)) {
	saved512, saved2 := loopsAVX512, loopsAVX2
	defer func() { loopsAVX512, loopsAVX2 = saved512, saved2 }()
	for _, v := range []struct {
		name         string
		avx512, avx2 bool
		ok           bool
	}{{"avx512", true, false, cpuAVX512}, {"avx2", false, true, cpuAVX2}, {"go", false, false, true}} {
		if !v.ok {
			continue
		}
		loopsAVX512, loopsAVX2 = v.avx512, v.avx2
		t.Run(v.name, f)
	}
}

// TestLoopsFloat32 checks the float32 BatchNorm and ReLU loops (AVX-512 or
// AVX2 where the CPU has them, loops_amd64.s, loops_avx2_amd64.s) against the same loops in float64 (plain Go) on
// the same float32 inputs, for lengths around the 8- and 16-value steps (the masked
// tail) and with ReLU outputs y that are +0 (the mask drops them) or
// positive, and negative ones too (also dropped; a ReLU never gives them, nor
// -0, where the Go and assembly masks differ). Sums may differ by float32 rounding of their terms
// (1e-6 of Σ|term| per term is far above it for these lengths, far below a
// wrong lane or mask); element-wise results by a few ulps.
func TestLoopsFloat32(t *testing.T) { loopVariants(t, testLoopsFloat32) }

func testLoopsFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 64, 100, 1000} {
		x, y, dy := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()*2 + 0.5)
			dy[i] = float32(rng.NormFloat64())
			switch rng.IntN(3) {
			case 0:
				y[i] = 0
			case 1:
				y[i] = float32(rng.Float64())
			default:
				y[i] = -float32(rng.Float64())
			}
		}
		x64, y64, dy64 := f64s(x), f64s(y), f64s(dy)
		const mean, scale, m1, m2 = 0.3, 1.7, -0.2, 0.45
		for _, relu := range []bool{false, true} {
			name := fmt.Sprintf("n%d_relu%v", n, relu)
			// Σ|term| bounds the rounding of a sum of n terms.
			absSum := func(f func(i int) float64) float64 {
				s := 0.0
				for i := range n {
					s += math.Abs(f(i))
				}
				return s
			}
			checkSum := func(what string, got float32, want, mag float64) {
				if d := math.Abs(float64(got) - want); !(d <= 1e-6*mag*float64(n)+1e-30) {
					t.Errorf("%s: %s = %v, expected %v", name, what, got, want)
				}
			}
			a, b := gradDots(x, y, dy, float32(mean), relu)
			wa, wb := gradDots(x64, y64, dy64, mean, relu)
			checkSum("Σg", a, wa, absSum(func(i int) float64 { return dy64[i] }))
			checkSum("Σg(x-mean)", b, wb, absSum(func(i int) float64 { return dy64[i] * (x64[i] - mean) }))
			if !relu {
				checkSum("Σx", sum(x), sum(x64), absSum(func(i int) float64 { return x64[i] }))
				s1, s2 := shiftedSums(x, x[0])
				w1, w2 := shiftedSums(x64, x64[0])
				checkSum("Σ(x-k)", s1, w1, absSum(func(i int) float64 { return x64[i] - x64[0] }))
				checkSum("Σ(x-k)²", s2, w2, absSum(func(i int) float64 { return (x64[i] - x64[0]) * (x64[i] - x64[0]) }))
			}
			dx, dx64 := make([]float32, n+1), make([]float64, n)
			dx[n] = 42 // past the end: must stay
			bnGradPlane(dx[:n], x, y, dy, float32(mean), float32(scale), float32(m1), float32(m2), relu)
			bnGradPlane(dx64, x64, y64, dy64, mean, scale, m1, m2, relu)
			out, out64 := make([]float32, n+1), make([]float64, n)
			out[n] = 42 // past the end: must stay
			affine(out[:n], x, float32(scale), float32(m1), relu)
			affine(out64, x64, scale, m1, relu)
			for i := range n {
				mag := math.Abs(scale) * (math.Abs(dy64[i]) + math.Abs(m1) + math.Abs((x64[i]-mean)*m2))
				if d := math.Abs(float64(dx[i]) - dx64[i]); !(d <= 1e-6*mag) {
					t.Errorf("%s: dx[%d] = %v, expected %v", name, i, dx[i], dx64[i])
				}
				if d := math.Abs(float64(out[i]) - out64[i]); !(d <= 1e-6*(math.Abs(x64[i]*scale)+math.Abs(m1))) {
					t.Errorf("%s: affine[%d] = %v, expected %v", name, i, out[i], out64[i])
				}
				if relu && math.Signbit(float64(out[i])) {
					t.Errorf("%s: affine[%d] = %v after ReLU", name, i, out[i])
				}
			}
			if out[n] != 42 || dx[n] != 42 {
				t.Errorf("%s: affine or bnGradPlane wrote past its %d values", name, n)
			}
			if !relu {
				continue
			}
			// The ReLU ops: exact, one rounding (the sum) or none.
			addRelu(out[:n], x, dy)
			sum := make([]float32, n)
			for i := range n {
				sum[i] = x[i] + dy[i]
			}
			for i := range n {
				if want := float32(max(float64(sum[i]), 0)); out[i] != want || math.Signbit(float64(out[i])) {
					t.Errorf("addRelu[%d] = %v, expected %v", i, out[i], want)
				}
			}
			reluGrad(out[:n], dy, y)
			for i := range n {
				want := float32(0)
				if y[i] > 0 {
					want = dy[i]
				}
				if out[i] != want {
					t.Errorf("reluGrad[%d] = %v, expected %v (y %v)", i, out[i], want, y[i])
				}
			}
			if out[n] != 42 {
				t.Errorf("%s: the ReLU ops wrote past their %d values", name, n)
			}
			// addTo: exact, one rounding a sum.
			copy(out, x)
			addTo(out[:n], dy)
			for i := range n {
				if want := x[i] + dy[i]; out[i] != want {
					t.Errorf("addTo[%d] = %v, expected %v", i, out[i], want)
				}
			}
			if out[n] != 42 {
				t.Errorf("%s: addTo wrote past its %d values", name, n)
			}
		}
	}
}

// TestCopyRows checks copyRows (the assembly loop on float32 where the CPU
// has AVX-512) against element-wise copying: every value of the rows lands,
// nothing between or after them is written.
func TestCopyRows(t *testing.T) {
	for _, cols := range []int{1, 7, 15, 16, 17, 32, 34, 50} {
		for _, rows := range []int{1, 2, 5} {
			lds, ldd := cols+3, cols+5
			src := make([]float32, (rows-1)*lds+cols)
			for i := range src {
				src[i] = float32(i + 1)
			}
			dst := make([]float32, (rows-1)*ldd+cols+16)
			for i := range dst {
				dst[i] = -1
			}
			copyRows(dst, ldd, src, lds, rows, cols)
			for i, v := range dst {
				r, c := i/ldd, i%ldd
				want := float32(-1)
				if r < rows && c < cols {
					want = src[r*lds+c]
				}
				if v != want {
					t.Fatalf("rows %d cols %d: dst[%d] (row %d, column %d) = %v, expected %v", rows, cols, i, r, c, v, want)
				}
			}
		}
	}
}

// TestStride2Rows checks gatherStride2 and scatterAddStride2 (assembly on
// float32 where the CPU has AVX-512 or, the gather, AVX2) against their definitions, for row
// lengths around the 8- and 16-value steps: every value lands, nothing else is
// written, and the source's last read value is its 2·(cols-1)th (the slices
// end there).
func TestStride2Rows(t *testing.T) { loopVariants(t, testStride2Rows) }

func testStride2Rows(t *testing.T) {
	for _, cols := range []int{1, 2, 3, 4, 5, 7, 8, 9, 14, 15, 16, 17, 31, 32, 33} {
		for _, rows := range []int{1, 3} {
			lds, ldd := 2*cols+3, cols+2
			src := make([]float32, (rows-1)*lds+2*(cols-1)+1)
			for i := range src {
				src[i] = float32(i + 1)
			}
			dst := make([]float32, (rows-1)*ldd+cols+16)
			for i := range dst {
				dst[i] = -1
			}
			gatherStride2(dst[:(rows-1)*ldd+cols], ldd, src, lds, rows, cols)
			for i, v := range dst {
				r, c := i/ldd, i%ldd
				want := float32(-1)
				if r < rows && c < cols {
					want = src[r*lds+2*c]
				}
				if v != want {
					t.Fatalf("gather rows %d cols %d: dst[%d] = %v, expected %v", rows, cols, i, v, want)
				}
			}
			// The adjoint: back into a copy of src, which gains dst's values
			// at the even positions of its rows.
			acc := make([]float32, len(src)+16)
			copy(acc, src)
			for i := len(src); i < len(acc); i++ {
				acc[i] = -1
			}
			scatterAddStride2(acc[:len(src)], lds, dst, ldd, rows, cols)
			for i, v := range acc {
				want := float32(-1)
				if i < len(src) {
					want = src[i]
					if r, c := i/lds, i%lds; r < rows && c%2 == 0 && c/2 < cols {
						want += dst[r*ldd+c/2]
					}
				}
				if v != want {
					t.Fatalf("scatter-add rows %d cols %d: [%d] = %v, expected %v", rows, cols, i, v, want)
				}
			}
		}
	}
}

// TestMaxPool2Float32 checks the 2×2 stride-2 max-pool on float32 (the
// assembly row where the CPU has AVX-512) against the Go loop on the same
// values in float64: maxima and argmax, with ties (values from a set of
// five) resolved to the first window position in row-major order, for
// widths around the 16-window steps, even and odd widths and heights (an odd
// one's last column or row belongs to no window), and its gradient (unpool2
// against unpool, on a plane that starts dirty).
func TestMaxPool2Float32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	op := &maxPoolOp{poolState: &poolState{k: 2, stride: 2}}
	for _, hw := range [][2]int{{5, 2}, {4, 5}, {5, 10}, {4, 28}, {5, 31}, {4, 32}, {6, 34}, {5, 66}} {
		h, w := hw[0], hw[1]
		oh, ow := h/2, w/2
		x := make([]float32, h*w)
		for i := range x {
			x[i] = float32(rng.IntN(5)) * 0.5
			if rng.IntN(12) == 0 { // NaNs of either sign: a window with one gives NaN
				x[i] = math.Float32frombits(0x7fc00000 | uint32(rng.IntN(2))<<31)
			}
		}
		y, arg := make([]float32, oh*ow+1), make([]int32, oh*ow+1)
		y[oh*ow], arg[oh*ow] = 42, 42
		op.plane32(x, y[:oh*ow], arg[:oh*ow], w, oh, ow)
		y64, arg64 := make([]float64, oh*ow), make([]int32, oh*ow)
		op.plane64(f64s(x), y64, arg64, w, oh, ow)
		for i := range y64 {
			if nan := math.IsNaN(y64[i]); nan != math.IsNaN(float64(y[i])) || !nan && float64(y[i]) != y64[i] || arg[i] != arg64[i] {
				t.Fatalf("w %d: output %d = %v at %d, expected %v at %d", w, i, y[i], arg[i], y64[i], arg64[i])
			}
		}
		if y[oh*ow] != 42 || arg[oh*ow] != 42 {
			t.Fatalf("w %d: wrote past the %d outputs", w, oh*ow)
		}
		// The gradient: unpool2 (assembly) against unpool in float64, over
		// a plane that starts dirty (every position must be written).
		dy := make([]float32, oh*ow)
		for i := range dy {
			dy[i] = float32(rng.NormFloat64())
		}
		dx := make([]float32, h*w+1)
		for i := range dx {
			dx[i] = 7
		}
		ws := NewWorkspace(1)
		if loopsAVX512 {
			unpool2(ws, dx[:h*w], dy, arg[:oh*ow], 1, h, w)
		} else {
			unpool(ws, dx[:h*w], dy, arg[:oh*ow], 1, h*w, oh*ow)
		}
		dx64 := make([]float64, h*w)
		unpool(ws, dx64, f64s(dy), arg[:oh*ow], 1, h*w, oh*ow)
		for i := range dx64 {
			if float64(dx[i]) != dx64[i] {
				t.Fatalf("w %d: dx[%d] = %v, expected %v", w, i, dx[i], dx64[i])
			}
		}
		if dx[h*w] != 7 {
			t.Fatalf("w %d: the gradient wrote past the plane", w)
		}
	}
}
