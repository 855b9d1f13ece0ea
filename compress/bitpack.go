package compress

import (
	"errors"
	"math/bits"
)

// bitWriter appends bits least significant first within each byte (the first
// bit written is bit 0 of the first byte). Its bytes are padded with zeros to
// a whole byte.
type bitWriter struct {
	buf  []byte
	nbit int
}

func (w *bitWriter) reset() { w.buf, w.nbit = w.buf[:0], 0 }

// write appends the low n bits of v (n <= 57), least significant first.
func (w *bitWriter) write(v uint64, n int) {
	for n > 0 {
		if w.nbit%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		free := 8 - w.nbit%8
		take := min(free, n)
		w.buf[len(w.buf)-1] |= byte(v&(1<<take-1)) << (w.nbit % 8)
		v >>= take
		n -= take
		w.nbit += take
	}
}

// gamma appends Elias's gamma code of v >= 1: bits.Len(v)-1 zeros, then v's
// bits.Len(v) binary digits from the most significant (1 bit for 1, 3 for 2
// and 3, 5 for 4..7).
func (w *bitWriter) gamma(v uint64) {
	n := bits.Len64(v)
	w.write(0, n-1)
	for i := n - 1; i >= 0; i-- {
		w.write(v>>i&1, 1)
	}
}

// bitReader reads what bitWriter wrote.
type bitReader struct {
	buf []byte
	pos int // bits read
}

var errBitsShort = errors.New("bit stream ends early")

// read returns the next n bits (n <= 57).
func (r *bitReader) read(n int) (uint64, error) {
	if r.pos+n > 8*len(r.buf) {
		return 0, errBitsShort
	}
	var v uint64
	for i := 0; i < n; {
		b := r.buf[r.pos/8] >> (r.pos % 8)
		take := min(8-r.pos%8, n-i)
		v |= uint64(b&(1<<take-1)) << i
		i += take
		r.pos += take
	}
	return v, nil
}

// gamma reads an Elias gamma code; codes of values beyond 2^maxBits-1 are an
// error (a hostile stream cannot make it read far).
func (r *bitReader) gamma(maxBits int) (uint64, error) {
	zeros := 0
	for {
		b, err := r.read(1)
		if err != nil {
			return 0, err
		}
		if b == 1 {
			break
		}
		zeros++
		if zeros >= maxBits {
			return 0, errors.New("gamma code longer than the stream's values allow")
		}
	}
	v := uint64(1)
	for range zeros {
		b, err := r.read(1)
		if err != nil {
			return 0, err
		}
		v = v<<1 | b
	}
	return v, nil
}

// b2u is 1 for true and 0 for false, without a branch.
func b2u(b bool) uint64 {
	var u uint64
	if b {
		u = 1
	}
	return u
}
