package compress

import "github.com/gradwire/gradwire/dist"

// none sends dense float32 gradients through one all-reduce: the baseline every
// ratio is measured against. (The exchange sends every tensor dense for "none";
// the compressor exists so that it passes the same conformance test.)
type none struct {
	buf []float32
	tw  []int64 // Payload.TensorWire: 4 bytes per value of each tensor
}

func newNone(_ Config, tensors []Tensor, _, _ int, _ int64, _ Hyper) (Compressor, error) {
	return &none{buf: make([]float32, packedSize(tensors)), tw: elementWire(tensors, 4)}, nil
}

func (c *none) Needs() Needs                           { return Needs{Collective: dist.KindAllReduce, Rounds: 1} }
func (c *none) Steady(Context) bool                    { return true }
func (c *none) State() map[string][]float32            { return nil }
func (c *none) SetState(st map[string][]float32) error { return noState("none", st) }

func (c *none) Encode(_ int, grad []float32, _ Combined, _ Context) (Payload, error) {
	copy(c.buf, grad)
	return Payload{Floats: c.buf, Wire: int64(4 * len(c.buf)), TensorWire: c.tw}, nil
}

func (c *none) Decode(last Combined, dst []float32, _ Context) error {
	return meanInto(dst, last)
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

// meanInto writes an all-reduce round's sum divided by the number of workers.
func meanInto(dst []float32, last Combined) error {
	inv := 1 / float32(last.Workers)
	for i, v := range last.Floats {
		dst[i] = v * inv
	}
	return nil
}
