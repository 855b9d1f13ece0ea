package compress

import "github.com/gradwire/gradwire/dist"

// efSignSGD is scaled sign compression with error feedback (Karimireddy et
// al. 2019, "Error Feedback Fixes SignSGD and other Gradient Compression
// Schemes"): each compressed tensor p of d elements (residual added) is sent
// as (||p||_1 / d) * sign(p). Zeros count as positive (one bit has no third
// value); the error feedback carries the difference.
//
// Payload, per tensor in layout order: ceil(d/8) bytes of sign bits (element
// i is bit i%8 of byte i/8, set when negative), then the scale as float32.
type efSignSGD struct {
	tensors []Tensor
	wire    int
	tw      []int64 // bytes per tensor
	enc     Encoder
	mask    []byte
	scale   [1]float32
}

func newEFSignSGD(_ Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	c := &efSignSGD{tensors: tensors}
	for _, t := range tensors {
		c.tw = append(c.tw, int64((t.Size+7)/8+4))
		c.wire += (t.Size+7)/8 + 4
		c.mask = make([]byte, max(len(c.mask), (t.Size+7)/8))
	}
	return c, nil
}

func (c *efSignSGD) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 1, ErrorFeedback: true}
}

func (c *efSignSGD) Encode(_ int, grad []float32, _ Combined, _ StepInfo) (Payload, error) {
	c.enc.Reset()
	for _, t := range c.tensors {
		mask, l1 := c.mask[:(t.Size+7)/8], 0.0
		clear(mask)
		for i, v := range grad[t.Offset : t.Offset+t.Size] {
			l1 += float64(abs32(v))
			if v < 0 {
				mask[i>>3] |= 1 << (i & 7)
			}
		}
		c.scale[0] = float32(l1 / float64(t.Size))
		c.enc.Raw(mask)
		c.enc.Float32s(c.scale[:])
	}
	return Payload{Bytes: c.enc.Bytes(), Wire: int64(c.enc.Len()), TensorWire: c.tw}, nil
}

// statelessDecode: DecodeAdd writes only dst and the scale, scratch that Encode
// rewrites, so a worker that does not keep the mean skips it.
func (c *efSignSGD) statelessDecode() {}

// DecodeAdd adds one worker's signed scales.
func (c *efSignSGD) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if err := checkSize(p, c.wire); err != nil {
		return err
	}
	d := NewDecoder(p.Bytes) // the length was checked: the reads cannot run short
	for _, t := range c.tensors {
		mask := d.Raw((t.Size + 7) / 8)
		d.Float32s(c.scale[:])
		for i := range dst[t.Offset : t.Offset+t.Size] {
			dst[t.Offset+i] += c.scale[0] * float32(1-2*int(mask[i>>3]>>(i&7)&1))
		}
	}
	return nil
}

func (c *efSignSGD) Steady(StepInfo) bool                   { return true }
func (c *efSignSGD) State() map[string][]float32            { return nil }
func (c *efSignSGD) SetState(st map[string][]float32) error { return noState("efsignsgd", st) }
