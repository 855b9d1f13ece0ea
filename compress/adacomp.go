package compress

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// adaComp is Adaptive Residual Gradient Compression (Chen et al., AAAI 2018,
// "AdaComp: Adaptive Residual Gradient Compression for Data-Parallel
// Distributed Training", arXiv:1712.02679; there is no official code). Per
// compressed tensor, split into bins of L_T consecutive elements (bin_conv for
// convolution weights, bin_fc for every other kind: linear, LSTM, embedding):
//
//	G = R + g                      residue plus the new gradient
//	H = G + g                      the latest gradient counts twice
//	gmax[b] = max |G_i| over bin b
//	send i  when |H_i| >= gmax[bin(i)]
//	sent_i  = sign(G_i) * scale,   scale = mean of gmax over all bins
//	R = G - sent
//
// Choices where the paper (or its summary in ALGORITHMS.md) leaves room:
//
//   - The quantizer reads G, not H: H only decides which elements go (the
//     paper's soft threshold), while the value sent approximates G, the
//     residue that is subtracted afterwards. With sign(H) an element whose
//     fresh gradient flips the sign of H would push its residue further from
//     zero.
//   - The rule alone does not guarantee one element per bin: the element
//     attaining gmax has |H| = |G + g|, below gmax when g opposes G (R = -4,
//     g = 1: G = -3, H = -2). When no element of a bin with gmax > 0 passes, the
//     first element attaining gmax is sent, so every non-zero bin sends at
//     least one element and no residue can sit in a bin forever.
//   - A bin with gmax = 0 (G all zero) sends nothing, although |H| >= 0 holds
//     for all its elements; likewise an element with G_i = 0 is never sent
//     (its value, sign(0)*scale or G_i, is zero).
//   - The scale is the mean of gmax over every bin of the tensor, empty bins
//     and the last partial bin included, computed in float64 and sent as
//     float32.
//
// With compress.adacomp.fp32_values the selected G_i travel as float32 (the
// residue of a sent element is then zero). compress.fp16_values does not apply.
//
// Payload, per compressed tensor in layout order:
//
//	uint32 count, count int32 indices (within the tensor, ascending), then
//	  ternary: ceil(count/8) bytes of sign bits (bit j%8 of byte j/8 set when
//	           the j-th sent value is negative) and one float32 scale;
//	  fp32:    count float32 values.
//
// A tensor that sends nothing costs only its count (no scale).
type adaComp struct {
	tensors []Tensor
	bins    []int // L_T per tensor
	fp32    bool

	residual []float32 // R, the state
	comp     []float32 // G of the last step
	sent     []float32 // what this worker's payload decompresses to

	// Per-step scratch, grown to the largest number of elements a tensor has sent.
	idx  []int32
	vals []float32
	sign []byte

	// Two encoders used alternately: the in-process all-gather lends the payload
	// to the other workers until this worker's next collective call, which comes
	// after the next Compress.
	enc   [2]Encoder
	flip  int
	wires []int64
}

var _ ErrorFeedback = (*adaComp)(nil)

func newAdaComp(cfg Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	ac := cfg.AdaComp
	if ac.BinConv < 1 {
		return nil, fmt.Errorf("compress.adacomp.bin_conv: %d: expected a bin length >= 1", ac.BinConv)
	}
	if ac.BinFC < 1 {
		return nil, fmt.Errorf("compress.adacomp.bin_fc: %d: expected a bin length >= 1", ac.BinFC)
	}
	n := packedSize(tensors)
	c := &adaComp{
		tensors:  tensors,
		bins:     make([]int, len(tensors)),
		fp32:     ac.FP32Values,
		residual: make([]float32, n),
		comp:     make([]float32, n),
		sent:     make([]float32, n),
		wires:    make([]int64, len(tensors)),
	}
	for i, t := range tensors {
		if t.Size > math.MaxInt32 {
			return nil, fmt.Errorf("compress adacomp: tensor %s has %d elements; int32 indices address at most %d", t.Name, t.Size, math.MaxInt32)
		}
		// The paper's bin lengths: about 50 for convolutions, about 500 for
		// fully-connected and recurrent layers; other kinds never reach a
		// compressor under the layer policy and would be binned like the latter.
		c.bins[i] = ac.BinFC
		if t.Kind == optim.KindConv {
			c.bins[i] = ac.BinConv
		}
	}
	return c, nil
}

// Needs: AdaComp keeps its residue itself: its selection reads the raw
// gradient too (H = G + g), not only the compensated one.
func (c *adaComp) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 1, Reciprocal: true}
}
func (c *adaComp) Steady(StepInfo) bool { return true } // no warm-up

// Compensated is G = R + g of the last step.
func (c *adaComp) Compensated() []float32 { return c.comp }

// Sent is what the last payload decompresses to (zero where nothing was sent).
func (c *adaComp) Sent() []float32 { return c.sent }

// Residual is R after the last step.
func (c *adaComp) Residual() []float32 { return c.residual }

func (c *adaComp) Encode(r int, grad []float32, _ Combined, _ StepInfo) (Payload, error) {
	if r != 0 {
		return Payload{}, fmt.Errorf("compress adacomp: round %d of 1", r)
	}
	if len(grad) != len(c.residual) {
		return Payload{}, fmt.Errorf("compress adacomp: gradient of %d values, expected %d", len(grad), len(c.residual))
	}
	e := &c.enc[c.flip]
	c.flip ^= 1
	e.Reset()
	for ti, t := range c.tensors {
		start := e.Len()
		c.compressTensor(e, t, c.bins[ti], grad[t.Offset:t.Offset+t.Size])
		c.wires[ti] = int64(e.Len() - start)
	}
	return Payload{Bytes: e.Bytes(), Wire: int64(e.Len()), TensorWire: c.wires}, nil
}

// compressTensor selects, quantizes and encodes one tensor and updates its
// residue, G and sent values.
func (c *adaComp) compressTensor(e *Encoder, t Tensor, bin int, g []float32) {
	off := t.Offset
	R := c.residual[off : off+t.Size]
	G := c.comp[off : off+t.Size]
	S := c.sent[off : off+t.Size]
	c.idx = c.idx[:0]
	var sumMax float64
	nbins := 0
	for lo := 0; lo < t.Size; lo += bin {
		hi := min(lo+bin, t.Size)
		nbins++
		// G, the bin maximum, and R = G, sent = 0 until the selection below.
		var gmax float32
		arg := -1
		for i := lo; i < hi; i++ {
			v := R[i] + g[i]
			G[i], R[i], S[i] = v, v, 0
			if a := abs32(v); a > gmax {
				gmax, arg = a, i
			}
		}
		if gmax == 0 {
			continue
		}
		sumMax += float64(gmax)
		before := len(c.idx)
		for i := lo; i < hi; i++ {
			if G[i] != 0 && abs32(G[i]+g[i]) >= gmax {
				c.idx = append(c.idx, int32(i))
			}
		}
		if len(c.idx) == before {
			c.idx = append(c.idx, int32(arg))
		}
	}
	k := len(c.idx)
	e.Uint32(uint32(k))
	if k == 0 {
		return
	}
	e.Int32s(c.idx)
	if c.fp32 {
		c.vals = c.vals[:0]
		for _, i := range c.idx {
			v := G[i]
			c.vals = append(c.vals, v)
			S[i], R[i] = v, 0
		}
		e.Float32s(c.vals)
		return
	}
	scale := float32(sumMax / float64(nbins))
	nb := (k + 7) / 8
	if cap(c.sign) < nb {
		c.sign = make([]byte, nb, 2*nb)
	}
	c.sign = c.sign[:nb]
	clear(c.sign)
	for j, i := range c.idx {
		v := scale
		if G[i] < 0 {
			v = -scale
			c.sign[j>>3] |= 1 << (j & 7)
		}
		S[i], R[i] = v, G[i]-v
	}
	e.Raw(c.sign)
	e.Float32s([]float32{scale})
}

// DecodeAdd scatter-adds one worker's values.
func (c *adaComp) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if len(dst) != len(c.residual) {
		return fmt.Errorf("output of %d values, expected %d", len(dst), len(c.residual))
	}
	d := NewDecoder(p.Bytes)
	for _, t := range c.tensors {
		k := int(d.Uint32())
		if d.Err() != nil {
			return d.Err()
		}
		if k > t.Size {
			return fmt.Errorf("tensor %s: %d values sent for %d elements", t.Name, k, t.Size)
		}
		if k == 0 {
			continue
		}
		idx := d.Raw(4 * k)
		var vals, signs []byte
		var scale float32
		if c.fp32 {
			vals = d.Raw(4 * k)
		} else {
			signs = d.Raw((k + 7) / 8)
			s := d.Raw(4)
			if s != nil {
				scale = math.Float32frombits(binary.LittleEndian.Uint32(s))
			}
		}
		if d.Err() != nil {
			return d.Err()
		}
		out := dst[t.Offset : t.Offset+t.Size]
		for j := range k {
			i := binary.LittleEndian.Uint32(idx[4*j:])
			if i >= uint32(t.Size) {
				return fmt.Errorf("tensor %s: index %d out of range [0, %d)", t.Name, int32(i), t.Size)
			}
			var v float32
			if c.fp32 {
				v = math.Float32frombits(binary.LittleEndian.Uint32(vals[4*j:]))
			} else {
				v = scale
				if signs[j>>3]&(1<<(j&7)) != 0 {
					v = -scale
				}
			}
			out[i] += v
		}
	}
	return d.Done()
}

// State is the residue R of every tensor (copies), named residual/<tensor>.
func (c *adaComp) State() map[string][]float32 {
	st := make(map[string][]float32, len(c.tensors))
	for _, t := range c.tensors {
		st["residual/"+t.Name] = append([]float32(nil), c.residual[t.Offset:t.Offset+t.Size]...)
	}
	return st
}

// SetState restores the residues; every tensor's buffer must be present with
// its length, and no other name.
func (c *adaComp) SetState(st map[string][]float32) error {
	if len(st) != len(c.tensors) {
		return fmt.Errorf("compress adacomp: state has %d buffers, expected %d (residual/<tensor>)", len(st), len(c.tensors))
	}
	for _, t := range c.tensors {
		name := "residual/" + t.Name
		v, ok := st[name]
		if !ok {
			return fmt.Errorf("compress adacomp: state lacks %s", name)
		}
		if len(v) != t.Size {
			return fmt.Errorf("compress adacomp: state %s has %d values, expected %d", name, len(v), t.Size)
		}
	}
	for _, t := range c.tensors {
		copy(c.residual[t.Offset:t.Offset+t.Size], st["residual/"+t.Name])
	}
	return nil
}

// abs32 is |v| without a round trip through float64.
func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
