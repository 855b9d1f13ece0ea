package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idxBytes encodes an IDX file: magic, dimensions, payload.
func idxBytes(magic uint32, dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(payload)
	return b.Bytes()
}

// gzipBytes compresses b.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// writeFile writes b to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testImages returns n images of rows x cols with distinct-ish pixel values.
func testImages(n, rows, cols int) []byte {
	pix := make([]byte, n*rows*cols)
	for i := range pix {
		pix[i] = byte(i*7 + 3)
	}
	return pix
}

func TestIDXRoundTrip(t *testing.T) {
	dir := t.TempDir()
	pix := testImages(3, 4, 5)
	labels := []byte{2, 0, 9}
	images := idxBytes(idxImagesMagic, []uint32{3, 4, 5}, pix)
	labelFile := idxBytes(idxLabelsMagic, []uint32{3}, labels)
	for _, tc := range []struct {
		name string
		gz   bool
	}{
		{"raw", false},
		{"gzip.gz", true},
		{"gzip-without-suffix", true}, // detected by the magic bytes, not the name
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, lb := images, labelFile
			if tc.gz {
				im, lb = gzipBytes(t, im), gzipBytes(t, lb)
			}
			got, err := readIDXImages(writeFile(t, dir, tc.name+"-images", im))
			if err != nil {
				t.Fatal(err)
			}
			if got.n != 3 || got.rows != 4 || got.cols != 5 || !bytes.Equal(got.pix, pix) {
				t.Errorf("images: got n=%d %dx%d, pixels equal %v", got.n, got.rows, got.cols, bytes.Equal(got.pix, pix))
			}
			gotLabels, err := readIDXLabels(writeFile(t, dir, tc.name+"-labels", lb))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotLabels, labels) {
				t.Errorf("labels %v, want %v", gotLabels, labels)
			}
		})
	}
}

func TestIDXErrors(t *testing.T) {
	dir := t.TempDir()
	pix := testImages(2, 3, 3)
	for _, tc := range []struct {
		name   string
		file   []byte
		labels bool
		want   string
	}{
		{"wrong magic", idxBytes(idxLabelsMagic, []uint32{2, 3, 3}, pix), false,
			"magic number 0x00000801, expected 0x00000803 (IDX images)"},
		{"labels as images", idxBytes(idxImagesMagic, []uint32{2}, pix), true,
			"magic number 0x00000803, expected 0x00000801 (IDX labels)"},
		{"truncated payload", idxBytes(idxImagesMagic, []uint32{2, 3, 3}, pix[:17]), false,
			"truncated: header says 2 images of 3x3 (18 bytes), file has 17 after the 16-byte header"},
		{"truncated header", idxBytes(idxImagesMagic, []uint32{2}, nil), false,
			"truncated header: 8 bytes, expected 16"},
		{"trailing bytes", idxBytes(idxLabelsMagic, []uint32{2}, []byte{1, 2, 3}), true,
			"1 trailing bytes: header says 2 labels (2 bytes), file has 3 after the 8-byte header"},
		{"empty", nil, true, "truncated header: 0 bytes, expected 8"},
		{"implausible", idxBytes(idxImagesMagic, []uint32{1 << 20, 1 << 20, 1}, nil), false,
			"not a plausible IDX file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, gz := range []bool{false, true} {
				b := tc.file
				if gz {
					b = gzipBytes(t, b)
				}
				path := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-"), b)
				var err error
				if tc.labels {
					_, err = readIDXLabels(path)
				} else {
					_, err = readIDXImages(path)
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
					t.Errorf("gzip=%v: error %v, want %q prefixed with the path", gz, err, tc.want)
				}
			}
		})
	}
}

func TestIDXCorruptGzip(t *testing.T) {
	b := gzipBytes(t, idxBytes(idxLabelsMagic, []uint32{3}, []byte{1, 2, 3}))
	b[len(b)-5] ^= 0xff // the CRC-32 in the trailer
	path := writeFile(t, t.TempDir(), "labels.gz", b)
	if _, err := readIDXLabels(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt gzip: error %v, want one naming %s", err, path)
	}
}
