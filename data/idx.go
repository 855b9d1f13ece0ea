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
const maxIDXBytes = 1 << 31

// idxImages is the content of an IDX image file.
type idxImages struct {
	n, rows, cols int
	pix           []uint8 // n*rows*cols, row-major per image
}

// readIDXImages reads an IDX3 unsigned-byte image file, gzip-compressed or raw.
func readIDXImages(path string) (idxImages, error) {
	dims, pix, err := readIDX(path, idxImagesMagic, "IDX images", func(d []uint32) string {
		return fmt.Sprintf("%d images of %dx%d", d[0], d[1], d[2])
	})
	if err != nil {
		return idxImages{}, err
	}
	return idxImages{n: int(dims[0]), rows: int(dims[1]), cols: int(dims[2]), pix: pix}, nil
}

// readIDXLabels reads an IDX1 unsigned-byte label file, gzip-compressed or raw.
func readIDXLabels(path string) ([]uint8, error) {
	_, labels, err := readIDX(path, idxLabelsMagic, "IDX labels", func(d []uint32) string {
		return fmt.Sprintf("%d labels", d[0])
	})
	return labels, err
}

// readIDX checks the magic number, reads the dimensions and then exactly the payload
// they announce (one byte per element): missing or extra bytes are errors. describe
// words the dimensions for error messages.
func readIDX(path string, magic uint32, kind string, describe func(dims []uint32) string) ([]uint32, []uint8, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r, err := maybeGunzip(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}

	ndim := int(magic & 0xff)
	header := make([]byte, 4+4*ndim)
	if n, err := io.ReadFull(r, header[:4]); err != nil {
		return nil, nil, headerError(path, err, n, len(header))
	}
	if got := binary.BigEndian.Uint32(header); got != magic {
		return nil, nil, fmt.Errorf("%s: magic number 0x%08x, expected 0x%08x (%s)", path, got, magic, kind)
	}
	if n, err := io.ReadFull(r, header[4:]); err != nil {
		return nil, nil, headerError(path, err, 4+n, len(header))
	}
	dims := make([]uint32, ndim)
	size := uint64(1)
	for i := range dims {
		dims[i] = binary.BigEndian.Uint32(header[4+4*i:])
		size *= uint64(dims[i]) // no overflow: size <= 2^31 before, the factor < 2^32
		if size > maxIDXBytes {
			return nil, nil, fmt.Errorf("%s: header dimensions %v announce more than %d bytes, not a plausible IDX file", path, dims[:i+1], maxIDXBytes)
		}
	}
	what := fmt.Sprintf("%s (%d bytes)", describe(dims), size)

	buf := make([]uint8, size)
	if n, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, fmt.Errorf("%s: truncated: header says %s, file has %d after the %d-byte header", path, what, n, len(header))
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	extra, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if extra > 0 {
		return nil, nil, fmt.Errorf("%s: %d trailing bytes: header says %s, file has %d after the %d-byte header", path, extra, what, int64(size)+extra, len(header))
	}
	return dims, buf, nil
}

// headerError reports a file that ends inside its header.
func headerError(path string, err error, got, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: truncated header: %d bytes, expected %d", path, got, want)
	}
	return fmt.Errorf("%s: %w", path, err)
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
