package compress

import (
	"slices"
	"testing"
)

func TestNarrowIndices(t *testing.T) {
	idx := []int32{0, 1, 40000, 65535}
	for _, c := range []struct {
		size   int
		narrow bool
		bytes  int
	}{
		{65536, true, 8},   // 2 bytes each: the largest tensor that fits
		{65537, true, 16},  // index 65536 would not fit: int32
		{65536, false, 16}, // off: int32
		{10, true, 8},
	} {
		var e Encoder
		e.Indices(idx, c.size, c.narrow)
		if e.Len() != c.bytes || indexBytes(c.size, c.narrow)*len(idx) != c.bytes {
			t.Fatalf("size %d narrow %v: %d bytes, want %d", c.size, c.narrow, e.Len(), c.bytes)
		}
		got := make([]int32, len(idx))
		d := NewDecoder(e.Bytes())
		d.Indices(got, c.size, c.narrow)
		if err := d.Done(); err != nil || !slices.Equal(got, idx) {
			t.Fatalf("size %d narrow %v: decoded %v (%v), want %v", c.size, c.narrow, got, err, idx)
		}
	}
	// Little-endian uint16: 40000 = 0x9c40.
	var e Encoder
	e.Indices([]int32{40000}, 100, true)
	if b := e.Bytes(); len(b) != 2 || b[0] != 0x40 || b[1] != 0x9c {
		t.Fatalf("40000 encoded as % x, want 40 9c", b)
	}
	// A truncated payload is an error, not a panic.
	d := NewDecoder([]byte{1, 0, 2})
	d.Indices(make([]int32, 2), 100, true)
	if d.Err() == nil {
		t.Fatal("3 bytes decoded as two 16-bit indices")
	}
}
