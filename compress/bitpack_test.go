package compress

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGammaCodes: Elias gamma of 1..5 is 1, 010, 011, 00100, 00101 (written
// in order, least significant bit of each byte first).
func TestGammaCodes(t *testing.T) {
	var w bitWriter
	for v := uint64(1); v <= 5; v++ {
		w.gamma(v)
	}
	// Bits in write order: 1 010 011 00100 00101 = 1,0,1,0,0,1,1,0 | 0,1,0,0,0,0,1,0 | 1
	want := []byte{0b01100101, 0b01000010, 0b00000001}
	if !slices.Equal(w.buf, want) || w.nbit != 17 {
		t.Fatalf("bytes %08b (%d bits), want %08b (17 bits)", w.buf, w.nbit, want)
	}
}

func TestBitPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type item struct {
		gamma bool
		v     uint64
		n     int
	}
	var items []item
	var w bitWriter
	for range 5000 {
		if rng.IntN(2) == 0 {
			v := 1 + rng.Uint64N(1<<uint(rng.IntN(40)))
			items = append(items, item{true, v, 0})
			w.gamma(v)
		} else {
			n := rng.IntN(58)
			v := rng.Uint64() & (1<<n - 1)
			items = append(items, item{false, v, n})
			w.write(v, n)
		}
	}
	r := bitReader{buf: w.buf}
	for i, it := range items {
		var got uint64
		var err error
		if it.gamma {
			got, err = r.gamma(64)
		} else {
			got, err = r.read(it.n)
		}
		if err != nil || got != it.v {
			t.Fatalf("item %d: got %d (%v), want %d", i, got, err, it.v)
		}
	}
	if r.pos != w.nbit {
		t.Fatalf("read %d bits, wrote %d", r.pos, w.nbit)
	}
}

func TestBitReaderRefusesShortAndLongCodes(t *testing.T) {
	r := bitReader{buf: []byte{0xff}}
	if _, err := r.read(9); err == nil {
		t.Error("read 9 bits from one byte")
	}
	r = bitReader{buf: []byte{0, 0, 0, 0}}
	if _, err := r.gamma(10); err == nil {
		t.Error("a gamma code of 32 zeros accepted with 10 bits allowed")
	}
	r = bitReader{buf: []byte{0b00000100}} // 00 1, then the stream ends
	if _, err := r.gamma(10); err != nil {
		t.Errorf("gamma: %v", err)
	}
	r = bitReader{buf: []byte{0}}
	if _, err := r.gamma(64); err == nil {
		t.Error("a gamma code running past the stream accepted")
	}
}
