package ops

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The float32 GEMM of the pure-Go build: a cache-blocked driver in Go around
// register-blocked micro-kernels in assembly (sgemm_amd64.s), after Goto and
// van de Geijn, "Anatomy of high-performance matrix multiplication" (ACM TOMS
// 34(3), 2008) and the BLIS loop nest (Van Zee and van de Geijn, ACM TOMS
// 41(3), 2015): the k dimension is cut into blocks of sgemmKC, C into
// panels of the kernel's nr columns and those into tiles of mr rows, each
// tile's k block summed in registers.
//
// Where this departs from the papers, for the shapes the models multiply
// (one sample's convolution, a batch of 64 through a linear layer, an LSTM
// step: small m or n, k up to a few thousand):
//   - Operands are read where they lie whenever their layout has the kernel's
//     access pattern (BLIS packs both, for large matrices): the kernels take
//     a row and a k stride for A, whose values they broadcast one at a time,
//     so op(A) is never copied (a partial tile repeats its last row rather
//     than read past the matrix), and B is read in place unless it is
//     transposed (its rows would then be columns) or, for a kernel without
//     masked loads, in its last partial panel. Packing would copy each
//     operand once per call while the shapes here reuse it only a few times
//     (a 16×1024 output reuses its 144×1024 B twice with 8-row tiles).
//   - A transposed B is packed one kc×nr panel at a time (8×8 transposes in
//     assembly), just before the tiles that use it, into a buffer that stays
//     in the L1 cache.
//   - There is no mc block: op(A)'s k block (m×kc) is small enough for L2 on
//     these shapes.
//   - a·bᵀ with few rows and a long k (a convolution's filter gradient, an
//     LSTM step's dh) runs as dot products on AVX-512 (useDot), reading both
//     operands in place, as packing b would cost about as much as the product.
//
// In the outer-product form every element of C is summed in the same order
// whatever the kernel, the tile it falls in and the leading dimensions:
// l = 0, 1, ... in fused multiply-adds within a k block, blocks added to C in
// order. The AVX2 and AVX-512 kernels therefore agree to the bit. The dot
// form sums each element in 16 interleaved partial sums added by a fixed
// tree. In both, an element depends only on its row of op(A), its column of
// op(B) and k, so splitting C does not change it as long as the parts take
// the whole product's form (which depends on m and k: BLAS.Sgemm decides it
// once before splitting).

// sgemmKC is the k block, and sgemmPackKC the k block of a product whose B is
// packed (transposed): a 128×32 panel (16 KB) leaves room in a 48 KB L1
// cache for the A rows it meets; 256 made those products 5-10% slower. The
// block does not matter where B is read in place (measured flat from 96 to
// 512), but it has to be the same for every kernel, so that their sums
// agree. It also sets the pack buffer's size: a 128×32 panel, or a 256×16
// AVX2 edge panel.
const (
	sgemmKC     = 256
	sgemmPackKC = 128
	sgemmBufLen = max(sgemmKC*16, sgemmPackKC*sgemmMaxNR)
)

// sgemmMaxNR bounds the kernels' panel width (the pack buffer's size).
const sgemmMaxNR = 32

// sgemmKernel is one micro-kernel of sgemm_amd64.s with its tile size.
type sgemmKernel struct {
	name   string
	mr, nr int
	// maskedB: the kernel reads only B's nr columns of a partial panel;
	// otherwise it reads all of the panel's columns, which then needs padding.
	maskedB bool
	fn      func(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)
	// dot, if set, computes a sgemmDotMR×sgemmDotNR tile of alpha·a·bᵀ +
	// beta·c from a's and b's rows in place (see useDot).
	dot func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)
	// taps, if set, computes mr rows by two column segments of a sum of
	// products whose B rows start at a table of offsets (see shiftGEMM).
	taps tapsFunc
	// tapsStrip, if set, sums the same products into mr rows by one strip
	// of up to 16 columns (n) at c: shiftGEMM runs it over the whole output
	// in the padded rows' layout, copied out after (shiftGEMMFlat), since
	// a strip of one image row of 7 or 14 values would leave most of its
	// lanes idle. It reads 16 columns of each B row whatever n is: B's
	// backing array must hold them.
	tapsStrip tapsStripFunc
}

// tapsFunc and tapsStripFunc are the taps kernels' forms (sgemmKernel).
type (
	tapsFunc      func(k, taps int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int)
	tapsStripFunc func(k, taps int, a *float32, ars int, b *float32, offs *int, bks int, c *float32, ldc, mr, n int)
)

// The dot-product kernels' tile.
const sgemmDotMR, sgemmDotNR = 8, 2

// sgemmKernels are the micro-kernels this CPU can run, slowest first
// (archSgemmKernels is per architecture: none outside amd64).
var sgemmKernels = archSgemmKernels()

// sgemmAsm is the kernel gemm multiplies float32 matrices with, nil for
// gonum's GEMM. Tests switch it with useSgemmKernel.
var sgemmAsm = bestSgemmKernel()

func bestSgemmKernel() *sgemmKernel {
	if len(sgemmKernels) == 0 {
		return nil
	}
	return sgemmKernels[len(sgemmKernels)-1]
}

// useSgemmKernel makes gemm multiply float32 matrices with k (nil: gonum, or
// OpenBLAS in the openblas build) and returns a function that restores the
// previous kernel. Not safe while ops run.
func useSgemmKernel(k *sgemmKernel) (restore func()) {
	prevK, prevNative := sgemmAsm, nativeGEMM
	sgemmAsm = k
	if pureGoBLAS() {
		nativeGEMM = k == nil
	}
	return func() { sgemmAsm, nativeGEMM = prevK, prevNative }
}

// pureGoBLAS reports whether the float32 products that no assembly kernel
// runs go to gonum (the default build) rather than to a BLAS set by a build
// tag (OpenBLAS).
func pureGoBLAS() bool {
	_, ok := sgemmImpl.(gonum.Implementation)
	return ok
}

// sgemmBuf holds one caller's packed panel of op(B).
type sgemmBuf struct {
	b [sgemmBufLen]float32
}

// sgemmBufs are the pack buffers not in use. The ops multiply from several
// goroutines at once, so each call takes its own; the list keeps every
// buffer it was given (as many as calls ever ran at once, 16 KB each), so
// that a steady state allocates nothing. A sync.Pool would drop them at
// garbage collections.
var sgemmBufs struct {
	sync.Mutex
	free []*sgemmBuf
}

func getSgemmBuf() *sgemmBuf {
	sgemmBufs.Lock()
	defer sgemmBufs.Unlock()
	n := len(sgemmBufs.free)
	if n == 0 {
		return new(sgemmBuf)
	}
	buf := sgemmBufs.free[n-1]
	sgemmBufs.free = sgemmBufs.free[:n-1]
	return buf
}

func putSgemmBuf(buf *sgemmBuf) {
	sgemmBufs.Lock()
	sgemmBufs.free = append(sgemmBufs.free, buf)
	sgemmBufs.Unlock()
}

// storedDims returns the stored shapes, rows×cols, of a and b for op(a)
// m×k and op(b) k×n.
func storedDims(tA, tB bool, m, n, k int) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if tA {
		ar, ac = k, m
	}
	if tB {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// checkGEMM panics unless the row-major operands hold op(a) m×k, op(b) k×n
// and c m×n with their leading dimensions: the kernels do not check bounds.
func checkGEMM(tA, tB bool, m, n, k int, la, lda, lb, ldb, lc, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("sgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	check := func(name string, rows, cols, l, ld int) {
		if ld < max(1, cols) {
			panic(fmt.Sprintf("sgemm: leading dimension of %s %d < %d", name, ld, max(1, cols)))
		}
		if rows > 0 && cols > 0 && l < (rows-1)*ld+cols {
			panic(fmt.Sprintf("sgemm: %s has %d values, %d×%d with leading dimension %d needs %d", name, l, rows, cols, ld, (rows-1)*ld+cols))
		}
	}
	ar, ac, br, bc := storedDims(tA, tB, m, n, k)
	check("a", ar, ac, la, lda)
	check("b", br, bc, lb, ldb)
	check("c", m, n, lc, ldc)
}

// sgemm computes the row-major c = alpha·op(a)·op(b) + beta·c on the calling
// goroutine with the micro-kernel kern; beta 0 does not read c.
func sgemm(kern *sgemmKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGEMM(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	sgemmChecked(kern, kern.useDot(tA, tB, m, n, k), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// useDot reports whether a product takes the kernel's dot-product form: it
// needs op(a)·bᵀ (both operands' rows along k) and pays off when m is small
// (b's transposed panels would serve few tiles) and k long (the lanes' final
// sum is spread over many steps). Measured on AVX-512 over m 4..64, n 25..512
// and k 64..1024: the dot form wins from k ≈ 16·m on, by up to 2.5x at m 4
// and 1.3x at m 16, k 1024, and loses up to 2x at m 64, k 64. The AVX2
// kernel's crossover is about the same (BenchmarkSGEMMDot on a Zen 3: 54-59
// against 48 GFLOP/s at m 16, n 16, k 840; 45 against 64 at k 224). With
// fewer than 8 rows of b the packed form transposes them one value at a time
// (packTranspose's ragged edge, the same for both kernels), and the AVX2 dot
// form wins at every m measured (m 6, n 5, k 896: 35-39 against 4.4
// GFLOP/s; m 64: 46-52 against 16-19); the AVX-512 kernel was not measured
// there (LeNet-5's first filter gradient takes its dot form by k >= 16·m).
func (kern *sgemmKernel) useDot(tA, tB bool, m, n, k int) bool {
	return kern.dot != nil && !tA && tB && k >= 128 && (k >= 16*m || n < 8)
}

// sgemmChecked is sgemm on checked operands, in the dot-product form when
// dot is set. Callers that split a product decide dot once for the whole:
// the two forms round differently.
func sgemmChecked(kern *sgemmKernel, dot, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleRows(m, n, beta, c, ldc)
		return
	}
	if dot {
		for i0 := 0; i0 < m; i0 += sgemmDotMR {
			for j0 := 0; j0 < n; j0 += sgemmDotNR {
				kern.dot(k, &a[i0*lda], lda, &b[j0*ldb], ldb, &c[i0*ldc+j0], ldc, min(sgemmDotMR, m-i0), min(sgemmDotNR, n-j0), alpha, beta)
			}
		}
		return
	}
	var buf *sgemmBuf // taken when a panel needs packing
	mr, nr := kern.mr, kern.nr
	ars, aks := lda, 1 // A(i, l) = a[i·ars + l·aks]
	if tA {
		ars, aks = 1, lda
	}
	kcMax := sgemmKC
	if tB {
		kcMax = sgemmPackKC
	}
	for p0 := 0; p0 < k; p0 += kcMax {
		kc := min(kcMax, k-p0)
		bt := beta
		if p0 > 0 {
			bt = 1
		}
		for j0 := 0; j0 < n; j0 += nr {
			nc := min(nr, n-j0)
			var bp *float32
			bks := ldb
			if tB || (nc < nr && !kern.maskedB) {
				if buf == nil {
					buf = getSgemmBuf()
				}
				packB(buf.b[:kc*nr], tB, b, ldb, p0, j0, kc, nc, nr)
				bp, bks = &buf.b[0], nr
			} else {
				bp = &b[p0*ldb+j0]
			}
			for i0 := 0; i0 < m; i0 += mr {
				kern.fn(kc, &a[i0*ars+p0*aks], ars, aks, bp, bks, &c[i0*ldc+j0], ldc, min(mr, m-i0), nc, alpha, bt)
			}
		}
	}
	if buf != nil {
		putSgemmBuf(buf)
	}
}

// packB copies columns j0..j0+nc-1 of op(B), rows p0..p0+kc-1, into dst
// (dst[l·nr + j]), zero beyond the columns.
func packB(dst []float32, tB bool, b []float32, ldb, p0, j0, kc, nc, nr int) {
	if !tB {
		for l := range kc {
			row := dst[l*nr:][:nr]
			copy(row, b[(p0+l)*ldb+j0:][:nc])
			clear(row[nc:])
		}
		return
	}
	if nc < nr {
		clear(dst)
	}
	packTranspose(dst, nr, b[j0*ldb+p0:], ldb, nc, kc)
}

// packTranspose writes the transpose of the rows×cols block of src (row
// stride lds) to dst (row stride ldd), in 8×8 blocks with sgemmPackT and the
// ragged edges one value at a time.
func packTranspose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	r8, c8 := rows&^7, cols&^7
	if r8 > 0 && c8 > 0 {
		_ = src[(r8-1)*lds+c8-1]
		_ = dst[(c8-1)*ldd+r8-1]
		sgemmPackT(&dst[0], ldd, &src[0], lds, r8, c8)
	}
	for r := range rows {
		s := src[r*lds:][:cols]
		c0 := c8
		if r >= r8 {
			c0 = 0
		}
		for c := c0; c < cols; c++ {
			dst[c*ldd+r] = s[c]
		}
	}
}

// scaleRows sets c = beta·c (c = 0 for beta 0, whatever c held).
func scaleRows(m, n int, beta float32, c []float32, ldc int) {
	for i := range m {
		row := c[i*ldc:][:n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// sgemmParallelMin is the multiply-add count from which BLAS.Sgemm splits a
// product over goroutines: below it, starting them costs more than they save.
const sgemmParallelMin = 1 << 20

// BLAS is gonum's pure-Go BLAS with Sgemm on the assembly GEMM when the CPU
// has a kernel for it, for Gorgonia's own matrix products (gorgonia.Use) in
// the default build (OpenBLAS is its openblas-build counterpart).
type BLAS struct{ gonum.Implementation }

// Sgemm computes c = alpha·op(a)·op(b) + beta·c (row-major).
func (impl BLAS) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmSplit(impl.Implementation, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmSplit is Gorgonia's Sgemm: the assembly GEMM when the CPU has a kernel
// for it, fallback's otherwise. Unlike the fast ops' GEMM, which runs on one
// goroutine per batch shard, it splits a large product over GOMAXPROCS
// goroutines, as gonum's Sgemm does: Gorgonia runs one op at a time.
func sgemmSplit(fallback blas.Float32Level3, tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	kern := sgemmAsm
	if kern == nil {
		fallback.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	ta, tb := isTrans(tA), isTrans(tB)
	checkGEMM(ta, tb, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	dot := kern.useDot(ta, tb, m, n, k)
	w := runtime.GOMAXPROCS(0)
	if w < 2 || m*n*k < sgemmParallelMin {
		sgemmChecked(kern, dot, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// Split C into w blocks of whole tiles along its longer side (in tiles).
	mt, nt := (m+kern.mr-1)/kern.mr, (n+kern.nr-1)/kern.nr
	var wg sync.WaitGroup
	if mt >= nt {
		w = min(w, mt)
		wg.Add(w)
		for i := range w {
			i0, i1 := i*mt/w*kern.mr, min(m, (i+1)*mt/w*kern.mr)
			ao := i0 * lda
			if ta {
				ao = i0
			}
			go func() {
				defer wg.Done()
				sgemmChecked(kern, dot, ta, tb, i1-i0, n, k, alpha, a[ao:], lda, b, ldb, beta, c[i0*ldc:], ldc)
			}()
		}
	} else {
		w = min(w, nt)
		wg.Add(w)
		for i := range w {
			j0, j1 := i*nt/w*kern.nr, min(n, (i+1)*nt/w*kern.nr)
			bo := j0
			if tb {
				bo = j0 * ldb
			}
			go func() {
				defer wg.Done()
				sgemmChecked(kern, dot, ta, tb, m, j1-j0, k, alpha, a, lda, b[bo:], ldb, beta, c[j0:], ldc)
			}()
		}
	}
	wg.Wait()
}

func isTrans(t blas.Transpose) bool {
	switch t {
	case blas.NoTrans:
		return false
	case blas.Trans, blas.ConjTrans:
		return true
	}
	panic(fmt.Sprintf("sgemm: bad transpose %q", rune(t)))
}
