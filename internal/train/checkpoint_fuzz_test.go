package train

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// withU32 returns b with the u32 at off set to v.
func withU32(b []byte, off int, v uint32) []byte {
	out := slices.Clone(b)
	binary.LittleEndian.PutUint32(out[off:], v)
	return out
}

// FuzzDecodeCheckpoint decodes arbitrary payloads, framed with a valid CRC so
// that they reach the decoder: decoding must fail or succeed without panicking,
// allocate no more than a small multiple of the input (whatever its counts
// claim), and a payload that decodes must be the one encoding of what it
// decodes to. The seeds (valid checkpoints and edits of them) run in every
// go test.
func FuzzDecodeCheckpoint(f *testing.F) {
	l := testLayout()
	payload := func(raw []byte) []byte { return raw[:len(raw)-4] }
	full := payload(encodeValid(f, fullCheckpoint(l)))
	end := epochEnd(2, []float64{2, 1})
	f.Add(full)
	f.Add(payload(encodeValid(f, end)))
	f.Add(payload(encodeValid(f, &checkpoint{Model: l.model, ParamNames: end.ParamNames, Params: end.Params,
		BufferNames: end.BufferNames, Buffers: end.Buffers, Workers: make([]workerState, l.workers)})))
	for _, edit := range []func(c *checkpoint){
		func(c *checkpoint) { c.BufferNames = c.BufferNames[:1] },
		func(c *checkpoint) { c.MetricsOffset = 1 << 40 },
		func(c *checkpoint) { c.Epoch = -1 },
		func(c *checkpoint) { c.Workers = c.Workers[:1] },
		func(c *checkpoint) { c.Optim.Buffers["m/fc1.w"] = seq(0, 11) },
	} {
		c := fullCheckpoint(l)
		edit(c)
		f.Add(payload(encodeRaw(f, c)))
	}
	// Count edits: the optimizer map, worker 0's compressor map and its "q"
	// vector, the config map, the meta length.
	optimCount := bytes.Index(full, []byte("\x04\x00\x00\x00\x07\x00\x00\x00m/fc1.w"))
	compCount := bytes.Index(full, []byte("\x02\x00\x00\x00\x01\x00\x00\x00q"))
	configCount := bytes.Index(full, []byte("\x03\x00\x00\x00\x0f\x00\x00\x00data.batch_size"))
	if optimCount < 0 || compCount < 0 || configCount < 0 {
		f.Fatal("seed offsets not found")
	}
	for _, e := range []struct {
		off int
		v   uint32
	}{{optimCount, 0xffffffff}, {compCount, 0x7fffffff}, {compCount + 9, 1 << 30}, {configCount, 1 << 31}, {headerBytes - 4, 0xfffffff0}} {
		f.Add(withU32(full, e.off, e.v))
	}
	f.Add(full[:len(full)/2])
	f.Add([]byte{})
	f.Add([]byte("GWCKPT01"))

	f.Fuzz(func(t *testing.T, payload []byte) {
		raw := frame(payload)
		var c *checkpoint
		var err error
		n := allocated(func() { c, err = decodeCheckpoint(raw, l) })
		if max := allocBound(len(raw), l); n > max {
			t.Fatalf("decoding %d bytes allocated %d bytes, expected at most %d (error %v)", len(raw), n, max, err)
		}
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := encodeCheckpoint(&again, c); err != nil {
			t.Fatalf("a decoded checkpoint does not encode: %v", err)
		}
		if !bytes.Equal(again.Bytes(), raw) {
			t.Fatal("a decoded checkpoint encodes to other bytes")
		}
	})
}

// FuzzDecodeWorkerState decodes arbitrary bytes as another process's worker
// state, with the same properties as FuzzDecodeCheckpoint.
func FuzzDecodeWorkerState(f *testing.F) {
	l := testLayout()
	for _, w := range fullCheckpoint(l).Workers {
		f.Add(encodeWorkerState(w))
	}
	full := encodeWorkerState(fullCheckpoint(l).Workers[0])
	f.Add(encodeWorkerState(workerState{}))
	// The compressor map's count, its first key's length, the "q" vector's
	// count; a cut.
	f.Add(withU32(full, 0, 1<<30))
	f.Add(withU32(full, 4, 1<<30))
	f.Add(withU32(full, 9, 1<<30))
	f.Add(full[:len(full)-3])

	f.Fuzz(func(t *testing.T, b []byte) {
		var w workerState
		var err error
		n := allocated(func() { w, err = decodeWorkerState(b, l) })
		if max := allocBound(len(b), l); n > max {
			t.Fatalf("decoding %d bytes allocated %d bytes, expected at most %d (error %v)", len(b), n, max, err)
		}
		if err == nil && !bytes.Equal(encodeWorkerState(w), b) {
			t.Fatal("a decoded worker state encodes to other bytes")
		}
	})
}
