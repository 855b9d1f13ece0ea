package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// naiveGEMM is c = op(a)·op(b) + beta·c by the definition.
func naiveGEMM(tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	for i := range m {
		for j := range n {
			s := 0.0
			for l := range k {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				s += a[ai] * b[bi]
			}
			c[i*ldc+j] = s + beta*c[i*ldc+j]
		}
	}
}

// TestGEMM checks gemm in both precisions against the definition, for every
// transpose combination, beta 0 and 1, leading dimensions wider than the
// matrices, and sizes that the tiling for gonum's serial kernel splits
// unevenly.
func TestGEMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][3]int{{3, 5, 4}, {70, 200, 9}, {130, 400, 37}, {16, 1024, 144}} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, beta := range []float64{0, 1} {
				m, n, k := sz[0], sz[1], sz[2]
				tA, tB := tr[0], tr[1]
				t.Run(fmt.Sprintf("m%d_n%d_k%d_tA%v_tB%v_beta%g", m, n, k, tA, tB, beta), func(t *testing.T) {
					ar, ac, br, bc := storedDims(tA, tB, m, n, k)
					lda, ldb, ldc := ac+3, bc+1, n+2
					a, b, c := randSlice(rng, ar*lda), randSlice(rng, br*ldb), randSlice(rng, m*ldc)
					want := append([]float64(nil), c...)
					naiveGEMM(tA, tB, m, n, k, a, lda, b, ldb, beta, want, ldc)

					c64 := append([]float64(nil), c...)
					gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, c64, ldc)
					c32 := f32s(c)
					gemm(tA, tB, m, n, k, f32s(a), lda, f32s(b), ldb, float32(beta), c32, ldc)
					for i := range m {
						for j := range n {
							o := i*ldc + j
							if d := math.Abs(c64[o] - want[o]); d > 1e-12*float64(k+1) {
								t.Fatalf("float64 c[%d,%d] = %g, expected %g", i, j, c64[o], want[o])
							}
							if d := math.Abs(float64(c32[o]) - want[o]); d > 1e-5*float64(k+1) {
								t.Fatalf("float32 c[%d,%d] = %g, expected %g", i, j, c32[o], want[o])
							}
						}
						// Padding between rows stays untouched.
						for j := n; j < ldc && i*ldc+j < len(c); j++ {
							if o := i*ldc + j; c64[o] != c[o] || c32[o] != float32(c[o]) {
								t.Fatalf("gemm wrote outside the matrix at row %d, column %d", i, j)
							}
						}
					}
				})
			}
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// BenchmarkSGEMM reports the float32 GEMM speed of gemm, the fast ops'
// entry (one goroutine), on the models' products (sgemmModelShapes) and a
// large square one, for each path: gonum's Sgemm (tiled as gemm runs it) and
// each assembly kernel the CPU has; with -tags openblas, OpenBLAS in
// gonum's place (the path the ops take when the CPU has no kernel). GFLOP/s
// is over wall-clock time, GFLOP/s-cpu over the thread's CPU time (Linux),
// which other processes on a shared machine do not inflate. With
// OpenBLAS, compare OPENBLAS_CORETYPE=Haswell with the automatic choice to
// see the core type's effect.
func BenchmarkSGEMM(b *testing.B) {
	paths := sgemmPaths()
	if !pureGoBLAS() {
		// OpenBLAS in place of gonum: kern nil sends gemm to it.
		paths[0] = sgemmPath{name: "openblas"}
	}
	shapes := append(sgemmModelShapes[:len(sgemmModelShapes):len(sgemmModelShapes)], struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{"square512", false, false, 512, 512, 512})
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range shapes {
		g := newGEMMCase(rng, s.tA, s.tB, s.m, s.n, s.k, 0, 1, 0)
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s_%dx%dx%d/%s", s.name, s.m, s.n, s.k, p.name), func(b *testing.B) {
				defer useSgemmKernel(p.kern)()
				c := make([]float32, len(g.c))
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPUTime()
				for b.Loop() {
					gemm(g.tA, g.tB, g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, 0, c, g.ldc)
				}
				gflop := 2 * float64(g.m*g.n*g.k) * float64(b.N) / 1e9
				b.ReportMetric(gflop/b.Elapsed().Seconds(), "GFLOP/s")
				if cpu := threadCPUTime() - cpu0; cpu > 0 {
					b.ReportMetric(gflop/cpu.Seconds(), "GFLOP/s-cpu")
				}
			})
		}
	}
}

// BenchmarkSGEMMDot times the products useDot decides, op(a)·bᵀ, in both
// forms of each kernel that has a dot-product form: the packed panels (dot
// false) and the dot products (dot true), over m for the k of the models'
// products, so that useDot's bound can be read off per kernel.
func BenchmarkSGEMMDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, kern := range sgemmKernels {
		if kern.dot == nil {
			continue
		}
		for _, s := range [][3]int{ // m, n, k
			{6, 5, 896}, {16, 30, 140}, {64, 30, 140}, {128, 30, 140}, {64, 5, 896}, {16, 16, 840}, {16, 16, 224}, {32, 784, 512}, {128, 784, 512},
			{32, 256, 10}, {8, 64, 128}, {16, 64, 128}, {32, 64, 128}, {8, 64, 512}, {16, 64, 512}, {32, 64, 512}, {64, 64, 512},
		} {
			g := newGEMMCase(rng, false, true, s[0], s[1], s[2], 0, 1, 0)
			for _, dot := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/m%d_n%d_k%d/dot=%v", kern.name, g.m, g.n, g.k, dot), func(b *testing.B) {
					c := make([]float32, len(g.c))
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					cpu0 := threadCPUTime()
					for b.Loop() {
						sgemmChecked(kern, dot, false, true, g.m, g.n, g.k, 1, g.a, g.lda, g.b, g.ldb, 0, c, g.ldc)
					}
					gflop := 2 * float64(g.m*g.n*g.k) * float64(b.N) / 1e9
					if cpu := threadCPUTime() - cpu0; cpu > 0 {
						b.ReportMetric(gflop/cpu.Seconds(), "GFLOP/s-cpu")
					}
				})
			}
		}
	}
}
