package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned byte) and the
// number of dimensions, so checking the magic also checks the dimension count.
const (
	idxImagesMagic = 0x00000803
	idxLabelsMagic = 0x00000801
)

// maxIDXBytes bounds the payload a header may announce, so that a corrupt header fails
// with a message instead of a huge allocation (the largest real file is 47 MB).
const maxIDXBytes uint64 = 1 << 31

// idxImages is the content of an IDX image file.
type idxImages struct {
	n, rows, cols int
	pix           []uint8 // n*rows*cols, row-major per image
}

// readIDXImages reads an IDX3 unsigned-byte image file, gzip-compressed or raw.
func readIDXImages(path string) (idxImages, error) {
	dims, pix, err := readIDX(path, idxImagesMagic, describeImages)
	if err != nil {
		return idxImages{}, err
	}
	return idxImages{n: int(dims[0]), rows: int(dims[1]), cols: int(dims[2]), pix: pix}, nil
}

// readIDXLabels reads an IDX1 unsigned-byte label file, gzip-compressed or raw.
func readIDXLabels(path string) ([]uint8, error) {
	_, labels, err := readIDX(path, idxLabelsMagic, describeLabels)
	return labels, err
}

// describeImages and describeLabels word a header's dimensions for error messages.
func describeImages(d []uint32) string {
	return fmt.Sprintf("%d images of %dx%d", d[0], d[1], d[2])
}

func describeLabels(d []uint32) string { return fmt.Sprintf("%d labels", d[0]) }

// idxKind names the file a magic number belongs to.
func idxKind(magic uint32) string {
	if magic == idxImagesMagic {
		return "IDX images"
	}
	return "IDX labels"
}

// readIDX opens path and decodes it (see decodeIDX); errors name the path.
func readIDX(path string, magic uint32, describe func([]uint32) string) ([]uint32, []uint8, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	dims, payload, err := decodeIDX(f, fi.Size(), magic, describe)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, payload, nil
}

// readIDXHeader reads only the dimensions of the IDX file at path.
func readIDXHeader(path string, magic uint32) ([]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := maybeGunzip(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dims, _, err := readIDXDims(r, magic)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, nil
}

// decodeIDX reads an IDX stream of fileSize bytes, gzip-compressed or raw: the magic
// number, the dimensions and then exactly the payload they announce (one byte per
// element); missing or extra bytes are errors. It never allocates more than the stream
// can hold: a raw file's size is compared with the header before anything is
// allocated, and a gzip stream's payload grows only as decompressed bytes arrive.
// describe words the dimensions for error messages.
func decodeIDX(file io.Reader, fileSize int64, magic uint32, describe func([]uint32) string) ([]uint32, []uint8, error) {
	br := bufio.NewReaderSize(file, 1<<16)
	r, err := maybeGunzip(br)
	if err != nil {
		return nil, nil, err
	}
	_, gzipped := r.(*gzip.Reader)
	dims, headerLen, err := readIDXDims(r, magic)
	if err != nil {
		return nil, nil, err
	}
	size := int64(1)
	for _, d := range dims {
		size *= int64(d)
	}
	what := fmt.Sprintf("%s (%d bytes)", describe(dims), size)

	var buf []uint8
	if gzipped {
		// Decompressed data is typically 2 to 5 times the compressed size; start there
		// and grow with what actually arrives.
		buf, err = readGrowing(r, size, max(4*fileSize, 1<<16))
	} else {
		if body := fileSize - int64(headerLen); body < size {
			return nil, nil, fmt.Errorf("truncated: header says %s, file has %d after the %d-byte header", what, body, headerLen)
		}
		buf = make([]uint8, size)
		var n int
		n, err = io.ReadFull(r, buf)
		buf = buf[:n]
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, fmt.Errorf("truncated: header says %s, file has %d after the %d-byte header", what, len(buf), headerLen)
		}
		return nil, nil, err
	}
	// Reading to the end also makes gzip check its CRC.
	extra, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, nil, err
	}
	if extra > 0 {
		return nil, nil, fmt.Errorf("%d trailing bytes: header says %s, file has %d after the %d-byte header", extra, what, size+extra, headerLen)
	}
	return dims, buf, nil
}

// readIDXDims reads the magic number and the dimensions, and checks that the payload
// they announce is plausible. It returns the dimensions and the header's length.
func readIDXDims(r io.Reader, magic uint32) ([]uint32, int, error) {
	ndim := int(magic & 0xff)
	header := make([]byte, 4+4*ndim)
	if n, err := io.ReadFull(r, header[:4]); err != nil {
		return nil, 0, headerError(err, n, len(header))
	}
	if got := binary.BigEndian.Uint32(header); got != magic {
		return nil, 0, fmt.Errorf("magic number 0x%08x, expected 0x%08x (%s)", got, magic, idxKind(magic))
	}
	if n, err := io.ReadFull(r, header[4:]); err != nil {
		return nil, 0, headerError(err, 4+n, len(header))
	}
	dims := make([]uint32, ndim)
	size := uint64(1)
	for i := range dims {
		dims[i] = binary.BigEndian.Uint32(header[4+4*i:])
		size *= uint64(dims[i]) // no overflow: size <= 2^31 before, the factor < 2^32
		if size > maxIDXBytes {
			return nil, 0, fmt.Errorf("header dimensions %v announce more than %d bytes, not a plausible IDX file", dims[:i+1], maxIDXBytes)
		}
	}
	return dims, len(header), nil
}

// readGrowing reads exactly want bytes from r into a buffer that starts at
// min(want, start) bytes and doubles, up to want, only when full, so that a short
// stream costs about as much memory as it delivered. A short stream returns what
// arrived and io.ErrUnexpectedEOF.
func readGrowing(r io.Reader, want, start int64) ([]byte, error) {
	buf := make([]byte, 0, min(want, start))
	for int64(len(buf)) < want {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(want, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if int64(len(buf)) < want {
				return buf, io.ErrUnexpectedEOF
			}
			break
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// headerError reports a stream that ends inside its header.
func headerError(err error, got, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated header: %d bytes, expected %d", got, want)
	}
	return err
}

// maybeGunzip returns a decompressing reader when the stream starts with the gzip magic
// bytes 1f 8b, and br itself otherwise, so that names need not say whether a file is
// compressed.
func maybeGunzip(br *bufio.Reader) (io.Reader, error) {
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	}
	return br, nil
}
