package compress

import (
	"fmt"
	"slices"

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
	tensors []Tensor
	ks      []int // k per tensor
	fp16    bool
	narrow  bool      // compress.narrow_indices
	fb      *feedback // nil without compress.residual

	sel  selector
	idx  []int32   // indices selected this step, per tensor at koff
	vals []float32 // their values as sent
	koff []int     // offset of each tensor's k entries in idx and vals
	enc  Encoder
	wire int     // payload bytes
	tw   []int64 // bytes per tensor
}

var _ Compressor = (*topK)(nil)

func newTopK(cfg Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	if err := checkDensity(cfg.Density); err != nil {
		return nil, err
	}
	if err := checkIndexable(tensors); err != nil {
		return nil, err
	}
	c := &topK{tensors: tensors, fp16: cfg.FP16Values, narrow: cfg.NarrowIndices}
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
	if cfg.Residual {
		c.fb = newFeedback(packedSize(tensors))
		return withFeedback{c, c.fb}, nil
	}
	return c, nil
}

func (c *topK) Kind() dist.Kind     { return dist.KindAllGather }
func (c *topK) Rounds() int         { return 1 }
func (c *topK) Steady(Context) bool { return true }

func (c *topK) Compress(_ int, grad []float32, _ Combined, _ Context) (Payload, error) {
	if c.fb != nil {
		c.fb.mem.Compensate(grad)
	}
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
			// The residual must keep the rounding error too: round before
			// recording what was sent.
			RoundF16(vals)
			c.enc.Float16s(vals)
		} else {
			c.enc.Float32s(vals)
		}
	}
	if c.fb != nil {
		clear(c.fb.sent)
		for ti, t := range c.tensors {
			o, k := c.koff[ti], c.ks[ti]
			sent := c.fb.sent[t.Offset : t.Offset+t.Size]
			for j, i := range c.idx[o : o+k] {
				sent[i] = c.vals[o+j]
			}
		}
		c.fb.mem.Update(c.fb.sent)
	}
	return Payload{Bytes: c.enc.Bytes(), Wire: int64(c.enc.Len()), TensorWire: c.tw}, nil
}

// Decompress scatter-adds every worker's values in rank order, then divides by
// N: the same float32 operations in the same order on every worker.
func (c *topK) Decompress(last Combined, dst []float32, _ Context) error {
	if err := checkGathered("topk", last, c.wire); err != nil {
		return err
	}
	clear(dst)
	for w, b := range last.Bytes {
		// The length was checked: the reads below cannot run short.
		d := NewDecoder(b)
		for ti, t := range c.tensors {
			o, k := c.koff[ti], c.ks[ti]
			// The own idx/vals were consumed by Compress: reuse them as scratch.
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
					return fmt.Errorf("topk: worker %d: tensor %s: index %d out of range [0, %d)", w, t.Name, i, t.Size)
				}
				out[i] += vals[j]
			}
		}
	}
	divideSum(dst, last.Workers)
	return nil
}

func (c *topK) State() map[string][]float32 { return c.fb.state() }

func (c *topK) SetState(st map[string][]float32) error { return c.fb.setState("topk", st) }

// checkGathered validates an all-gather round's result before decoding: one
// payload per worker, each of the fixed size the config implies.
func checkGathered(name string, last Combined, size int) error {
	if last.Workers < 1 || len(last.Bytes) != last.Workers {
		return fmt.Errorf("%s: %d payloads for %d workers", name, len(last.Bytes), last.Workers)
	}
	for w, b := range last.Bytes {
		if len(b) != size {
			return fmt.Errorf("%s: worker %d: payload of %d bytes, want %d", name, w, len(b), size)
		}
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

// feedback is the error feedback of topk, randomk and onebit: the memory, and
// this worker's decompressed contribution of the step (dense, zero where
// nothing was sent) for Memory.Update and the ErrorFeedback check.
type feedback struct {
	mem  *Memory
	sent []float32
}

func newFeedback(n int) *feedback { return &feedback{mem: NewMemory(n), sent: make([]float32, n)} }

// Compensated is the step's gradient plus the previous residual.
func (f *feedback) Compensated() []float32 { return f.mem.Compensated() }

// Sent is what this worker's payload decompresses to.
func (f *feedback) Sent() []float32 { return f.sent }

// Residual is what is carried into the next step.
func (f *feedback) Residual() []float32 { return f.mem.Residual() }

// state is the checkpoint state: a copy of the residual (nil without feedback).
func (f *feedback) state() map[string][]float32 {
	if f == nil {
		return nil
	}
	return map[string][]float32{"residual": slices.Clone(f.mem.Residual())}
}

// setState restores state's buffers; every name must be known and present,
// with the right length. On error nothing changes.
func (f *feedback) setState(name string, st map[string][]float32) error {
	for k := range st {
		if k != "residual" {
			return fmt.Errorf("%s: unknown state buffer %q", name, k)
		}
		if f == nil {
			return fmt.Errorf("%s: state has a residual, but compress.residual is off", name)
		}
	}
	if f == nil {
		return nil
	}
	r, ok := st["residual"]
	if !ok {
		return fmt.Errorf("%s: state has no \"residual\" buffer", name)
	}
	if len(r) != len(f.mem.Residual()) {
		return fmt.Errorf("%s: state buffer \"residual\" has %d values, want %d", name, len(r), len(f.mem.Residual()))
	}
	copy(f.mem.Residual(), r)
	return nil
}

// withFeedback adds the ErrorFeedback methods to a compressor built with a
// residual, so that a compressor without one does not claim to keep one.
type withFeedback struct {
	Compressor
	*feedback
}

var _ ErrorFeedback = withFeedback{}
