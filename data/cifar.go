package data

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// cifarPixels is the number of pixel bytes per CIFAR record: 3 planes (R, G, B) of
// 32x32, already in CHW order.
const cifarPixels = 3 * 32 * 32

// cifarSubdir is the folder the official binary tarball of a data set extracts to;
// Locate accepts the files there as well as directly in the data set folder.
var cifarSubdir = map[string]string{
	"cifar10":  "cifar-10-batches-bin",
	"cifar100": "cifar-100-binary",
}

// cifarFormat is the record layout of one CIFAR data set: CIFAR-10 records are
// <label><3072 pixels>; CIFAR-100 records are <coarse label><fine label><3072 pixels>.
type cifarFormat struct {
	name       string
	labelBytes int // label bytes before the pixels
	labelAt    int // which of them is used
	classes    int // labels must be below this
}

// newCIFARFormat returns the layout of info's records, reading the coarse label of
// CIFAR-100 when coarse is set.
func newCIFARFormat(info Info, coarse bool) cifarFormat {
	f := cifarFormat{name: info.Name, labelBytes: 1, classes: info.Classes}
	if info.CoarseClasses > 0 {
		f.labelBytes, f.labelAt = 2, 1
		if coarse {
			f.labelAt, f.classes = 0, info.CoarseClasses
		}
	}
	return f
}

// record is the size of one record in bytes.
func (f cifarFormat) record() int { return f.labelBytes + cifarPixels }

// records returns how many records a file of size bytes holds; a size that is not a
// positive multiple of the record is an error.
func (f cifarFormat) records(size int64) (int, error) {
	rec := int64(f.record())
	if size <= 0 || size%rec != 0 {
		return 0, fmt.Errorf("size %d bytes is not a positive multiple of the %d-byte %s record (%d label bytes + %d pixels)",
			size, rec, f.name, f.labelBytes, cifarPixels)
	}
	return int(size / rec), nil
}

// decode reads len(labels) records from r into labels and pix (which holds
// len(labels)*cifarPixels bytes), checking every label.
func (f cifarFormat) decode(r io.Reader, pix, labels []uint8) error {
	rec := make([]byte, f.record())
	for i := range labels {
		if _, err := io.ReadFull(r, rec); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("truncated: record %d of %d ends early", i, len(labels))
			}
			return err
		}
		l := rec[f.labelAt]
		if int(l) >= f.classes {
			return fmt.Errorf("record %d: label %d out of range [0, %d)", i, l, f.classes)
		}
		labels[i] = l
		copy(pix[i*cifarPixels:(i+1)*cifarPixels], rec[f.labelBytes:])
	}
	return nil
}

// openCIFAR reads one split of CIFAR-10 or CIFAR-100 (binary version) from its files.
// The sizes of all files are checked before anything is allocated, and exactly what
// they hold is allocated once.
func openCIFAR(info Info, paths []string, normalize, coarse bool) (*Images, error) {
	format := newCIFARFormat(info, coarse)
	counts := make([]int, len(paths))
	total := 0
	for i, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if counts[i], err = format.records(fi.Size()); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		total += counts[i]
	}
	pix := make([]uint8, total*cifarPixels)
	labels := make([]uint8, total)
	at := 0
	br := bufio.NewReaderSize(nil, 1<<16) // one buffer for every file
	for i, path := range paths {
		if err := readCIFARFile(path, br, format, pix[at*cifarPixels:(at+counts[i])*cifarPixels], labels[at:at+counts[i]]); err != nil {
			return nil, err
		}
		at += counts[i]
	}
	return newImages(info.Name, info.Shape, format.classes, pix, labels, info.Mean, info.Std, normalize), nil
}

// readCIFARFile decodes the records of one file into pix and labels, reading through
// br; errors name the file.
func readCIFARFile(path string, br *bufio.Reader, format cifarFormat, pix, labels []uint8) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	br.Reset(file)
	if err := format.decode(br, pix, labels); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
