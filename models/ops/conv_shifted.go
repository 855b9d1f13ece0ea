package ops

import "slices"

// Stride-1 convolutions as shifted GEMMs over the zero-padded input, without
// im2col's k·k copies of every input plane and without col2im.
//
// Pad each input plane into a wp×hp plane (wp = w + 2·pad, hp = h + 2·pad)
// and compute the output in the same row width: output position
// q = oy·wp + ox reads padded position q + ki·wp + kj for kernel tap
// (ki, kj), a shift by a constant. So for each tap the output (K, oh·wp) gets
// W_tap (K×C) times the padded planes read from that shift (C rows of oh·wp
// values, row stride the plane size): a plain GEMM whose B is read in place.
// The last k-1 columns of every output row read across the row's end and are
// not kept: on AVX-512 one kernel (SgemmTapsAVX512) sums all taps of a tile
// in registers and stores only the image's columns, in place; on AVX2 one
// kernel (SgemmTapsAVX2) sums all taps of a tile into an (K, oh·wp) buffer
// copied out after; elsewhere the taps' GEMMs add into that buffer.
//
// Few input channels make thin GEMMs (depth C) that reload C once per tap, so
// part of im2col comes back where C is small (shiftPlan.ni, nj): with nj = k
// the GEMM's rows are (c, kj), a plane copied at k column offsets, and one
// GEMM per kernel row (depth C·k); with ni = nj = k it is im2col in the wp
// layout, one GEMM of depth C·k·k, every row one flat copy.
//
// The data gradient of a stride-1 convolution is itself a stride-1
// convolution: dy padded by k-1-pad, correlated with the filters flipped in
// both axes and their in and out channels swapped. The filter gradient
// multiplies dy, written in the wp row width with zeros in the dropped
// columns, by the same shifted rows transposed: dW_tap = dy_wp · rowsᵀ, or
// dW_tapᵀ = rows · dy_wpᵀ from 32 output channels (filterGradTransposed).
//
// Each output element sums its taps in a fixed order (tap after tap, the
// GEMM's own order within), so results do not depend on the workers.

// shiftPlan lays out one stride-1 convolution as shifted GEMMs.
type shiftPlan struct {
	g      *convGeom
	wp, hp int       // padded plane's width and height
	plane  int       // stored padded plane: hp·wp plus k-1 zeros the last taps read
	ni, nj int       // kernel rows and columns unrolled into the GEMM rows (1 or k)
	rows   int       // GEMM depth: c·ni·nj
	ld     int       // row stride of the GEMM's B
	n      int       // output positions computed per channel: oh·wp
	taps   int       // GEMMs per sample: (k/ni)·(k/nj)
	offs   []int     // each tap's shift
	segs   []tileSeg // the output rows' segments, for the taps kernel
}

// shiftable reports whether g runs as shifted GEMMs: stride 1 and a kernel
// larger than 1×1 (1×1 reads its input in place already), with fewer than 64
// input and output channels. im2col copies C·k·k values per output position
// for a GEMM of K·C·k·k multiply-adds per position, so its copy weighs 1/K of
// the product (col2im likewise for the data gradient). Measured on
// ResNet-20's 8×8 stage (64 channels, one worker, CPU time per 16 samples):
// im2col 0.72 ms forward, 0.92 data and 0.90 filter gradient against the
// shifted form's 1.25, 1.24 and 1.01 (its 8-value rows fill half of the taps
// kernel's 16-lane segments; a kernel variant taking four 8-value rows a tile
// only matched im2col), while at 16 and 32 channels the shifted form is
// 5-50% faster.
func (g *convGeom) shiftable() bool {
	return g.stride == 1 && g.k > 1 && g.c < 64 && g.oc < 64
}

// Which products a plan serves: they prefer different unrollings.
const (
	shiftForward    = iota // the forward convolution, or the data gradient's
	shiftFilterGrad        // the filter gradient
)

// newShiftPlan chooses how much of the kernel to unroll into the GEMM rows
// for the products of kind (shiftForward or shiftFilterGrad) on elements of
// type T. Measured per layer of ResNet-20 and LeNet-5 (AVX-512, one worker,
// CPU time), with these choices against the others:
//   - Products summed by the taps kernel (float32 on AVX-512, and on AVX2,
//     where no other unrolling was measured) pay nothing per tap beyond its
//     B pointer, so no unrolling, whose copies cost more than they save: 1,
//     3, 6, 16 and 32 channels, 5-40% faster than full.
//   - One GEMM per tap otherwise: depth C per tap from 16 channels, rows
//     (c, kj) while C·k stays under 64, full unrolling below.
//   - The filter gradient is one product per tap, as wide as the rows:
//     depth C from 16 channels on, rows (c, kj) below (LeNet's 6 channels:
//     3.5x faster than depth C, as fast as full unrolling).
func newShiftPlan[T elem](g *convGeom, kind int) shiftPlan {
	p := shiftPlan{g: g, wp: g.w + 2*g.pad, hp: g.h + 2*g.pad}
	p.plane = p.hp*p.wp + g.k - 1
	p.n = g.oh * p.wp
	switch {
	case g.c >= 16 || kind == shiftForward && tapsKernel[T]() != nil:
		return p.with(1, 1)
	case kind == shiftFilterGrad || g.c*g.k >= 64:
		return p.with(1, g.k)
	default:
		return p.with(g.k, g.k)
	}
}

// tapsKernel is the assembly kernel that sums all taps of a tile (shiftGEMM)
// for elements of type T, nil when there is none.
func tapsKernel[T elem]() *sgemmKernel {
	kern := sgemmAsm
	if _, ok := any(T(0)).(float32); !ok || kern == nil || kern.taps == nil && kern.tapsStrip == nil {
		return nil
	}
	return kern
}

// with sets the unrolling (ni, nj) and the sizes that follow from it.
func (p shiftPlan) with(ni, nj int) shiftPlan {
	p.ni, p.nj = ni, nj
	p.rows = p.g.c * ni * nj
	switch {
	case ni == 1 && nj == 1:
		p.ld = p.plane // B is the padded planes themselves
	case ni == 1:
		p.ld = p.hp * p.wp
	default:
		p.ld = p.n
	}
	p.taps = (p.g.k / ni) * (p.g.k / nj)
	p.offs = make([]int, p.taps)
	for t := range p.offs {
		p.offs[t] = p.shift(t)
	}
	p.segs = tileSegs(p.g, p.wp)
	return p
}

// shift is the offset of tap t's B in the rows: taps run over the kernel
// positions not unrolled, row-major.
func (p *shiftPlan) shift(t int) int {
	gk := p.g.k / p.nj // tap columns
	gi, gj := t/gk, t%gk
	return gi*p.wp + gj
}

// rowsLen is the length of the GEMM rows' buffer: none when B is the padded
// planes.
func (p *shiftPlan) rowsLen() int {
	if p.ni == 1 && p.nj == 1 {
		return 0
	}
	return p.rows * p.ld
}

// copyRows copies rows rows of cols values from src (row stride lds) to dst
// (row stride ldd): the padded planes' rows and back. One copy call per row
// of 8 to 34 values cost about as much as the taps' GEMM of ResNet's first
// stage took for the whole sample; the assembly loop moves them without a
// call each.
func copyRows[T elem](dst []T, ldd int, src []T, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	// The loops below and the assembly check no bounds.
	_ = dst[(rows-1)*ldd+cols-1]
	_ = src[(rows-1)*lds+cols-1]
	if d32, ok := any(dst).([]float32); ok && loopsAVX512 {
		copyRowsAVX512(&d32[0], ldd, &any(src).([]float32)[0], lds, rows, cols)
		return
	}
	for r := range rows {
		copy(dst[r*ldd:][:cols], src[r*lds:][:cols])
	}
}

// padInto copies sample x (C, H, W) into the interior of the padded planes
// xp, whose border the caller zeroed once (it is never written).
func padInto[T elem](p *shiftPlan, x, xp []T) {
	g := p.g
	for c := range g.c {
		copyRows(xp[c*p.plane+g.pad*p.wp+g.pad:], p.wp, x[c*g.h*g.w:], g.w, g.h, g.w)
	}
}

// buildRows writes the GEMM rows (c, zi, zj) for unrolled kernel positions:
// each one flat copy of the padded plane from offset zi·wp + zj.
func buildRows[T elem](p *shiftPlan, xp, z []T) {
	r := 0
	for c := range p.g.c {
		for zi := range p.ni {
			for zj := range p.nj {
				copy(z[r*p.ld:][:p.ld], xp[c*p.plane+zi*p.wp+zj:])
				r++
			}
		}
	}
}

// tapOrder calls f(i, o, c, a, b) for each filter value in the tap-major
// layout of the shifted GEMMs: a (K, taps·rows) matrix, tap after tap along
// each row, i = (o·taps + t)·rows + r, where row r = (c, zi, zj) of tap
// t = (gi, gj) is kernel position (a, b) = (gi+zi, gj+zj) of input channel c.
func tapOrder(p *shiftPlan, f func(i, o, c, a, b int)) {
	gk := p.g.k / p.nj
	for o := range p.g.oc {
		i := o * p.taps * p.rows
		for t := range p.taps {
			gi, gj := t/gk, t%gk
			for c := range p.g.c {
				for zi := range p.ni {
					for zj := range p.nj {
						f(i, o, c, gi+zi, gj+zj)
						i++
					}
				}
			}
		}
	}
}

// shiftWeights lays the filters w (K, C, k, k) out in tapOrder. With flip,
// w holds the filters of the convolution whose data gradient p computes:
// (p.g.c, p.g.oc, k, k), read flipped in both axes with in and out channels
// swapped.
func shiftWeights[T elem](p *shiftPlan, w []T, flip bool, dst []T) {
	g, k := p.g, p.g.k
	tapOrder(p, func(i, o, c, a, b int) {
		if flip {
			dst[i] = w[((c*g.oc+o)*k+k-1-a)*k+k-1-b]
		} else {
			dst[i] = w[((o*g.c+c)*k+a)*k+b]
		}
	})
}

// shiftBufs are one worker's buffers: the padded planes, the GEMM rows (nil
// when B is the planes) and the output (or output gradient) in the wp layout.
type shiftBufs[T elem] struct{ xp, z, yw []T }

// shiftScratch carves n workers' buffers after head values of scratch and
// zeroes the parts that are only ever written inside (padding, dropped
// columns).
func shiftScratch[T elem](ws *Workspace, p *shiftPlan, head, nw int) ([]T, []shiftBufs[T]) {
	xpLen, zLen, ywLen := p.g.c*p.plane, p.rowsLen(), p.g.oc*p.n
	per := xpLen + zLen + ywLen
	buf := scratch[T](ws, head+nw*per)
	bufs := make([]shiftBufs[T], nw)
	for i := range bufs {
		b := buf[head+i*per:][:per]
		bufs[i] = shiftBufs[T]{xp: b[:xpLen], yw: b[xpLen+zLen:]}
		if zLen > 0 {
			bufs[i].z = b[xpLen:][:zLen]
		}
		clear(bufs[i].xp)
		clear(bufs[i].yw)
	}
	return buf[:head], bufs
}

// gemmRows returns B: the rows for the taps' GEMMs of padded sample xp.
func gemmRows[T elem](p *shiftPlan, bf *shiftBufs[T]) []T {
	if bf.z == nil {
		return bf.xp
	}
	buildRows(p, bf.xp, bf.z)
	return bf.z
}

// shiftedConv computes y = conv(x, w) (or, with flip, the data gradient whose
// geometry p.g describes from the filters w of the forward convolution).
func shiftedConv[T elem](p *shiftPlan, ws *Workspace, x, w []T, flip bool, y []T) {
	g := p.g
	in, out, nwt := g.c*g.h*g.w, g.oc*g.oh*g.ow, g.oc*p.rows
	nw := ws.split(g.n)
	wre, bufs := shiftScratch[T](ws, p, p.taps*nwt, nw)
	shiftWeights(p, w, flip, wre)
	parallel(g.n, nw, func(wk, lo, hi int) {
		bf := &bufs[wk]
		for s := lo; s < hi; s++ {
			padInto(p, x[s*in:][:in], bf.xp)
			b := gemmRows(p, bf)
			shiftGEMM(p, wre, b, bf.yw, y[s*out:][:out])
		}
	})
}

// shiftGEMM computes y (K, oh, ow) = Σ_t wre_t · b[shift_t:] (rows×n, row
// stride ld) without the wp layout's last k-1 columns of each row. On
// AVX-512 one kernel call sums every tap of a tile in registers and stores
// the tile's image rows in place (tileSegs); on AVX2 one call sums every tap
// of 16 columns of yw, copied out after (shiftGEMMFlat). Elsewhere one GEMM per tap adds
// into yw (K, n) in the wp layout, copied out after: a tap's GEMM is as deep
// as the input has channels (16 in ResNet's first stage), and per call C's
// loads and stores would cost about a quarter of the multiply-adds.
func shiftGEMM[T elem](p *shiftPlan, wre, b, yw, y []T) {
	g := p.g
	m, ldw, ohw := g.oc, p.taps*p.rows, g.oh*g.ow
	kern := tapsKernel[T]()
	if kern != nil && kern.taps != nil {
		w32, b32, y32 := any(wre).([]float32), any(b).([]float32), any(y).([]float32)
		// Bounds the kernel does not check: the last tap's rows under the
		// last image row, and y.
		_ = b32[slices.Max(p.offs)+(p.rows-1)*p.ld+(g.oh-1)*p.wp+g.ow-1]
		_ = w32[m*ldw-1]
		_ = y32[m*ohw-1]
		segs := p.segs
		for s := 0; s < len(segs); s += 2 {
			s1, s2 := segs[s], tileSeg{boff: segs[s].boff, coff: segs[s].coff}
			if s+1 < len(segs) {
				s2 = segs[s+1]
			}
			for i0 := 0; i0 < m; i0 += kern.mr {
				kern.taps(p.rows, p.taps, &w32[i0*ldw], ldw, &b32[s1.boff], &p.offs[0], p.ld, s2.boff-s1.boff,
					&y32[i0*ohw+s1.coff], ohw, s2.coff-s1.coff, min(kern.mr, m-i0), s1.n, s2.n)
			}
		}
		return
	}
	if kern != nil {
		shiftGEMMFlat(p, kern.mr, kern.tapsStrip, any(wre).([]float32), any(b).([]float32), any(yw).([]float32))
	} else {
		for t := range p.taps {
			beta := T(1)
			if t == 0 {
				beta = 0
			}
			gemm(false, false, m, p.n, p.rows, wre[t*p.rows:], ldw, b[p.offs[t]:], p.ld, beta, yw, p.n)
		}
	}
	copyRows(y, g.ow, yw, p.wp, g.oc*g.oh, g.ow)
}

// shiftGEMMFlat is shiftGEMM's product on a strip kernel (sgemmKernel's
// tapsStrip, tiles of mr rows): yw (K, n) in the wp layout, 16 columns a
// call, every tap summed in registers. For each strip of columns the row
// tiles run in turn, so the strip's B rows stay in cache.
func shiftGEMMFlat(p *shiftPlan, mr int, strip tapsStripFunc, w, b, yw []float32) {
	m, ldw := p.g.oc, p.taps*p.rows
	lastStrip := (p.n - 1) / 16 * 16
	// Bounds the kernel does not check: the last tap's rows, read 16 values
	// from the last strip's start, past b into the rest of its worker's
	// scratch (shiftScratch: xp, z, then yw); w and yw.
	_ = b[:cap(b)][slices.Max(p.offs)+(p.rows-1)*p.ld+lastStrip+15]
	_ = w[m*ldw-1]
	_ = yw[m*p.n-1]
	for j := 0; j < p.n; j += 16 {
		n := min(16, p.n-j)
		for i0 := 0; i0 < m; i0 += mr {
			strip(p.rows, p.taps, &w[i0*ldw], ldw, &b[j], &p.offs[0], p.ld, &yw[i0*p.n+j], p.n, min(mr, m-i0), n)
		}
	}
}

// tileSeg is up to 16 output columns of one image row: n values from
// position coff of a channel's output plane, read from position boff of the
// wp layout.
type tileSeg struct{ boff, coff, n int }

// tileSegs cuts the output rows into segments of 16 columns, the taps
// kernel's vectors; the kernel takes them two at a time: one row of 17 to 32
// values (ResNet's 32×32 stage), or two rows of up to 16 (its 16×16 stage).
func tileSegs(g *convGeom, wp int) []tileSeg {
	var segs []tileSeg
	for oy := range g.oh {
		for j := 0; j < g.ow; j += 16 {
			segs = append(segs, tileSeg{boff: oy*wp + j, coff: oy*g.ow + j, n: min(16, g.ow-j)})
		}
	}
	return segs
}

// dataGradGeom is the stride-1 convolution that computes g's data gradient:
// dy padded by k-1-pad, out channels and input size swapped with g's. ok is
// false when pad > k-1 (dy would need negative padding).
func (g *convGeom) dataGradGeom() (convGeom, bool) {
	if !g.shiftable() || g.pad > g.k-1 {
		return convGeom{}, false
	}
	return g.transposed(), true
}

// transposed is dataGradGeom's geometry, for a stride-1 g with pad <= k-1.
func (g *convGeom) transposed() convGeom {
	return convGeom{n: g.n, c: g.oc, h: g.oh, w: g.ow, k: g.k, stride: 1, pad: g.k - 1 - g.pad, oc: g.c, oh: g.h, ow: g.w}
}

// shiftedFilterGrad computes dw = Σ_s dy_s·rows_sᵀ tap by tap, in the chunks
// of convFilterGrad, then reorders the (tap, K, rows) sums into (K, C, k, k).
func shiftedFilterGrad[T elem](p *shiftPlan, ws *Workspace, x, dy []T, dws [][]T) {
	g, k := p.g, p.g.k
	in, out, nwt := g.c*g.h*g.w, g.oc*g.oh*g.ow, g.oc*p.rows
	size := p.taps * nwt
	ng, cg := groupChunks(g.n, len(dws))
	chunks := cg * len(dws)
	nw := ws.split(chunks)
	head, bufs := shiftScratch[T](ws, p, (chunks+1)*size, nw)
	parts, sum := head[:chunks*size], head[chunks*size:]
	trans := filterGradTransposed(g.oc)
	parallel(chunks, nw, func(wk, lo, hi int) {
		bf := &bufs[wk]
		for ch := lo; ch < hi; ch++ {
			acc := parts[ch*size:][:size]
			s0, s1 := chunkSpan(ch, ng, cg)
			for s := s0; s < s1; s++ {
				padInto(p, x[s*in:][:in], bf.xp)
				b := gemmRows(p, bf)
				beta := T(1)
				if s == s0 {
					beta = 0
				}
				if trans {
					// dy_sᵀ in the wp layout's positions (p.n, K), zero rows
					// at the padding's columns.
					for oy := range g.oh {
						transposeInto(bf.yw[oy*p.wp*g.oc:], g.oc, dy[s*out+oy*g.ow:], g.oh*g.ow, g.oc, g.ow)
					}
					for t := range p.taps { // tap t's (rows, K) block of acc
						gemm(false, false, p.rows, g.oc, p.n, b[p.offs[t]:], p.ld, bf.yw, g.oc, beta, acc[t*nwt:], g.oc)
					}
					continue
				}
				copyRows(bf.yw, p.wp, dy[s*out:][:out], g.ow, g.oc*g.oh, g.ow)
				for t := range p.taps { // into tap t's columns of acc, in tapOrder
					gemm(false, true, g.oc, p.rows, p.n, bf.yw, p.n, b[p.offs[t]:], p.ld, beta, acc[t*p.rows:], p.taps*p.rows)
				}
			}
		}
	})
	for gi, dw := range dws {
		sumParts(ws, sum, parts[gi*cg*size:], cg)
		if trans { // sum holds (tap, rows, K) blocks
			tapOrder(p, func(i, o, c, a, b int) { dw[((o*g.c+c)*k+a)*k+b] = sum[(i-o*p.taps*p.rows)*g.oc+o] })
			continue
		}
		tapOrder(p, func(i, o, c, a, b int) { dw[((o*g.c+c)*k+a)*k+b] = sum[i] })
	}
}

// filterGradTransposed reports whether a filter gradient with k output
// channels is taken transposed, dWᵀ = rows·dyᵀ: dyᵀ is (positions, k), a B
// the outer-product kernel reads in place in whole 32-column panels from 32
// channels on, where dW = dy·rowsᵀ would pack the rows transposed once per
// tap (ResNet's 16×16 stage: 30% faster). Below 32 channels the panel would
// be half empty; products that go to OpenBLAS keep the one form.
func filterGradTransposed(k int) bool { return k >= 32 && !externalFloat32() }

// transposeInto writes the transpose of the rows×cols block of src (row
// stride lds) to dst (row stride ldd).
func transposeInto[T elem](dst []T, ldd int, src []T, lds, rows, cols int) {
	if d32, ok := any(dst).([]float32); ok {
		packTranspose(d32, ldd, any(src).([]float32), lds, rows, cols)
		return
	}
	for r := range rows {
		for c, v := range src[r*lds:][:cols] {
			dst[c*ldd+r] = v
		}
	}
}
