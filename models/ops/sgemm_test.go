package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// sgemmPath is one way of multiplying float32 matrices: an assembly kernel
// (kern) or, with kern nil, gonum's Sgemm, both through the package switch
// useSgemmKernel and BLAS.Sgemm, the entry point with alpha.
type sgemmPath struct {
	name string
	kern *sgemmKernel
}

// sgemmPaths lists every path this CPU can run, so that a machine with
// AVX-512 tests the AVX2 kernel and gonum's fallback as well.
func sgemmPaths() []sgemmPath {
	paths := []sgemmPath{{name: "gonum"}}
	for _, k := range sgemmKernels {
		paths = append(paths, sgemmPath{name: k.name, kern: k})
	}
	return paths
}

// gemmCase is one product: c = alpha·op(a)·op(b) + beta·c with padded
// leading dimensions.
type gemmCase struct {
	tA, tB        bool
	m, n, k       int
	lda, ldb, ldc int
	alpha, beta   float32
	a, b, c       []float32
}

func (g *gemmCase) String() string {
	return fmt.Sprintf("m%d_n%d_k%d_tA%v_tB%v_alpha%g_beta%g_ld%d,%d,%d", g.m, g.n, g.k, g.tA, g.tB, g.alpha, g.beta, g.lda, g.ldb, g.ldc)
}

// newGEMMCase fills a, b and c with normal values, c's padding (and all of c
// when beta is 0, which must not read it) with NaN, so that a kernel that
// reads or writes where it must not shows.
func newGEMMCase(rng *rand.Rand, tA, tB bool, m, n, k, pad int, alpha, beta float32) *gemmCase {
	g := &gemmCase{tA: tA, tB: tB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac, br, bc := storedDims(tA, tB, m, n, k)
	g.lda, g.ldb, g.ldc = max(1, ac)+pad, max(1, bc)+2*pad, max(1, n)+3*pad
	fill := func(rows, cols, ld int) []float32 {
		v := make([]float32, rows*ld+5) // 5 values past the end as a guard
		for i := range v {
			v[i] = float32(math.NaN())
		}
		for i := range rows {
			for j := range cols {
				v[i*ld+j] = float32(rng.NormFloat64())
			}
		}
		return v
	}
	g.a, g.b, g.c = fill(ar, ac, g.lda), fill(br, bc, g.ldb), fill(m, n, g.ldc)
	if beta == 0 {
		for i := range m {
			for j := range n {
				g.c[i*g.ldc+j] = float32(math.NaN())
			}
		}
	}
	return g
}

// reference computes the case in float64 with gonum's Dgemm, and the bound
// on float32's rounding error for each element: the float32 result sums k
// products in some order (at most k roundings on any product's path, fewer
// in the dot-product form's lanes and tree), scales by alpha and adds
// beta·c, once per k block of at most sgemmPackKC, so its error is at most
// (k + 2·blocks + 3)·u·(|alpha|·Σ|a||b| + |beta·c|), u = 2⁻²⁴ (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1). The
// tolerance is twice that.
func (g *gemmCase) reference() (want, tol []float64) {
	m, n, k := g.m, g.n, g.k
	f64 := func(v []float32, abs bool) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
			if abs {
				out[i] = math.Abs(out[i])
			}
			if math.IsNaN(out[i]) {
				out[i] = 0 // padding: never read (checked separately)
			}
		}
		return out
	}
	tr := func(t bool) blas.Transpose {
		if t {
			return blas.Trans
		}
		return blas.NoTrans
	}
	want = f64(g.c, false)
	tol = f64(g.c, true)
	if g.beta == 0 {
		for i := range m {
			clear(want[i*g.ldc:][:n])
			clear(tol[i*g.ldc:][:n])
		}
	}
	impl := gonum.Implementation{}
	if m == 0 || n == 0 {
		return want, tol
	}
	beta := float64(g.beta)
	impl.Dgemm(tr(g.tA), tr(g.tB), m, n, k, float64(g.alpha), f64(g.a, false), g.lda, f64(g.b, false), g.ldb, beta, want, g.ldc)
	blocks := (k + sgemmPackKC - 1) / sgemmPackKC
	u := math.Ldexp(1, -24)
	scale := 2 * float64(k+2*blocks+3) * u
	impl.Dgemm(tr(g.tA), tr(g.tB), m, n, k, math.Abs(float64(g.alpha)), f64(g.a, true), g.lda, f64(g.b, true), g.ldb, math.Abs(beta), tol, g.ldc)
	for i := range tol {
		tol[i] *= scale
	}
	return want, tol
}

// check compares got (c after the product) with the reference, and c's
// padding and guard with the NaN they held.
func (g *gemmCase) check(t *testing.T, path string, got []float32, want, tol []float64) {
	t.Helper()
	for i := range g.m {
		for j := range g.n {
			o := i*g.ldc + j
			if d := math.Abs(float64(got[o]) - want[o]); !(d <= tol[o]) {
				t.Fatalf("%s %v: c[%d,%d] = %g, expected %g (tolerance %.3g)", path, g, i, j, got[o], want[o], tol[o])
			}
		}
	}
	for o := range got {
		i, j := o/g.ldc, o%g.ldc
		if (i >= g.m || j >= g.n) && !math.IsNaN(float64(got[o])) {
			t.Fatalf("%s %v: wrote %g outside c at offset %d (row %d, column %d)", path, g, got[o], o, i, j)
		}
	}
}

// run multiplies on path into a copy of c and returns it.
func (g *gemmCase) run(p sgemmPath) []float32 {
	defer useSgemmKernel(p.kern)()
	c := slices.Clone(g.c)
	tr := func(t bool) blas.Transpose {
		if t {
			return blas.Trans
		}
		return blas.NoTrans
	}
	BLAS{}.Sgemm(tr(g.tA), tr(g.tB), g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	return c
}

// testGEMMCase runs the case on every path, checks each against the float64
// reference, and checks that the assembly kernels agree to the bit where
// they take the outer-product form (see sgemm.go), which sums in the same
// order; the dot-product forms sum 16 (AVX-512) or 8 (AVX2) lanes wide.
func testGEMMCase(t *testing.T, g *gemmCase) {
	t.Helper()
	want, tol := g.reference()
	var first string // the first outer-product kernel's name
	results := map[string][]float32{}
	for _, p := range sgemmPaths() {
		got := g.run(p)
		g.check(t, p.name, got, want, tol)
		if p.kern == nil || p.kern.useDot(g.tA, g.tB, g.m, g.n, g.k) {
			continue
		}
		results[p.name] = got
		if first == "" {
			first = p.name
		} else if !sameBits(got, results[first]) {
			t.Fatalf("%s %v: differs from %s's result", p.name, g, first)
		}
	}
}

func sameBits(x, y []float32) bool {
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			return false
		}
	}
	return true
}

// sgemmTestSizes are the sizes every dimension takes in TestSgemmShapes:
// every size below two AVX-512 tiles of 8 rows and around the tiles' and
// vectors' widths (16, 32, 64), and a size past 128 that is no multiple of
// anything.
var sgemmTestSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 63, 65, 127, 200}

// TestSgemmShapes multiplies every combination of m, n and k from
// sgemmTestSizes (at most two of them above 33, to bound the time; the
// all-large ones are in TestSgemmModelShapes) on every path. The shapes cycle
// through the transposes, beta 0, 1 and 0.5, alpha 1, -0.5 and 2, and
// padded or tight leading dimensions.
func TestSgemmShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	betas, alphas := []float32{0, 1, 0.5}, []float32{1, -0.5, 2}
	idx := 0
	for _, m := range sgemmTestSizes {
		for _, n := range sgemmTestSizes {
			for _, k := range sgemmTestSizes {
				large := 0
				for _, d := range []int{m, n, k} {
					if d > 33 {
						large++
					}
				}
				if large > 2 {
					continue
				}
				idx++
				g := newGEMMCase(rng, idx%2 == 1, idx/2%2 == 1, m, n, k, idx%3, alphas[idx/4%3], betas[idx/12%3])
				testGEMMCase(t, g)
			}
		}
	}
}

// sgemmModelShapes are the products the models run, as m, n, k and the
// transposes, at batch 64 (a convolution's products are per sample):
var sgemmModelShapes = []struct {
	name    string
	tA, tB  bool
	m, n, k int
}{
	// mlp 784-512-256-10 (Gorgonia's products): forward x·W, then dx = dy·Wᵀ
	// and dW = xᵀ·dy.
	{"mlp_fc1_fwd", false, false, 64, 512, 784},
	{"mlp_fc1_dx", false, true, 64, 784, 512},
	{"mlp_fc1_dw", true, false, 784, 512, 64},
	{"mlp_fc2_fwd", false, false, 64, 256, 512},
	{"mlp_fc3_fwd", false, false, 64, 10, 256},
	{"mlp_fc3_dx", false, true, 64, 256, 10},
	{"mlp_fc3_dw", true, false, 256, 10, 64},
	// lenet5: conv1 (1→6, 5×5, 28×28 padded) and conv2 (6→16, 5×5, 10×10):
	// y = W·col, dcol = Wᵀ·dy, dW += dy·colᵀ; then fc1 400→120.
	{"lenet_conv1_fwd", false, false, 6, 784, 25},
	{"lenet_conv1_dw", false, true, 6, 25, 784},
	{"lenet_conv2_fwd", false, false, 16, 100, 150},
	{"lenet_conv2_dx", true, false, 150, 100, 16},
	{"lenet_conv2_dw", false, true, 16, 150, 100},
	{"lenet_fc1_fwd", false, false, 64, 120, 400},
	// resnet20's 3×3 convolutions at 32×32×16, 16×16×32 and 8×8×64.
	{"resnet_s1_fwd", false, false, 16, 1024, 144},
	{"resnet_s1_dx", true, false, 144, 1024, 16},
	{"resnet_s1_dw", false, true, 16, 144, 1024},
	{"resnet_s2_fwd", false, false, 32, 256, 288},
	{"resnet_s2_dx", true, false, 288, 256, 32},
	{"resnet_s2_dw", false, true, 32, 288, 256},
	{"resnet_s3_fwd", false, false, 64, 64, 576},
	{"resnet_s3_dx", true, false, 576, 64, 64},
	{"resnet_s3_dw", false, true, 64, 576, 64},
	// lstm, 128 units over 28 steps of 28 inputs: a step's recurrent
	// product for a shard of 32 sequences, and the input product for all
	// steps of it.
	{"lstm_step", false, false, 32, 512, 128},
	{"lstm_input", false, false, 32 * 28, 512, 28},
	{"lstm_dh", false, true, 32, 128, 512},
	{"lstm_dwh", true, false, 128, 512, 27},
	// All three dimensions large and ragged.
	{"ragged", false, false, 127, 200, 263},
	{"ragged_tt", true, true, 200, 65, 300},
	{"square", false, true, 200, 200, 200},
}

// TestSgemmModelShapes runs the models' products on every path, with every
// transpose (the models use one each; Gorgonia may hand any), beta 0, 1 and
// 0.5 and padded leading dimensions.
func TestSgemmModelShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for i, s := range sgemmModelShapes {
		for tr := range 4 {
			tA, tB := s.tA != (tr&1 == 1), s.tB != (tr&2 == 2)
			for _, beta := range []float32{0, 1, 0.5} {
				testGEMMCase(t, newGEMMCase(rng, tA, tB, s.m, s.n, s.k, (i+tr)%3, 1, beta))
			}
		}
	}
}

// TestSgemmRandom multiplies random shapes (up to 80 on each side, k up to
// 600 to cross k blocks) with random transposes, strides, alpha and beta.
func TestSgemmRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	n := 300
	if testing.Short() {
		n = 50
	}
	for range n {
		m, nn, k := 1+rng.IntN(80), 1+rng.IntN(80), 1+rng.IntN(600)
		alpha := float32(rng.NormFloat64())
		beta := []float32{0, 1, float32(rng.NormFloat64())}[rng.IntN(3)]
		testGEMMCase(t, newGEMMCase(rng, rng.IntN(2) == 1, rng.IntN(2) == 1, m, nn, k, rng.IntN(20), alpha, beta))
	}
}

// TestSgemmDegenerate covers the sizes that multiply nothing: k = 0 (and
// alpha 0) leave beta·c, and beta 0 then clears c even where it held NaN;
// m or n = 0 leave c alone.
func TestSgemmDegenerate(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, s := range [][3]int{{3, 4, 0}, {0, 5, 6}, {5, 0, 6}, {0, 0, 0}} {
		for _, beta := range []float32{0, 1, 0.5} {
			for _, alpha := range []float32{1, 0} {
				testGEMMCase(t, newGEMMCase(rng, false, true, s[0], s[1], s[2], 1, alpha, beta))
			}
		}
	}
	testGEMMCase(t, newGEMMCase(rng, true, false, 20, 40, 30, 2, 0, 0.5))
}

// TestSgemmDot runs the dot-product kernels on shapes that useDot would not
// give them: every tile size (m up to 17 rows, n up to 5 columns), k from 1
// (a lone partial chunk of 16) to past 1000, around multiples of 16.
func TestSgemmDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	for _, kern := range sgemmKernels {
		if kern.dot == nil {
			continue
		}
		idx := 0
		for _, m := range []int{1, 2, 3, 7, 8, 9, 16, 17} {
			for _, n := range []int{1, 2, 3, 5} {
				for _, k := range []int{1, 2, 15, 16, 17, 31, 32, 33, 100, 1001} {
					idx++
					alpha, beta := []float32{1, -0.5, 2}[idx%3], []float32{0, 1, 0.5}[idx/3%3]
					g := newGEMMCase(rng, false, true, m, n, k, idx%3, alpha, beta)
					want, tol := g.reference()
					c := slices.Clone(g.c)
					sgemmChecked(kern, true, false, true, m, n, k, alpha, g.a, g.lda, g.b, g.ldb, beta, c, g.ldc)
					g.check(t, kern.name+" dot", c, want, tol)
				}
			}
		}
	}
}

// TestSgemmParallel checks that BLAS.Sgemm's split over goroutines gives
// the serial kernel's result to the bit, on products above
// sgemmParallelMin split both ways.
func TestSgemmParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for _, k := range sgemmKernels {
		for _, s := range [][3]int{{300, 70, 200}, {40, 500, 300}, {64, 512, 784}} {
			g := newGEMMCase(rng, false, true, s[0], s[1], s[2], 1, 1.5, 0.5)
			if g.m*g.n*g.k < sgemmParallelMin {
				t.Fatalf("%v is below sgemmParallelMin", g)
			}
			got := g.run(sgemmPath{kern: k})
			serial := slices.Clone(g.c)
			sgemm(k, g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, serial, g.ldc)
			if !sameBits(got, serial) {
				t.Fatalf("%s %v: the parallel product differs from the serial one", k.name, g)
			}
		}
	}
}

// TestSgemmConcurrent multiplies from several goroutines at once, as the ops
// do (one product per batch shard, each with its own pack buffers from the
// pool); each must get the result it gets alone. Run with -race.
func TestSgemmConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, k := range sgemmKernels {
		const workers = 8
		cases := make([]*gemmCase, workers)
		want := make([][]float32, workers)
		for w := range cases {
			// Transposed B packs panels; odd m packs A's last rows.
			cases[w] = newGEMMCase(rng, w%2 == 1, true, 37+w, 70+3*w, 300, w%3, 1, float32(w%2))
			want[w] = slices.Clone(cases[w].c)
			g := cases[w]
			sgemm(k, g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, want[w], g.ldc)
		}
		got := make([][]float32, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := cases[w]
				c := slices.Clone(g.c)
				for range 20 {
					copy(c, g.c)
					sgemm(k, g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
				}
				got[w] = c
			}()
		}
		wg.Wait()
		for w := range workers {
			if !sameBits(got[w], want[w]) {
				t.Fatalf("%s: goroutine %d's product differs from the same product run alone", k.name, w)
			}
		}
	}
}

// TestSgemmNoAlloc checks that a product allocates nothing once the pack
// buffers exist, on each kernel's packing paths (transposed B; a partial
// panel) and the dot-product form.
func TestSgemmNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	for _, k := range sgemmKernels {
		for _, s := range [][3]int{{16, 100, 300}, {20, 70, 40}, {8, 50, 512}} {
			for _, tB := range []bool{false, true} {
				g := newGEMMCase(rng, false, tB, s[0], s[1], s[2], 1, 1, 0)
				c := slices.Clone(g.c)
				allocs := testing.AllocsPerRun(5, func() {
					sgemm(k, g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
				})
				if allocs != 0 {
					t.Errorf("%s %v: %v allocations per product", k.name, g, allocs)
				}
			}
		}
	}
}

// TestSgemmBadInput checks that short slices and bad leading dimensions
// panic before a kernel reads out of bounds.
func TestSgemmBadInput(t *testing.T) {
	for _, k := range sgemmKernels {
		for name, f := range map[string]func(){
			"short a": func() {
				sgemm(k, false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
			},
			"short b": func() {
				sgemm(k, false, true, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 15), 4, 0, make([]float32, 16), 4)
			},
			"short c": func() {
				sgemm(k, true, false, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 16), 4, 0, make([]float32, 15), 4)
			},
			"small lda": func() {
				sgemm(k, false, false, 4, 4, 5, 1, make([]float32, 40), 4, make([]float32, 40), 4, 0, make([]float32, 16), 4)
			},
			"small ldc": func() {
				sgemm(k, false, false, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 16), 4, 0, make([]float32, 16), 3)
			},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s did not panic", k.name, name)
					}
				}()
				f()
			}()
		}
	}
}
