package compress

import (
	"fmt"

	"github.com/gradwire/gradwire/dist"
)

// topK sends, per compressed tensor, the k = ceil(numel*density) elements of
// largest magnitude (exact selection, ties to the lower index) with their
// int32 indices, through an all-gather; the receivers scatter-add every
// worker's values and divide by N.
// With compress.residual the unsent remainder is fed back into the next step
// (residual accumulation, Seide et al. 2014; Lin et al. 2018).
//
// Payload, per tensor in layout order: k indices (increasing; int32, or uint16
// with compress.narrow_indices where they fit), then k
// values (float32, or float16 with compress.fp16_values). k is known to every
// worker from the config, so nothing else is sent.
type topK struct {
	tensors  []Tensor
	ks       []int // k per tensor
	fp16     bool
	narrow   bool // compress.narrow_indices
	residual bool // compress.residual

	sel  selector
	idx  []int32   // indices selected this step, per tensor at koff
	vals []float32 // their values as sent
	koff []int     // offset of each tensor's k entries in idx and vals
	enc  Encoder
	wire int     // payload bytes
	tw   []int64 // bytes per tensor
}

var (
	_ Compressor       = (*topK)(nil)
	_ sparseSender     = (*topK)(nil)
	_ statelessDecoder = (*topK)(nil)
)

func newTopK(cfg Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	if err := checkDensity(cfg.Density); err != nil {
		return nil, err
	}
	if err := checkIndexable(tensors); err != nil {
		return nil, err
	}
	c := &topK{tensors: tensors, fp16: cfg.FP16Values, narrow: cfg.NarrowIndices, residual: cfg.Residual}
	valBytes := 4
	if c.fp16 {
		valBytes = 2
	}
	total := 0
	for _, t := range tensors {
		k := sparseK(t.Size, cfg.Density)
		c.ks = append(c.ks, k)
		c.koff = append(c.koff, total)
		b := k * (indexBytes(t.Size, c.narrow) + valBytes)
		c.tw = append(c.tw, int64(b))
		c.wire += b
		total += k
	}
	c.idx = make([]int32, total)
	c.vals = make([]float32, total)
	return c, nil
}

func (c *topK) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 1, ErrorFeedback: c.residual}
}
func (c *topK) Steady(StepInfo) bool { return true }

func (c *topK) Encode(_ int, grad []float32, _ Combined, _ StepInfo) (Payload, error) {
	c.enc.Reset()
	for ti, t := range c.tensors {
		g := grad[t.Offset : t.Offset+t.Size]
		o, k := c.koff[ti], c.ks[ti]
		idx := c.sel.topK(g, k, c.idx[o:o+k])
		vals := c.vals[o : o+k]
		for j, i := range idx {
			vals[j] = g[i]
		}
		c.enc.Indices(idx, t.Size, c.narrow)
		if c.fp16 {
			c.enc.Float16s(vals)
		} else {
			c.enc.Float32s(vals)
		}
	}
	return Payload{Bytes: c.enc.Bytes(), Wire: int64(c.enc.Len()), TensorWire: c.tw}, nil
}

// appendSent lists the own payload's entries (sparseSender): the selected
// packed positions and their values, float16-rounded where they travel as
// float16.
func (c *topK) appendSent(idx []int32, vals []float32) ([]int32, []float32) {
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		for j, i := range c.idx[o : o+k] {
			v := c.vals[o+j]
			if c.fp16 {
				v = F32FromF16(F16FromF32(v))
			}
			idx, vals = append(idx, int32(t.Offset)+i), append(vals, v)
		}
	}
	return idx, vals
}

// statelessDecode: DecodeAdd writes only dst and its scratch (idx, vals,
// which Encode has consumed).
func (c *topK) statelessDecode() {}

// DecodeAdd scatter-adds one worker's values.
func (c *topK) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if err := checkSize(p, c.wire); err != nil {
		return err
	}
	d := NewDecoder(p.Bytes) // the length was checked: the reads cannot run short
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		// The own idx/vals were consumed by Encode: reuse them as scratch.
		idx, vals := c.idx[o:o+k], c.vals[o:o+k]
		d.Indices(idx, t.Size, c.narrow)
		if c.fp16 {
			d.Float16s(vals)
		} else {
			d.Float32s(vals)
		}
		out := dst[t.Offset : t.Offset+t.Size]
		for j, i := range idx {
			if uint32(i) >= uint32(t.Size) {
				return fmt.Errorf("tensor %s: index %d out of range [0, %d)", t.Name, i, t.Size)
			}
			out[i] += vals[j]
		}
	}
	return nil
}

func (c *topK) State() map[string][]float32 { return nil }

func (c *topK) SetState(st map[string][]float32) error { return noState("topk", st) }

// checkSize validates a payload of the fixed size the config implies before
// it is decoded.
func checkSize(p Payload, size int) error {
	if len(p.Bytes) != size {
		return fmt.Errorf("payload of %d bytes, want %d", len(p.Bytes), size)
	}
	return nil
}

// divideSum turns a sum over n workers into their mean. Zeros are skipped
// (0/n is the same zero): sparse sums then cost a read, not a division.
func divideSum(dst []float32, n int) {
	f := float32(n)
	for i, v := range dst {
		if v != 0 {
			dst[i] = v / f
		}
	}
}

// noState is SetState of a compressor without state of its own: any buffer
// is unknown.
func noState(name string, st map[string][]float32) error {
	for k := range st {
		return fmt.Errorf("%s: unknown state buffer %q", name, k)
	}
	return nil
}
