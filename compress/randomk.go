package compress

import (
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/gradwire/gradwire/dist"
)

// randomK sends, per compressed tensor, k = ceil(numel*density) elements at
// random positions. Every worker draws the same positions from the seed shared
// by all workers and the step number, so only the values travel, and they can
// be summed: one all-reduce of sum(k) floats (2 bytes each with
// compress.fp16_values, the values rounded to half precision).
//
// The values are sent unscaled, so the result is the workers' mean at the
// selected coordinates and zero elsewhere. That estimator is biased (its
// expectation is k/numel times the gradient; scaling by numel/k would remove
// the bias at the cost of a large variance). With compress.residual the
// unsent coordinates are fed back into later steps, which makes the biased,
// contractive rand-k converge like SGD (Stich et al. 2018, "Sparsified SGD
// with memory").
type randomK struct {
	tensors  []Tensor
	ks       []int
	koff     []int // offset of each tensor's k entries in idx and vals
	fp16     bool
	residual bool // compress.residual
	seed     uint64

	pcg     *rand.PCG
	rng     *rand.Rand
	chosen  []uint64 // bitmap over the largest tensor's elements, all zero between draws
	idx     []int32  // positions drawn for step idxStep, per tensor at koff, increasing
	idxStep int
	vals    []float32 // the payload: summed in place by the all-reduce
	wire    int64
	tw      []int64
}

var (
	_ Compressor       = (*randomK)(nil)
	_ sparseSender     = (*randomK)(nil)
	_ statelessDecoder = (*randomK)(nil)
)

// newRandomK builds worker's random-k. seed must be the same on every worker
// (the exchange passes the run's seed to all of them).
func newRandomK(cfg Config, tensors []Tensor, _, _ int, seed int64, _ Hyper) (Compressor, error) {
	if err := checkDensity(cfg.Density); err != nil {
		return nil, err
	}
	if err := checkIndexable(tensors); err != nil {
		return nil, err
	}
	c := &randomK{tensors: tensors, fp16: cfg.FP16Values, seed: uint64(seed), idxStep: -1, residual: cfg.Residual}
	c.pcg = rand.NewPCG(0, 0)
	c.rng = rand.New(c.pcg)
	valBytes := int64(4)
	if c.fp16 {
		valBytes = 2
	}
	total, largest := 0, 0
	for _, t := range tensors {
		k := sparseK(t.Size, cfg.Density)
		c.ks = append(c.ks, k)
		c.koff = append(c.koff, total)
		c.tw = append(c.tw, int64(k)*valBytes)
		total += k
		largest = max(largest, t.Size)
	}
	c.chosen = make([]uint64, (largest+63)/64)
	c.idx = make([]int32, total)
	c.vals = make([]float32, total)
	c.wire = int64(total) * valBytes
	return c, nil
}

func (c *randomK) Needs() Needs {
	return Needs{Collective: dist.OpAllReduce, Rounds: 1, ErrorFeedback: c.residual}
}
func (c *randomK) Steady(StepInfo) bool { return true }

// draw fills idx with the step's positions: per tensor in layout order, a
// uniform k-subset by Floyd's algorithm (k draws, no rejection loop), read out
// of the bitmap in increasing order. The generator depends on the seed and the
// step alone, so every worker (and a resumed run) draws the same positions.
func (c *randomK) draw(step int) {
	if c.idxStep == step {
		return
	}
	c.pcg.Seed(c.seed, uint64(step))
	for ti, t := range c.tensors {
		k, n := c.ks[ti], t.Size
		idx := c.idx[c.koff[ti] : c.koff[ti]+k]
		words := c.chosen[:(n+63)/64]
		for j := n - k; j < n; j++ {
			r := c.rng.IntN(j + 1)
			if words[r>>6]&(1<<(r&63)) != 0 {
				r = j // r was taken earlier; j cannot have been
			}
			words[r>>6] |= 1 << (r & 63)
		}
		p := 0
		for w, word := range words {
			for word != 0 {
				idx[p] = int32(w<<6 + bits.TrailingZeros64(word))
				p++
				word &= word - 1
			}
			words[w] = 0
		}
	}
	c.idxStep = step
}

func (c *randomK) Encode(_ int, grad []float32, _ Combined, info StepInfo) (Payload, error) {
	c.draw(info.Step)
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		g := grad[t.Offset : t.Offset+t.Size]
		for j, i := range c.idx[o : o+k] {
			c.vals[o+j] = g[i]
		}
	}
	if c.fp16 {
		RoundF16(c.vals)
	}
	return Payload{Floats: c.vals, Wire: c.wire, TensorWire: c.tw}, nil
}

// appendSent lists the own payload's entries (sparseSender): the step's
// packed positions and the values Encode left in the payload (rounded to
// float16 there where they travel as float16). Before the all-reduce only:
// it sums into those values.
func (c *randomK) appendSent(idx []int32, vals []float32) ([]int32, []float32) {
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		for j, i := range c.idx[o : o+k] {
			idx, vals = append(idx, int32(t.Offset)+i), append(vals, c.vals[o+j])
		}
	}
	return idx, vals
}

// statelessDecode: DecodeAdd writes only dst, and the step's positions,
// which it draws again when they are not this step's.
func (c *randomK) statelessDecode() {}

// DecodeAdd adds the summed values at the step's positions.
func (c *randomK) DecodeAdd(p Payload, dst []float32, info StepInfo) error {
	if len(p.Floats) != len(c.vals) {
		return fmt.Errorf("%d summed values, want %d", len(p.Floats), len(c.vals))
	}
	c.draw(info.Step)
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		out := dst[t.Offset : t.Offset+t.Size]
		for j, i := range c.idx[o : o+k] {
			out[i] += p.Floats[o+j]
		}
	}
	return nil
}

func (c *randomK) State() map[string][]float32 { return nil }

func (c *randomK) SetState(st map[string][]float32) error { return noState("randomk", st) }
