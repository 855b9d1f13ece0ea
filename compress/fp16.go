package compress

import (
	"fmt"

	"github.com/gradwire/gradwire/dist"
)

// fp16 casts gradients to IEEE half precision for an all-reduce: 2 bytes per
// value on the wire. The simulated sum adds the half-precision values in float32
// (real fp16 all-reduces also round the partial sums, so this is slightly
// optimistic about accuracy, exact about bytes).
type fp16 struct {
	buf []float32
	tw  []int64 // Payload.TensorWire: 2 bytes per value of each tensor
}

func newFP16(_ Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	return &fp16{buf: make([]float32, packedSize(tensors)), tw: elementWire(tensors, 2)}, nil
}

func (c *fp16) Needs() Needs                           { return Needs{Collective: dist.OpAllReduce, Rounds: 1, Reciprocal: true} }
func (c *fp16) Steady(StepInfo) bool                   { return true }
func (c *fp16) State() map[string][]float32            { return nil }
func (c *fp16) SetState(st map[string][]float32) error { return noState("fp16", st) }

func (c *fp16) Encode(_ int, grad []float32, _ Combined, _ StepInfo) (Payload, error) {
	copy(c.buf, grad)
	RoundF16(c.buf)
	return Payload{Floats: c.buf, Wire: int64(2 * len(c.buf)), TensorWire: c.tw}, nil
}

// statelessDecode: DecodeAdd writes only dst, so a worker that does not keep the mean
// skips it.
func (c *fp16) statelessDecode() {}

// DecodeAdd adds the summed values.
func (c *fp16) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if len(p.Floats) != len(c.buf) {
		return fmt.Errorf("%d summed values, want %d", len(p.Floats), len(c.buf))
	}
	for i, v := range p.Floats {
		dst[i] += v
	}
	return nil
}

// elementWire is the TensorWire of a compressor that sends every value of
// every tensor in bytesPer bytes, so that per-kind ratios are booked right.
func elementWire(tensors []Tensor, bytesPer int) []int64 {
	tw := make([]int64, len(tensors))
	for i, t := range tensors {
		tw[i] = int64(bytesPer * t.Size)
	}
	return tw
}

// packedSize is the length of the packed buffer of tensors.
func packedSize(tensors []Tensor) int {
	if len(tensors) == 0 {
		return 0
	}
	t := tensors[len(tensors)-1]
	return t.Offset + t.Size
}
