package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates on the heap (runtime.MemStats.TotalAlloc
// delta; the package's tests do not run in parallel, so little else allocates).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// zeroGzip is a gzip stream of an IDX header followed by n zero bytes: small on disk,
// n bytes once decompressed.
func zeroGzip(t testing.TB, magic uint32, dims []uint32, n int) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	binary.Write(zw, binary.BigEndian, magic)
	binary.Write(zw, binary.BigEndian, dims)
	zero := make([]byte, 1<<16)
	for n > 0 {
		k := min(n, len(zero))
		zw.Write(zero[:k])
		n -= k
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestIDXHostileHeader checks that a tiny file whose header announces about 2 GB is
// refused as truncated after allocating little: a raw file's size is checked before
// allocating, a gzip stream's buffer grows only with the bytes that arrive.
func TestIDXHostileHeader(t *testing.T) {
	const huge = 0x7fffffff // 2 GiB - 1 labels, within maxIDXBytes
	bomb := zeroGzip(t, idxLabelsMagic, []uint32{huge}, 8<<20)
	// 21 bytes: the gzip header and a flushed deflate block holding an IDX labels
	// header of 1,952,006,144 labels, cut off there (no end block, no trailer).
	var cut bytes.Buffer
	zw := gzip.NewWriter(&cut)
	zw.Write(idxBytes(idxLabelsMagic, []uint32{0x74594000}, nil))
	zw.Flush()
	gz21 := cut.Bytes()[:21]
	for _, tc := range []struct {
		name    string
		file    []byte
		images  bool
		want    string
		maxHeap uint64
	}{
		{"raw labels", idxBytes(idxLabelsMagic, []uint32{huge}, nil), false,
			"truncated: header says 2147483647 labels (2147483647 bytes), file has 0 after the 8-byte header", 1 << 20},
		{"raw images", idxBytes(idxImagesMagic, []uint32{1 << 21, 32, 32}, []byte{1, 2, 3}), true,
			"truncated: header says 2097152 images of 32x32 (2147483648 bytes), file has 3 after the 16-byte header", 1 << 20},
		{"gzip labels", gzipBytes(t, idxBytes(idxLabelsMagic, []uint32{huge}, nil)), false,
			"truncated: header says 2147483647 labels (2147483647 bytes), file has 0 after the 8-byte header", 1 << 20},
		{"gzip images", gzipBytes(t, idxBytes(idxImagesMagic, []uint32{1 << 21, 32, 32}, []byte{7})), true,
			"truncated: header says 2097152 images of 32x32 (2147483648 bytes), file has 1 after the 16-byte header", 1 << 20},
		{"21-byte gzip", gz21, false,
			"truncated: header says 1952006144 labels (1952006144 bytes), file has 0 after the 8-byte header", 1 << 20},
		// 8 MiB of zeros really arrive: the buffer follows them (at most doubling), not the header.
		{"gzip of 8 MiB", bomb, false,
			"truncated: header says 2147483647 labels (2147483647 bytes), file has 8388608 after the 8-byte header", 20 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "hostile", tc.file)
			var err error
			heap := allocated(func() {
				if tc.images {
					_, err = readIDXImages(path)
				} else {
					_, err = readIDXLabels(path)
				}
			})
			if err == nil || err.Error() != path+": "+tc.want {
				t.Errorf("%d-byte file: error %v, want %q", len(tc.file), err, path+": "+tc.want)
			}
			if heap > tc.maxHeap {
				t.Errorf("%d-byte file announcing 2 GB allocated %d bytes, want at most %d", len(tc.file), heap, tc.maxHeap)
			}
		})
	}
}

// TestIDXAllocatesWhatItHolds checks that a valid file costs about its payload: once
// for a raw file, and for gzip no more than the payload plus what the growth from a
// first guess copies.
func TestIDXAllocatesWhatItHolds(t *testing.T) {
	const n, rows, cols = 500, 28, 28
	payload := n * rows * cols
	raw := idxBytes(idxImagesMagic, []uint32{n, rows, cols}, testImages(n, rows, cols))
	for _, tc := range []struct {
		name    string
		file    []byte
		maxHeap int
	}{
		{"raw", raw, payload + 256<<10},
		// Deflate shrinks these test images to a quarter or less, so the first guess
		// (4x the file) may be short and be doubled once.
		{"gzip", gzipBytes(t, raw), 3*payload + 256<<10},
	} {
		path := writeFile(t, t.TempDir(), tc.name, tc.file)
		var im idxImages
		var err error
		heap := allocated(func() { im, err = readIDXImages(path) })
		if err != nil || len(im.pix) != payload {
			t.Fatalf("%s: %d pixels, %v", tc.name, len(im.pix), err)
		}
		if heap > uint64(tc.maxHeap) {
			t.Errorf("%s: reading a %d-byte payload allocated %d bytes, want at most %d", tc.name, payload, heap, tc.maxHeap)
		}
	}
}

// idxOracle decodes an IDX file independently of decodeIDX, holding the whole
// decompressed stream in memory: ok reports whether the file is valid, and then
// payload is its payload. big reports a stream too large for the oracle to judge.
func idxOracle(b []byte, magic uint32) (payload []byte, ok, big bool) {
	const limit = 1 << 22
	content := b
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, false, false
		}
		content, err = io.ReadAll(io.LimitReader(zr, limit+1))
		if len(content) > limit {
			return nil, false, true
		}
		if err != nil {
			return nil, false, false
		}
	}
	ndim := int(magic & 0xff)
	header := 4 + 4*ndim
	if len(content) < header || binary.BigEndian.Uint32(content) != magic {
		return nil, false, false
	}
	size := uint64(1)
	for i := range ndim {
		size *= uint64(binary.BigEndian.Uint32(content[4+4*i:]))
		if size > maxIDXBytes {
			return nil, false, false
		}
	}
	if uint64(len(content)-header) != size {
		return nil, false, false
	}
	return content[header:], true, false
}

// FuzzReadIDX checks decodeIDX against idxOracle on raw and gzip input, and that it
// allocates no more than the input can hold however large the header's claim.
func FuzzReadIDX(f *testing.F) {
	images := idxBytes(idxImagesMagic, []uint32{2, 3, 2}, testImages(2, 3, 2))
	labels := idxBytes(idxLabelsMagic, []uint32{3}, []byte{1, 2, 9})
	for _, seed := range [][]byte{
		images, labels, images[:20], labels[:5], append(bytes.Clone(labels), 4),
		idxBytes(idxLabelsMagic, []uint32{0x7fffffff}, nil),
		idxBytes(idxImagesMagic, []uint32{1 << 20, 1 << 20, 1}, nil),
		idxBytes(idxImagesMagic, []uint32{0, 28, 28}, nil),
		nil, {0x1f}, {0x1f, 0x8b},
	} {
		f.Add(seed, false)
		f.Add(seed, true)
		f.Add(gzipBytes(f, seed), false)
		f.Add(gzipBytes(f, seed), true)
	}
	f.Add(zeroGzip(f, idxLabelsMagic, []uint32{0x7fffffff}, 1<<16), false)
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x62\x60\xe0\x60\x2c\x89\x74\x60\x00\x00\x00"), true) // 21 bytes announcing 1.95 GB
	f.Fuzz(func(t *testing.T, b []byte, isLabels bool) {
		magic, describe := uint32(idxImagesMagic), describeImages
		if isLabels {
			magic, describe = idxLabelsMagic, describeLabels
		}
		var dims []uint32
		var payload []byte
		var err error
		heap := allocated(func() { dims, payload, err = decodeIDX(bytes.NewReader(b), int64(len(b)), magic, describe) })
		want, ok, big := idxOracle(b, magic)
		if big {
			return
		}
		if ok != (err == nil) {
			t.Fatalf("decodeIDX error %v, oracle says valid=%v", err, ok)
		}
		if ok {
			size := 1
			for _, d := range dims {
				size *= int(d)
			}
			if !bytes.Equal(payload, want) || len(payload) != size {
				t.Fatalf("payload of %d bytes (dims %v) differs from the oracle's %d", len(payload), dims, len(want))
			}
		}
		// What the input can hold: its own size (raw) or its decompressed size
		// (gzip: the payload buffer doubles at most once past what arrived, starting
		// from 4 times the input), plus the fixed buffers of bufio and gzip.
		decompressed := uint64(len(b))
		if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
			if zr, zerr := gzip.NewReader(bytes.NewReader(b)); zerr == nil {
				n, _ := io.Copy(io.Discard, zr)
				decompressed = uint64(n)
			}
		}
		if limit := 2*decompressed + 4*uint64(len(b)) + 1<<20; heap > limit {
			t.Fatalf("%d-byte input (%d decompressed) allocated %d bytes, more than %d", len(b), decompressed, heap, limit)
		}
	})
}

// cifarOracle decodes CIFAR records independently of cifarFormat.decode: data is what
// the reader delivers, n the number of records the file's size announced.
func cifarOracle(data []byte, n int, f cifarFormat) (pix, labels []byte, err error) {
	rec := f.labelBytes + cifarPixels
	for i := range n {
		if (i+1)*rec > len(data) {
			return nil, nil, errors.New("truncated")
		}
		r := data[i*rec : (i+1)*rec]
		if int(r[f.labelAt]) >= f.classes {
			return nil, nil, fmt.Errorf("record %d: label %d out of range [0, %d)", i, r[f.labelAt], f.classes)
		}
		labels = append(labels, r[f.labelAt])
		pix = append(pix, r[f.labelBytes:]...)
	}
	return pix, labels, nil
}

// FuzzReadCIFAR checks the CIFAR record reader against cifarOracle, with the file's
// size as stat reports it (len(b)) and a stream that may end short by cut bytes, as
// when the file shrinks while it is read.
func FuzzReadCIFAR(f *testing.F) {
	f.Add(cifarRecords(0, [][]byte{{3}, {9}}), "cifar10", false, uint16(0))
	f.Add(cifarRecords(0, [][]byte{{3}, {10}}), "cifar10", false, uint16(0))
	f.Add(cifarRecords(0, [][]byte{{3}, {9}}), "cifar10", false, uint16(100))
	f.Add(cifarRecords(0, [][]byte{{19, 99}, {0, 7}}), "cifar100", false, uint16(0))
	f.Add(cifarRecords(0, [][]byte{{19, 99}, {20, 7}}), "cifar100", true, uint16(0))
	f.Add(cifarRecords(0, [][]byte{{19, 99}})[:3000], "cifar100", true, uint16(0))
	f.Add([]byte{}, "cifar10", false, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, name string, coarse bool, cut uint16) {
		info, err := Lookup(name)
		if err != nil || info.CoarseClasses == 0 && name != "cifar10" {
			return
		}
		format := newCIFARFormat(info, coarse)
		n, err := format.records(int64(len(b)))
		rec := format.record()
		if wantErr := len(b) == 0 || len(b)%rec != 0; wantErr != (err != nil) {
			t.Fatalf("records(%d) = %d, %v", len(b), n, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("size %d bytes is not a positive multiple of the %d-byte", len(b), rec)) {
				t.Fatalf("size error %v", err)
			}
			return
		}
		if n*rec != len(b) {
			t.Fatalf("records(%d) = %d of %d bytes", len(b), n, rec)
		}
		short := b[:len(b)-int(cut)%(len(b)+1)]
		pix, labels := make([]byte, n*cifarPixels), make([]byte, n)
		err = format.decode(bytes.NewReader(short), pix, labels)
		wantPix, wantLabels, wantErr := cifarOracle(short, n, format)
		switch {
		case wantErr == nil && err == nil:
			if !bytes.Equal(pix, wantPix) || !bytes.Equal(labels, wantLabels) {
				t.Fatal("decoded records differ from the oracle's")
			}
		case wantErr == nil || err == nil:
			t.Fatalf("decode error %v, oracle error %v", err, wantErr)
		case !strings.Contains(err.Error(), wantErr.Error()):
			t.Fatalf("decode error %q, oracle error %q", err, wantErr)
		}
	})
}

// TestOpenCIFARAllocatesWhatItHolds checks that a CIFAR-10 training split is read
// into one allocation of exactly its records: a large first batch does not make
// room for five of its size.
func TestOpenCIFARAllocatesWhatItHolds(t *testing.T) {
	root := t.TempDir()
	labels := make([][]byte, 100)
	for i := range labels {
		labels[i] = []byte{byte(i % 10)}
	}
	writeFile(t, root, "cifar10/data_batch_1.bin", cifarRecords(0, labels))
	for k := 2; k <= 5; k++ {
		writeFile(t, root, fmt.Sprintf("cifar10/data_batch_%d.bin", k), cifarRecords(k, [][]byte{{1}}))
	}
	writeFile(t, root, "cifar10/test_batch.bin", cifarRecords(0, [][]byte{{2}}))
	var ds Dataset
	var err error
	heap := allocated(func() { ds, err = Open(Options{Name: "cifar10", Dir: root}, "train") })
	if err != nil || ds.Len() != 104 {
		t.Fatalf("Open: %v, %d examples", err, ds.Len())
	}
	// 104 records of 3073 bytes on disk; five times the first file would be 1.5 MB.
	if limit := uint64(104*3073 + 256<<10); heap > limit {
		t.Errorf("reading 104 CIFAR-10 records allocated %d bytes, want at most %d", heap, limit)
	}
}
