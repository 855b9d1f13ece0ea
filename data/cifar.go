package data

import (
	"fmt"
	"os"
	"path/filepath"
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

// openCIFAR reads one split of CIFAR-10 or CIFAR-100 (binary version) from dir.
// CIFAR-10 records are <label><3072 pixels>; CIFAR-100 records are
// <coarse label><fine label><3072 pixels>.
func openCIFAR(info Info, dir, split string, normalize, coarse bool) (*Images, error) {
	labelBytes, labelAt, classes := 1, 0, info.Classes
	if info.CoarseClasses > 0 {
		labelBytes, labelAt = 2, 1
		if coarse {
			labelAt, classes = 0, info.CoarseClasses
		}
	}
	record := labelBytes + cifarPixels

	var pix, labels []uint8
	for _, name := range info.splitFiles(split) {
		path := filepath.Join(dir, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 || len(raw)%record != 0 {
			return nil, fmt.Errorf("%s: size %d bytes is not a positive multiple of the %d-byte %s record (%d label bytes + %d pixels)",
				path, len(raw), record, info.Name, labelBytes, cifarPixels)
		}
		n := len(raw) / record
		if pix == nil {
			// Most splits are one file; cifar10 train is five of equal size.
			files := len(info.splitFiles(split))
			pix = make([]uint8, 0, files*n*cifarPixels)
			labels = make([]uint8, 0, files*n)
		}
		for i := range n {
			rec := raw[i*record : (i+1)*record]
			l := rec[labelAt]
			if int(l) >= classes {
				return nil, fmt.Errorf("%s: record %d: label %d out of range [0, %d)", path, i, l, classes)
			}
			labels = append(labels, l)
			pix = append(pix, rec[labelBytes:]...)
		}
	}
	return newImages(info.Name, info.Shape, classes, pix, labels, info.Mean, info.Std, normalize), nil
}
