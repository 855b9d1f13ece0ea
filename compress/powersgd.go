package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/par"
)

// powerSGD is PowerSGD (Vogels et al., NeurIPS 2019), following PyTorch's
// ddp_comm_hooks.powerSGD_hook: each packed tensor is viewed as a matrix M
// (n x m: rows = Shape[0], columns = the rest, so a conv weight is
// out x (in*kh*kw)) and approximated by P Q^T of rank r through two all-reduce
// rounds per step, both driven by the exchange:
//
//	round 0: M = g + e (error feedback); Q orthonormalised; P = M Q     -> sum
//	round 1: P = sum/N, orthonormalised (Gram-Schmidt); Q = M^T P        -> sum
//	decompress: Q = sum/N (kept for warm start); Mhat = P Q^T; e = M - Mhat
//
// Mhat is the same on every worker (it is built from the two all-reduced
// factors); e is each worker's own (local M minus global Mhat), as in PyTorch.
//
// Choices worth knowing:
//   - The rank of each matrix is min(r, n, m), as in PyTorch and epfml/powersgd.
//   - A matrix is compressed only when (n+m)*r*min_compression_rate < n*m.
//     Otherwise it travels dense inside round 0's payload (float32, summed and
//     divided by N) where PyTorch puts uncompressed tensors in an all-reduce of
//     their own: same bytes, one collective fewer. Dense matrices keep no
//     residual: PyTorch's bucket-wide error gives them e = M - mean(M), whose
//     mean over workers is zero, so it cannot change the averaged update.
//   - Q is orthonormalised before P = M Q on every step (fresh or reused), as
//     PyTorch does; with warm start Q is the previous step's mean Q.
//   - Gram-Schmidt divides by norm+epsilon; a column whose norm is exactly zero
//     (a vanishing gradient with epsilon 0) stays zero instead of becoming NaN,
//     which is what PyTorch's ZeroDivisionError branch intends. Norms and
//     projections are accumulated in float64.
//   - P is divided by N before the orthogonalisation (ALGORITHMS.md: mean(P));
//     PyTorch skips the division, which only matters through epsilon.
//   - Before step start_iter every round-0 payload is the dense gradient (a
//     vanilla all-reduce), round 1 sends nothing and the residual is left
//     alone, as in PyTorch. PyTorch's start_iter > 1 requirement (DDP rebuilds
//     its buckets after the first step) does not apply here.
//
// P and Q are stored column by column (r x n and r x m), so the products are
// unit-stride loops over the rows of M (psgd_amd64.s on CPUs with AVX).
//
// The residual is not written at the end of a step: e = M - P Q^T is known
// from M and the step's mean factors, so the next step's round 0 computes
// M = g + (M - P Q^T) row by row in one pass over M (the same float32
// arithmetic, in the same order). Each compressed value then crosses memory
// about 24 bytes a step instead of 40. State and Residual write e out when
// asked. On the run on the workers' mean gradient (fused steps) round 1's P
// is round 0's, and a rank-1 matrix's M^T P is summed in round 0's pass over
// M (onePass): M is read once a step instead of twice.
type powerSGD struct {
	cfg  PowerSGDConfig
	seed int64
	mats []psgdMatrix
	size int // packed length
	len0 int // steady round 0 payload: every P and every dense matrix
	len1 int // steady round 1 payload: every Q

	m []float32 // the step's M = g (+ e), packed
	e []float32 // residual, packed; nil without error feedback; stale while lazy
	p []float32 // the step's mean P, orthonormalised, per compressed matrix
	q []float32 // Q per compressed matrix: after a step, the mean Q (warm start)

	// lazy: the compressed matrices' residual is M - P Q^T of the last
	// step (m, p, lastQ), not yet written to e.
	lazy  bool
	lastQ []float32
	r0    []float32 // round 0's combined sums, read again by Decompress

	pay0, pay1   []float32 // payload buffers (all-reduced in place)
	wire0, wire1 []int64   // steady TensorWire of rounds 0 and 1
	vanWire0     []int64   // vanilla TensorWire of round 0
	vanWire1     []int64   // vanilla TensorWire of round 1 (zeros)

	pcg *rand.PCG
	rng *rand.Rand
	// spread > 0: the run on the workers' mean gradient (ExchangeMean,
	// setMeanRun), whose large matrices' products are split that many ways
	// (1: not split); 0 outside it.
	spread  int
	vanilla bool      // the last step was a vanilla all-reduce
	sent    []float32 // Sent()'s buffer, allocated on first use
	row     []float32 // decodeState's scratch row

	// On the run on the workers' mean gradient round 1's P is round 0's
	// own. Rank-1 matrices then add M^T P, with the P not yet normalised, in
	// round 0's pass over M, one sum per block of psgdAccRows rows in acc (at
	// the matrix's acc offset), and round 1 adds the blocks' sums and scales
	// them instead of reading M again: see onePass. accLen is acc's length
	// once allocated.
	acc    []float32
	accLen int
}

// psgdMatrix is one packed tensor viewed as an n x m matrix.
type psgdMatrix struct {
	off  int // offset in the packed buffer
	flat int // offset in the worker's flat gradient
	n, m int
	r    int // rank; 0 when the matrix travels dense
	p    int // offset of P (r x n) in powerSGD.p
	q    int // offset of Q (r x m) in powerSGD.q and in round 1's payload
	pay0 int // offset of P, or of the dense values, in round 0's payload
	acc  int // offset of the rank-1 one-pass sums (one row of m per block) in powerSGD.acc
}

// powerSGDEF is powerSGD with error feedback: only it exposes the residual.
type powerSGDEF struct{ *powerSGD }

var (
	_ Compressor      = (*powerSGD)(nil)
	_ CombinedDecoder = (*powerSGD)(nil)
	_ ErrorFeedback   = powerSGDEF{}
	_ flatEncoder     = (*powerSGD)(nil)
	_ flatDecoder     = (*powerSGD)(nil)
	_ stateDecoder    = (*powerSGD)(nil)
)

// psgdCompressed applies PyTorch's rule: compress an n x m matrix at rank r
// only when (n+m)*r*rate < n*m. It returns the rank to use, 0 for dense.
func psgdCompressed(n, m, rank int, rate float64) int {
	r := min(rank, n, m)
	if float64((n+m)*r)*rate < float64(n*m) {
		return r
	}
	return 0
}

// newPowerSGD builds one worker's PowerSGD. The worker index plays no part:
// every worker draws the same Q from seed.
func newPowerSGD(cfg Config, tensors []Tensor, _, _ int, seed int64, _ Hyper) (Compressor, error) {
	pc := cfg.PowerSGD
	switch {
	case pc.Rank < 1:
		return nil, fmt.Errorf("compress.powersgd.rank: %d: expected an integer >= 1", pc.Rank)
	case pc.StartIter < 0:
		return nil, fmt.Errorf("compress.powersgd.start_iter: %d: expected a step >= 0", pc.StartIter)
	case !(pc.MinCompressionRate >= 0) || math.IsInf(pc.MinCompressionRate, 1):
		return nil, fmt.Errorf("compress.powersgd.min_compression_rate: %v: expected a finite rate >= 0", pc.MinCompressionRate)
	case !(pc.Epsilon >= 0) || math.IsInf(pc.Epsilon, 1):
		return nil, fmt.Errorf("compress.powersgd.epsilon: %v: expected a finite value >= 0", pc.Epsilon)
	}
	c := &powerSGD{cfg: pc, seed: seed, size: packedSize(tensors), vanilla: true}
	var np, nq int
	for _, t := range tensors {
		if len(t.Shape) == 0 || t.Shape[0] <= 0 || t.Size%t.Shape[0] != 0 {
			return nil, fmt.Errorf("powersgd: tensor %s: shape %v does not fit its %d values", t.Name, t.Shape, t.Size)
		}
		x := psgdMatrix{off: t.Offset, flat: t.FlatOffset, n: t.Shape[0], m: t.Size / t.Shape[0], p: np, q: nq, pay0: c.len0}
		x.r = psgdCompressed(x.n, x.m, pc.Rank, pc.MinCompressionRate)
		if x.r == 1 {
			x.acc = c.accLen
			c.accLen += psgdBlocks(x.n) * x.m
		}
		if x.r > 0 {
			np += x.r * x.n
			nq += x.r * x.m
			c.len0 += x.r * x.n
			c.wire0 = append(c.wire0, int64(4*x.r*x.n))
			c.wire1 = append(c.wire1, int64(4*x.r*x.m))
		} else {
			c.len0 += t.Size
			c.wire0 = append(c.wire0, int64(4*t.Size))
			c.wire1 = append(c.wire1, 0)
		}
		c.vanWire0 = append(c.vanWire0, int64(4*t.Size))
		c.mats = append(c.mats, x)
	}
	c.len1 = nq
	c.vanWire1 = make([]int64, len(tensors))
	c.m = make([]float32, c.size)
	if pc.ErrorFeedback {
		c.e = make([]float32, c.size)
		c.lastQ = make([]float32, nq)
	}
	c.p = make([]float32, np)
	c.q = make([]float32, nq)
	c.pay0 = make([]float32, c.len0)
	c.pay1 = make([]float32, c.len1)
	c.pcg = rand.NewPCG(0, 0)
	c.rng = rand.New(c.pcg)
	if pc.WarmStart {
		// The draw a cold start would make on the first compressed step, so
		// warm and cold start agree on that step.
		c.drawQ(pc.StartIter)
	}
	if pc.ErrorFeedback {
		return powerSGDEF{c}, nil
	}
	return c, nil
}

// Needs: P and Q are summed over the workers; the residual is taken against
// the aggregated P, so PowerSGD keeps it itself.
func (c *powerSGD) Needs() Needs { return Needs{Collective: dist.OpAllReduce, Rounds: 2} }

// Steady reports whether PowerSGD compresses at this step (past start_iter).
func (c *powerSGD) Steady(info StepInfo) bool { return info.Step >= c.cfg.StartIter }

// drawQ fills every Q with i.i.d. standard normal values from (seed, step):
// the same on every worker, different at every step.
func (c *powerSGD) drawQ(step int) {
	c.pcg.Seed(uint64(c.seed), uint64(step))
	for i := range c.q {
		c.q[i] = float32(c.rng.NormFloat64())
	}
}

func (c *powerSGD) Encode(r int, grad []float32, prev Combined, info StepInfo) (Payload, error) {
	switch {
	case r == 0 && len(grad) != c.size:
		return Payload{}, fmt.Errorf("powersgd: gradient has %d values, want %d", len(grad), c.size)
	case r == 0 && !c.Steady(info):
		// Vanilla all-reduce of the gradient, residual untouched (PyTorch).
		// The gradient is scratch, so it is the payload itself: no buffer of
		// the full size is kept for the warm-up alone.
		if c.e != nil {
			c.writeResidual() // before M changes (vanilla steps precede the compressed ones)
			copy(c.m, grad)   // for Compensated and Sent
		}
		return Payload{Floats: grad, Wire: int64(4 * c.size), TensorWire: c.vanWire0}, nil
	case r == 0:
		return c.round0(grad, false, info.Step), nil
	case r == 1 && !c.Steady(info):
		c.r0 = prev.Floats
		return Payload{Floats: c.pay1[:0], TensorWire: c.vanWire1}, nil
	case r == 1:
		return c.round1(prev)
	}
	return Payload{}, fmt.Errorf("powersgd: round %d: only rounds 0 and 1 exist", r)
}

// encodeFlat is Encode's round 0 on the worker's flat gradient, when
// PowerSGD compresses at this step (the vanilla all-reduce sends the packed
// gradient itself); it reads grad and writes nothing there.
func (c *powerSGD) encodeFlat(grad []float32, info StepInfo) (Payload, bool, error) {
	if !c.Steady(info) {
		return Payload{}, false, nil
	}
	return c.round0(grad, true, info.Step), true, nil
}

// round0 computes M = g (+ e) and P = M Q for every compressed matrix, and
// copies the dense matrices into the payload. grad is the packed gradient,
// or with flat the worker's flat one.
func (c *powerSGD) round0(grad []float32, flat bool, step int) Payload {
	if !c.cfg.WarmStart {
		c.drawQ(step)
	}
	for _, t := range c.mats {
		size := t.n * t.m
		src := t.off
		if flat {
			src = t.flat
		}
		g, mm := grad[src:src+size], c.m[t.off:t.off+size]
		if t.r == 0 {
			copy(mm, g)
			copy(c.pay0[t.pay0:t.pay0+size], g)
			continue
		}
		q := c.q[t.q : t.q+t.r*t.m]
		psgdGramSchmidt(q, t.m, t.r, c.cfg.Epsilon)
		p := c.pay0[t.pay0 : t.pay0+t.r*t.n]
		one := c.onePass(t)
		if one && c.acc == nil {
			c.acc = make([]float32, c.accLen)
		}
		// Split by blocks of rows, so that the one pass's sums do not depend
		// on how the blocks are split.
		c.split(t, psgdBlocks(t.n), func(blo, bhi int) {
			var buf [psgdCoefBuf]float32
			coef := psgdCoef(&buf, t.r)
			var acc []float32
			for i := blo * psgdAccRows; i < min(bhi*psgdAccRows, t.n); i++ {
				if one && i%psgdAccRows == 0 {
					b := t.acc + i/psgdAccRows*t.m
					acc = c.acc[b : b+t.m]
					clear(acc)
				}
				// Compensate one row and use it while it is in cache.
				row := mm[i*t.m : (i+1)*t.m]
				switch {
				case c.lazy && t.r <= 2:
					// Ranks 1 and 2: compensate and multiply in one pass.
					for k := range coef {
						coef[k] = c.p[t.p+k*t.n+i]
					}
					var dots [2]float32
					psgdCompensateDot(row, g[i*t.m:(i+1)*t.m], c.lastQ[t.q:], q, t.m, coef, &dots)
					for k, d := range dots[:t.r] {
						p[k*t.n+i] = d
					}
					if one {
						coef[0] = dots[0]
						psgdOuterAdd(acc, t.m, coef, row)
					}
					continue
				case c.lazy:
					// M = g + (M - P Q^T) of the last step.
					for k := range coef {
						coef[k] = c.p[t.p+k*t.n+i]
					}
					psgdCompensate(row, g[i*t.m:(i+1)*t.m], c.lastQ[t.q:], t.m, coef)
				case c.e != nil:
					psgdAdd(row, g[i*t.m:(i+1)*t.m], c.e[t.off+i*t.m:t.off+(i+1)*t.m])
				default:
					copy(row, g[i*t.m:(i+1)*t.m])
				}
				k := 0
				for ; k+2 <= t.r; k += 2 {
					p[k*t.n+i], p[(k+1)*t.n+i] = psgdDot2(row, q[k*t.m:(k+1)*t.m], q[(k+1)*t.m:(k+2)*t.m])
				}
				if k < t.r {
					p[k*t.n+i] = psgdDot(row, q[k*t.m:(k+1)*t.m])
				}
				if one {
					coef[0] = p[i]
					psgdOuterAdd(acc, t.m, coef, row)
				}
			}
		})
	}
	c.lazy = false // e is stale until this step's decode
	return Payload{Floats: c.pay0[:c.len0], Wire: int64(4 * c.len0), TensorWire: c.wire0}
}

// round1 turns the summed P into the orthonormalised mean P and computes
// Q = M^T P for every compressed matrix.
func (c *powerSGD) round1(prev Combined) (Payload, error) {
	if len(prev.Floats) != c.len0 || prev.Workers < 1 {
		return Payload{}, fmt.Errorf("powersgd: round 0 combined %d values from %d workers, want %d", len(prev.Floats), prev.Workers, c.len0)
	}
	c.r0 = prev.Floats
	inv := 1 / float32(prev.Workers)
	for _, t := range c.mats {
		if t.r == 0 {
			continue
		}
		p := c.p[t.p : t.p+t.r*t.n]
		for i, v := range prev.Floats[t.pay0 : t.pay0+t.r*t.n] {
			p[i] = v * inv
		}
		q := c.pay1[t.q : t.q+t.r*t.m]
		if c.onePass(t) && prev.Workers == 1 { // P is round 0's own
			// Q = M^T P / (|P| + epsilon), the sum from round 0.
			var ss float64
			for _, v := range p {
				ss += float64(v) * float64(v)
			}
			psgdGramSchmidt(p, t.n, t.r, c.cfg.Epsilon)
			c.scaleAcc(t, q, math.Sqrt(ss)+c.cfg.Epsilon)
			continue
		}
		psgdGramSchmidt(p, t.n, t.r, c.cfg.Epsilon)
		clear(q)
		// Split by columns of M: each element of Q sums over the rows in
		// the same order however the columns are split.
		c.split(t, t.m, func(lo, hi int) {
			var buf [psgdCoefBuf]float32
			coef := psgdCoef(&buf, t.r)
			for i := 0; i < t.n; i++ {
				row := c.m[t.off+i*t.m : t.off+(i+1)*t.m]
				for k := range coef {
					coef[k] = p[k*t.n+i]
				}
				psgdOuterAdd(q[lo:], t.m, coef, row[lo:hi])
			}
		})
	}
	return Payload{Floats: c.pay1[:c.len1], Wire: int64(4 * c.len1), TensorWire: c.wire1}, nil
}

// DecodeAdd is not defined for PowerSGD: its payloads decode only together
// (DecodeMean).
func (c *powerSGD) DecodeAdd(Payload, []float32, StepInfo) error {
	return fmt.Errorf("powersgd: a payload cannot be decoded on its own")
}

// DecodeMean writes P (sum Q / N)^T, the mean approximation, and with error
// feedback the residual M - that.
func (c *powerSGD) DecodeMean(last Combined, dst []float32, info StepInfo) error {
	if len(dst) != c.size || last.Workers < 1 {
		return fmt.Errorf("powersgd: decompress into %d values from %d workers, want %d", len(dst), last.Workers, c.size)
	}
	return c.decode(last, dst, info, false)
}

// decodeFlat is DecodeMean into the worker's flat gradient, each tensor at
// its FlatOffset (flatDecoder): the exchange then need not copy the mean out
// of a packed buffer.
func (c *powerSGD) decodeFlat(last Combined, grad []float32, info StepInfo) (bool, error) {
	if last.Workers < 1 {
		return false, fmt.Errorf("powersgd: decompress from %d workers", last.Workers)
	}
	return true, c.decode(last, grad, info, true)
}

// decode is DecodeMean, writing each tensor at its packed offset in dst or
// with flat at its FlatOffset.
func (c *powerSGD) decode(last Combined, dst []float32, info StepInfo, flat bool) error {
	inv := 1 / float32(last.Workers)
	if !c.Steady(info) {
		if len(c.r0) != c.size || len(last.Floats) != 0 {
			return fmt.Errorf("powersgd: vanilla step combined %d and %d values, want %d and 0", len(c.r0), len(last.Floats), c.size)
		}
		if !flat {
			for i, v := range c.r0 {
				dst[i] = v * inv
			}
		} else {
			for _, t := range c.mats {
				d := dst[t.flat : t.flat+t.n*t.m]
				for i, v := range c.r0[t.off : t.off+t.n*t.m] {
					d[i] = v * inv
				}
			}
		}
		c.vanilla = true
		return nil
	}
	if len(last.Floats) != c.len1 || len(c.r0) != c.len0 {
		return fmt.Errorf("powersgd: step combined %d and %d values, want %d and %d", len(c.r0), len(last.Floats), c.len0, c.len1)
	}
	for i, v := range last.Floats {
		c.q[i] = v * inv
	}
	for _, t := range c.mats {
		size := t.n * t.m
		base := t.off
		if flat {
			base = t.flat
		}
		if t.r == 0 {
			for i, v := range c.r0[t.pay0 : t.pay0+size] {
				dst[base+i] = v * inv
			}
			continue
		}
		c.split(t, t.n, func(ilo, ihi int) {
			var buf [psgdCoefBuf]float32
			coef := psgdCoef(&buf, t.r)
			for i := ilo; i < ihi; i++ {
				c.lowRankRow(t, i, dst[base+i*t.m:base+(i+1)*t.m], coef)
			}
		})
	}
	c.keepResidual()
	c.vanilla = false
	return nil
}

// keepResidual records e = M - Mhat (local M, global Mhat) for the next
// step, without writing it: see the type's comment.
func (c *powerSGD) keepResidual() {
	if c.e != nil {
		copy(c.lastQ, c.q)
		c.lazy = true
	}
}

// writeResidual writes the residual the last step left into e.
func (c *powerSGD) writeResidual() {
	if !c.lazy {
		return
	}
	for _, t := range c.mats {
		if t.r == 0 {
			continue
		}
		c.row = slices.Grow(c.row[:0], t.m)[:t.m]
		coef := make([]float32, t.r)
		for i := 0; i < t.n; i++ {
			for k := range coef {
				coef[k] = c.p[t.p+k*t.n+i]
			}
			lo, hi := t.off+i*t.m, t.off+(i+1)*t.m
			psgdLowRankSub(c.row, c.e[lo:hi], c.m[lo:hi], c.lastQ[t.q:], t.m, coef)
		}
	}
	c.lazy = false
}

// decodeState does what DecodeMean does to the compressor's state (the mean
// Q for the warm start, the residual, the vanilla flag) without writing the
// mean: for a worker that only contributes.
func (c *powerSGD) decodeState(last Combined, info StepInfo) error {
	if last.Workers < 1 {
		return fmt.Errorf("powersgd: decompress from %d workers", last.Workers)
	}
	if !c.Steady(info) {
		if len(c.r0) != c.size || len(last.Floats) != 0 {
			return fmt.Errorf("powersgd: vanilla step combined %d and %d values, want %d and 0", len(c.r0), len(last.Floats), c.size)
		}
		c.vanilla = true
		return nil
	}
	if len(last.Floats) != c.len1 || len(c.r0) != c.len0 {
		return fmt.Errorf("powersgd: step combined %d and %d values, want %d and %d", len(c.r0), len(last.Floats), c.len0, c.len1)
	}
	inv := 1 / float32(last.Workers)
	for i, v := range last.Floats {
		c.q[i] = v * inv
	}
	c.keepResidual()
	c.vanilla = false
	return nil
}

// psgdSplitMin is the smallest matrix (values) whose products split: below
// it a hand-off costs more than the second core saves.
const psgdSplitMin = 1 << 15

// split runs f over [0, n) (rows, blocks of rows or columns of matrix t), in
// spread parts on the shared helpers when t is large enough; every element is
// computed by the same arithmetic in either case.
func (c *powerSGD) split(t psgdMatrix, n int, f func(lo, hi int)) {
	if c.spread <= 1 || t.n*t.m < psgdSplitMin {
		f(0, n)
		return
	}
	par.Default().Run(n, c.spread, func(_, lo, hi int) { f(lo, hi) })
}

// onePass reports whether matrix t's Q comes from round 0's pass over M:
// on the run on the mean gradient (spread > 0), at rank 1. There P's normalisation
// is a single factor, so M^T P scaled by it is M^T times the normalised P.
// (At higher ranks Gram-Schmidt mixes P's columns, and undoing that after
// the product loses precision when they are nearly parallel.)
func (c *powerSGD) onePass(t psgdMatrix) bool { return psgdOnePass && c.spread > 0 && t.r == 1 }

// psgdOnePass: BenchmarkPowerSGDMeanRun turns the one pass off to time both.
var psgdOnePass = true

// psgdAccRows is the block of rows whose M^T P one sum holds in the one pass.
const psgdAccRows = 64

// psgdBlocks is the number of blocks of psgdAccRows rows in n rows.
func psgdBlocks(n int) int { return (n + psgdAccRows - 1) / psgdAccRows }

// scaleAcc writes matrix t's Q from round 0's sums into q: the blocks' sums
// added in order, then divided by d, P's norm plus epsilon, as Gram-Schmidt
// divides P (zero when d is).
func (c *powerSGD) scaleAcc(t psgdMatrix, q []float32, d float64) {
	clear(q)
	if d == 0 {
		return
	}
	for b := range psgdBlocks(t.n) {
		psgdAdd(q, q, c.acc[t.acc+b*t.m:t.acc+(b+1)*t.m])
	}
	inv := 1 / d
	for j, v := range q {
		q[j] = float32(float64(v) * inv)
	}
}

// lowRankRow writes row i of P Q^T for matrix t into out. coef is scratch
// of length t.r.
func (c *powerSGD) lowRankRow(t psgdMatrix, i int, out, coef []float32) {
	for k := range coef {
		coef[k] = c.p[t.p+k*t.n+i]
	}
	psgdLowRankSub(out, nil, nil, c.q[t.q:], t.m, coef)
}

// psgdCoefBuf is the rank whose coefficients fit a row's stack buffer.
const psgdCoefBuf = 16

// psgdCoef returns r coefficients' scratch: buf's when they fit.
func psgdCoef(buf *[psgdCoefBuf]float32, r int) []float32 {
	if r <= psgdCoefBuf {
		return buf[:r]
	}
	return make([]float32, r)
}

// State holds the residual (with error feedback) and Q (with warm start; a
// cold start redraws Q from the seed and the step). The buffers are aliased.
func (c *powerSGD) State() map[string][]float32 {
	st := map[string][]float32{}
	if c.e != nil {
		c.writeResidual()
		st["residual"] = c.e
	}
	if c.cfg.WarmStart {
		st["q"] = c.q
	}
	return st
}

func (c *powerSGD) SetState(st map[string][]float32) error {
	want := c.State()
	for k, v := range st {
		w, ok := want[k]
		if !ok {
			return fmt.Errorf("powersgd: unknown state %q", k)
		}
		if len(v) != len(w) {
			return fmt.Errorf("powersgd: state %q has %d values, want %d", k, len(v), len(w))
		}
	}
	for k, w := range want {
		v, ok := st[k]
		if !ok {
			return fmt.Errorf("powersgd: state %q is missing", k)
		}
		copy(w, v)
	}
	return nil
}

// Compensated is the last step's M = g + e (aliased).
func (c powerSGDEF) Compensated() []float32 { return c.m }

// Residual is e = M - Mhat (aliased).
func (c powerSGDEF) Residual() []float32 {
	c.writeResidual()
	return c.e
}

// Sent is the last step's Mhat, the approximation every worker applies (the
// local M for dense matrices and vanilla steps, which carry no residual). It
// is recomputed on demand, with the arithmetic Decompress used, so the step
// itself pays nothing for it.
func (c powerSGDEF) Sent() []float32 {
	if c.sent == nil {
		c.sent = make([]float32, c.size)
	}
	if c.vanilla {
		copy(c.sent, c.m)
		return c.sent
	}
	for _, t := range c.mats {
		if t.r == 0 {
			copy(c.sent[t.off:t.off+t.n*t.m], c.m[t.off:t.off+t.n*t.m])
			continue
		}
		coef := make([]float32, t.r)
		for i := 0; i < t.n; i++ {
			c.lowRankRow(t, i, c.sent[t.off+i*t.m:t.off+(i+1)*t.m], coef)
		}
	}
	return c.sent
}

// psgdGramSchmidt orthonormalises the r columns (each n long, stored one after
// the other) of a in place, modified Gram-Schmidt as PyTorch's
// _orthogonalize_gram_schmidt: normalise column k by norm+eps, then remove its
// projection from the later columns. A zero column stays zero.
func psgdGramSchmidt(a []float32, n, r int, eps float64) {
	for k := 0; k < r; k++ {
		col := a[k*n : (k+1)*n]
		var ss float64
		for _, v := range col {
			ss += float64(v) * float64(v)
		}
		d := math.Sqrt(ss) + eps
		if d == 0 {
			continue // all zeros (float32 squares cannot underflow in float64)
		}
		inv := 1 / d
		for i, v := range col {
			col[i] = float32(float64(v) * inv)
		}
		for j := k + 1; j < r; j++ {
			other := a[j*n : (j+1)*n]
			var proj float64
			for i, v := range col {
				proj += float64(v) * float64(other[i])
			}
			for i, v := range col {
				other[i] = float32(float64(other[i]) - proj*float64(v))
			}
		}
	}
}

// psgdDot is the float32 dot product of two equally long vectors, summed in
// an order fixed by the length alone: eight partial sums over i mod 8, then
// combined pairwise. (gonum's assembly dot product first steps to an aligned
// address, so its order, and the rounding, followed where the allocator put
// the slices: the same step could give different bits from run to run.)
func psgdDot(x, y []float32) float32 {
	y = y[:len(x)]
	var s [8]float32
	return psgdDotFrom(x, y, &s, psgdDotVec(x, y, &s))
}

// psgdDot2 is psgdDot(x, y0) and psgdDot(x, y1), the same bits, in one pass
// over x: two independent chains of additions instead of one after the
// other (the products of P = M Q are latency-bound one at a time).
func psgdDot2(x, y0, y1 []float32) (float32, float32) {
	y0, y1 = y0[:len(x)], y1[:len(x)]
	var s0, s1 [8]float32
	i := psgdDot2Vec(x, y0, y1, &s0, &s1)
	return psgdDotFrom(x, y0, &s0, i), psgdDotFrom(x, y1, &s1, i)
}

// psgdDotFrom finishes psgdDot from element i with the lanes s so far.
func psgdDotFrom(x, y []float32, s *[8]float32, i int) float32 {
	for ; i+8 <= len(x); i += 8 {
		s[0] += x[i] * y[i]
		s[1] += x[i+1] * y[i+1]
		s[2] += x[i+2] * y[i+2]
		s[3] += x[i+3] * y[i+3]
		s[4] += x[i+4] * y[i+4]
		s[5] += x[i+5] * y[i+5]
		s[6] += x[i+6] * y[i+6]
		s[7] += x[i+7] * y[i+7]
	}
	for k := 0; i < len(x); i, k = i+1, k+1 {
		s[k] += x[i] * y[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// psgdAdd writes a + b to dst, element by element. It runs only on a step
// whose residual was written out (the first compressed step, and the one
// after State or SetState), so it has no vector form.
func psgdAdd(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// psgdLowRankSub writes out[j] = Σ_k coef[k]·q[k·qstride+j], summed from
// zero in k's order (a rank-r row of P Q^T), and, when e is not nil,
// e[j] = m[j] - out[j].
func psgdLowRankSub(out, e, m, q []float32, qstride int, coef []float32) {
	if e != nil {
		e, m = e[:len(out)], m[:len(out)]
	}
	for j := psgdLowRankSubVec(out, e, m, q, qstride, coef); j < len(out); j++ {
		var s float32
		for k, a := range coef {
			s += a * q[k*qstride+j]
		}
		out[j] = s
		if e != nil {
			e[j] = m[j] - s
		}
	}
}

// psgdCompensate writes m[j] = g[j] + (m[j] - Σ_k coef[k]·q[k·qstride+j]):
// the next step's M from the last step's M and its rank-r approximation,
// with psgdLowRankSub's arithmetic for the residual.
func psgdCompensate(m, g, q []float32, qstride int, coef []float32) {
	g = g[:len(m)]
	for j := psgdCompensateVec(m, g, q, qstride, coef); j < len(m); j++ {
		var s float32
		for k, a := range coef {
			s += a * q[k*qstride+j]
		}
		e := m[j] - s
		m[j] = g[j] + e
	}
}

// psgdCompensateDot is psgdCompensate(m, g, lq, qstride, coef) followed by
// dots[k] = psgdDot(m, q[k·qstride:k·qstride+len(m)]) for k < len(coef), 1
// or 2: the same bits, in one pass over m where the CPU has the vector loop,
// so that the dot products' chains of additions overlap the compensation.
func psgdCompensateDot(m, g, lq, q []float32, qstride int, coef []float32, dots *[2]float32) {
	var s [2][8]float32
	i := psgdCompensateDotVec(m, g, lq, q, qstride, coef, &s[0], &s[1])
	if i < len(m) {
		psgdCompensate(m[i:], g[i:], lq[i:], qstride, coef)
	}
	for k := range coef {
		dots[k] = psgdDotFrom(m, q[k*qstride:k*qstride+len(m)], &s[k], i)
	}
}

// psgdOuterAdd adds coef[k]·row[j] to q[k·qstride+j] for every k and j.
func psgdOuterAdd(q []float32, qstride int, coef, row []float32) {
	for j := psgdOuterAddVec(q, qstride, coef, row); j < len(row); j++ {
		for k, a := range coef {
			q[k*qstride+j] += a * row[j]
		}
	}
}
