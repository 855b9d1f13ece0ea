package compress

import (
	"fmt"

	"github.com/gradwire/gradwire/dist"
)

// oneBit is 1-bit SGD with error feedback (Seide et al. 2014, "1-Bit
// Stochastic Gradient Descent and its Application to Data-Parallel Distributed
// Training of Speech DNNs"). Each compressed tensor is viewed as a matrix with
// Shape[0] rows and the remaining dimensions flattened into columns (a conv
// weight is out x in*kh*kw). After adding the residual, every element is sent
// as its sign, and each column as two scales: the mean of its non-negative
// entries and the mean of its negative entries; the receiver reconstructs an
// element as its column's scale for its sign. What the reconstruction misses
// is the residual (error feedback is part of the algorithm, so it ignores
// compress.residual).
//
// Zeros count as non-negative: they get bit 1 and enter the mean of that group
// (the mean is the least-squares value for everything reconstructed with it).
// A column without negative entries has negative scale 0, and one without
// non-negative entries has positive scale 0.
//
// Payload, per tensor in layout order: ceil(numel/8) bytes of sign bits (1 =
// non-negative; element i of the row-major tensor is bit i%8 of byte i/8),
// then per column its positive and its negative scale as float32.
type oneBit struct {
	tensors []Tensor
	cols    []int // columns per tensor

	// Scratch sized for the widest tensor: at 2j column j's non-negative
	// entries, at 2j+1 its negative ones.
	sum   []float64 // their sums
	count []int     // their numbers
	scale []float32 // their means, as sent (0 for none)
	mask  []byte    // sign bits, sized for the largest tensor
	enc   Encoder
	wire  int
	tw    []int64
}

var _ Compressor = (*oneBit)(nil)

func newOneBit(_ Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	c := &oneBit{tensors: tensors}
	widest, largest := 0, 0
	for _, t := range tensors {
		if len(t.Shape) == 0 || t.Shape[0] < 1 || t.Size%t.Shape[0] != 0 {
			return nil, fmt.Errorf("onebit: tensor %s: shape %v does not hold %d elements as rows", t.Name, t.Shape, t.Size)
		}
		cols := t.Size / t.Shape[0]
		c.cols = append(c.cols, cols)
		n := (t.Size+7)/8 + 8*cols
		c.tw = append(c.tw, int64(n))
		c.wire += n
		widest = max(widest, cols)
		largest = max(largest, t.Size)
	}
	c.sum = make([]float64, 2*widest)
	c.count = make([]int, 2*widest)
	c.scale = make([]float32, 2*widest)
	c.mask = make([]byte, (largest+7)/8)
	return c, nil
}

// Needs: error feedback is part of the algorithm.
func (c *oneBit) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 1, ErrorFeedback: true}
}
func (c *oneBit) Steady(StepInfo) bool { return true }

// oneBitSide is the offset of v's scale in its column's (positive, negative) pair:
// 0 for non-negative values (zero included), sent as bit 1; 1 for negative
// values, sent as bit 0.
func oneBitSide(v float32) int {
	if v < 0 {
		return 1
	}
	return 0
}

func (c *oneBit) Encode(_ int, grad []float32, _ Combined, _ StepInfo) (Payload, error) {
	c.enc.Reset()
	for ti, t := range c.tensors {
		cols := c.cols[ti]
		g := grad[t.Offset : t.Offset+t.Size]
		sum, count, scale := c.sum[:2*cols], c.count[:2*cols], c.scale[:2*cols]
		clear(sum)
		clear(count)
		// Row-major walk: each row adds one entry to every column.
		for r := 0; r < len(g); r += cols {
			for j, v := range g[r : r+cols] {
				s := 2*j + oneBitSide(v)
				sum[s] += float64(v)
				count[s]++
			}
		}
		for s := range scale {
			scale[s] = 0
			if count[s] > 0 {
				scale[s] = float32(sum[s] / float64(count[s]))
			}
		}
		// Set the bits.
		mask := c.mask[:(len(g)+7)/8]
		clear(mask)
		for r := 0; r < len(g); r += cols {
			for j, v := range g[r : r+cols] {
				i := r + j
				s := oneBitSide(v)
				mask[i>>3] |= byte(1-s) << (i & 7)
			}
		}
		c.enc.Raw(mask)
		c.enc.Float32s(scale)
	}
	return Payload{Bytes: c.enc.Bytes(), Wire: int64(c.enc.Len()), TensorWire: c.tw}, nil
}

// statelessDecode: DecodeAdd writes only dst and the scales, scratch that Encode
// rewrites, so a worker that does not keep the mean skips it.
func (c *oneBit) statelessDecode() {}

// DecodeAdd adds one worker's reconstruction.
func (c *oneBit) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if err := checkSize(p, c.wire); err != nil {
		return err
	}
	d := NewDecoder(p.Bytes) // the length was checked: the reads cannot run short
	for ti, t := range c.tensors {
		cols := c.cols[ti]
		mask := d.Raw((t.Size + 7) / 8)
		scale := c.scale[:2*cols]
		d.Float32s(scale)
		out := dst[t.Offset : t.Offset+t.Size]
		for r := 0; r < len(out); r += cols {
			for j := range out[r : r+cols] {
				i := r + j
				bit := int(mask[i>>3] >> (i & 7) & 1)
				out[i] += scale[2*j+1-bit]
			}
		}
	}
	return nil
}

func (c *oneBit) State() map[string][]float32 { return nil }

func (c *oneBit) SetState(st map[string][]float32) error { return noState("onebit", st) }
