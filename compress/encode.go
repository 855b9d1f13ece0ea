package compress

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Wire encoding helpers: payloads are real little-endian bytes, so their length
// is what the wire carries. Encoder appends to a reusable buffer; Decoder reads
// in the same order and reports truncation instead of panicking.

// Encoder appends values to a byte buffer.
type Encoder struct{ buf []byte }

// Reset empties the buffer, keeping its capacity (no allocation per step).
func (e *Encoder) Reset() { e.buf = e.buf[:0] }

// Bytes is the encoded payload (valid until the next Reset).
func (e *Encoder) Bytes() []byte { return e.buf }

// Len is the number of bytes encoded so far.
func (e *Encoder) Len() int { return len(e.buf) }

// Uint32 appends one uint32 (lengths, counts).
func (e *Encoder) Uint32(v uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }

// Float32s appends float32 values (4 bytes each).
func (e *Encoder) Float32s(v []float32) {
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, math.Float32bits(x))
	}
}

// Float16s appends values rounded to IEEE half precision (2 bytes each).
func (e *Encoder) Float16s(v []float32) {
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint16(e.buf, F16FromF32(x))
	}
}

// Int32s appends int32 values (indices, 4 bytes each).
func (e *Encoder) Int32s(v []int32) {
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(x))
	}
}

// narrowIndexLimit is the largest tensor whose indices fit in 16 bits.
const narrowIndexLimit = 1 << 16

// indexBytes is the width of one index into a tensor of size elements: 2 with
// narrow indices when the tensor has at most 65,536 elements, else 4.
func indexBytes(size int, narrow bool) int {
	if narrow && size <= narrowIndexLimit {
		return 2
	}
	return 4
}

// Indices appends indices into a tensor of size elements, as uint16 when
// indexBytes says 2 (compress.narrow_indices), else as int32.
func (e *Encoder) Indices(v []int32, size int, narrow bool) {
	if indexBytes(size, narrow) == 4 {
		e.Int32s(v)
		return
	}
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint16(e.buf, uint16(x))
	}
}

// Raw appends bytes as they are (bit masks).
func (e *Encoder) Raw(b []byte) { e.buf = append(e.buf, b...) }

// Decoder reads a payload written by Encoder.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err is the first error met (a truncated payload).
func (d *Decoder) Err() error { return d.err }

// Done reports an error unless every byte was read.
func (d *Decoder) Done() error {
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("compress: payload has %d trailing bytes", len(d.buf)-d.off)
	}
	return d.err
}

func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || d.off+n > len(d.buf) {
		d.err = fmt.Errorf("compress: payload truncated: need %d bytes at offset %d, have %d", n, d.off, len(d.buf))
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

// Uint32 reads one uint32.
func (d *Decoder) Uint32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// Float32s reads len(dst) float32 values.
func (d *Decoder) Float32s(dst []float32) {
	b := d.take(4 * len(dst))
	if b == nil {
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// Float16s reads len(dst) half-precision values.
func (d *Decoder) Float16s(dst []float32) {
	b := d.take(2 * len(dst))
	if b == nil {
		return
	}
	for i := range dst {
		dst[i] = F32FromF16(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// Int32s reads len(dst) int32 values.
func (d *Decoder) Int32s(dst []int32) {
	b := d.take(4 * len(dst))
	if b == nil {
		return
	}
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// Indices reads len(dst) indices written by Encoder.Indices with the same
// size and narrow.
func (d *Decoder) Indices(dst []int32, size int, narrow bool) {
	if indexBytes(size, narrow) == 4 {
		d.Int32s(dst)
		return
	}
	b := d.take(2 * len(dst))
	if b == nil {
		return
	}
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// Raw reads n bytes (aliasing the payload).
func (d *Decoder) Raw(n int) []byte { return d.take(n) }

// F16FromF32 converts to IEEE 754 half precision, rounding to nearest even;
// overflow gives infinity, NaN stays NaN.
func F16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f: // overflow or infinity
		return sign | 0x7c00
	case exp <= 0: // subnormal half or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(half)
}

// F32FromF16 converts IEEE 754 half precision to float32 exactly.
func F32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: mant * 2^-24
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// RoundF16 rounds every value to half precision in place (eight at a time
// where the CPU converts in vectors, with the same bits).
func RoundF16(v []float32) {
	v = v[roundF16Vec(v):]
	for i, x := range v {
		v[i] = F32FromF16(F16FromF32(x))
	}
}
