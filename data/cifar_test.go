package data

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// cifarPixel is the test pattern: a value that encodes example, channel, row and column.
func cifarPixel(example, c, h, w int) byte {
	return byte(example*31 + c*50 + h*3 + w*5)
}

// cifarRecords encodes records in the official binary layout: the label bytes, then
// the R, G and B planes of 32x32, each row-major.
func cifarRecords(first int, labels [][]byte) []byte {
	var b []byte
	for i, l := range labels {
		b = append(b, l...)
		for c := range 3 {
			for h := range 32 {
				for w := range 32 {
					b = append(b, cifarPixel(first+i, c, h, w))
				}
			}
		}
	}
	return b
}

func TestOpenCIFAR10(t *testing.T) {
	root := t.TempDir()
	// As the official tarball extracts: cifar10/cifar-10-batches-bin/*.bin. Batch k
	// holds examples 2(k-1) and 2(k-1)+1, with labels k and 9-k.
	for k := 1; k <= 5; k++ {
		writeFile(t, root, fmt.Sprintf("cifar10/cifar-10-batches-bin/data_batch_%d.bin", k),
			cifarRecords(2*(k-1), [][]byte{{byte(k)}, {byte(9 - k)}}))
	}
	writeFile(t, root, "cifar10/cifar-10-batches-bin/test_batch.bin", cifarRecords(0, [][]byte{{7}}))

	ds, err := Open(Options{Name: "cifar10", Dir: root}, "train")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 10 || ds.Classes() != 10 {
		t.Fatalf("len %d classes %d, want 10 and 10", ds.Len(), ds.Classes())
	}
	idx := []int{9, 0, 5}
	x := make([]float32, len(idx)*cifarPixels)
	y := make([]int32, len(idx))
	ds.Fill(idx, x, y)
	for i, j := range idx {
		k := j/2 + 1
		want := int32(k)
		if j%2 == 1 {
			want = int32(9 - k)
		}
		if y[i] != want {
			t.Errorf("label of example %d = %d, want %d", j, y[i], want)
		}
		for _, p := range [][3]int{{0, 0, 0}, {0, 5, 7}, {1, 31, 0}, {2, 0, 31}, {2, 31, 31}} {
			c, h, w := p[0], p[1], p[2]
			got := x[i*cifarPixels+c*1024+h*32+w]
			if want := float32(cifarPixel(j, c, h, w)) / 255; got != want {
				t.Errorf("example %d (c=%d h=%d w=%d) = %v, want %v", j, c, h, w, got, want)
			}
		}
	}

	test, err := Open(Options{Name: "cifar10", Dir: root}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if test.Len() != 1 {
		t.Errorf("test split has %d examples, want 1", test.Len())
	}
}

func TestOpenCIFAR100(t *testing.T) {
	root := t.TempDir()
	// Directly in the data set folder this time. Records: (coarse, fine).
	writeFile(t, root, "cifar100/train.bin", cifarRecords(0, [][]byte{{19, 99}, {3, 42}, {0, 7}}))
	writeFile(t, root, "cifar100/test.bin", cifarRecords(0, [][]byte{{1, 2}}))
	for _, tc := range []struct {
		coarse  bool
		classes int
		labels  []int32
	}{
		{false, 100, []int32{99, 42, 7}},
		{true, 20, []int32{19, 3, 0}},
	} {
		ds, err := Open(Options{Name: "cifar100", Dir: root, Normalize: true, Coarse: tc.coarse}, "train")
		if err != nil {
			t.Fatal(err)
		}
		if ds.Classes() != tc.classes || ds.Len() != 3 {
			t.Errorf("coarse=%v: classes %d len %d, want %d and 3", tc.coarse, ds.Classes(), ds.Len(), tc.classes)
		}
		x := make([]float32, 3*cifarPixels)
		y := make([]int32, 3)
		ds.Fill([]int{0, 1, 2}, x, y)
		for i := range y {
			if y[i] != tc.labels[i] {
				t.Errorf("coarse=%v: y = %v, want %v", tc.coarse, y, tc.labels)
				break
			}
		}
		// Example 1, green channel, row 2, column 3, normalised with CIFAR-100's constants.
		want := (float64(cifarPixel(1, 1, 2, 3))/255 - 0.4865) / 0.2564
		if got := x[cifarPixels+1024+2*32+3]; math.Abs(float64(got)-want) > 1e-6 {
			t.Errorf("coarse=%v: pixel = %v, want %v", tc.coarse, got, want)
		}
	}
}

func TestOpenCIFARErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		opts       Options
		content    []byte
		want       string
	}{
		{"cifar10 size", "cifar10/test_batch.bin", Options{Name: "cifar10"}, make([]byte, 3073+5),
			"test_batch.bin: size 3078 bytes is not a positive multiple of the 3073-byte cifar10 record"},
		{"cifar10 empty", "cifar10/test_batch.bin", Options{Name: "cifar10"}, nil,
			"test_batch.bin: size 0 bytes is not a positive multiple"},
		{"cifar100 size", "cifar100/test.bin", Options{Name: "cifar100"}, make([]byte, 3073),
			"test.bin: size 3073 bytes is not a positive multiple of the 3074-byte cifar100 record"},
		{"cifar10 label", "cifar10/test_batch.bin", Options{Name: "cifar10"}, cifarRecords(0, [][]byte{{1}, {10}}),
			"test_batch.bin: record 1: label 10 out of range [0, 10)"},
		{"cifar100 fine label", "cifar100/test.bin", Options{Name: "cifar100"}, cifarRecords(0, [][]byte{{1, 100}}),
			"test.bin: record 0: label 100 out of range [0, 100)"},
		{"cifar100 coarse label", "cifar100/test.bin", Options{Name: "cifar100", Coarse: true}, cifarRecords(0, [][]byte{{20, 5}}),
			"test.bin: record 0: label 20 out of range [0, 20)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, tc.file, tc.content)
			tc.opts.Dir = root
			_, err := Open(tc.opts, "test")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPadFill(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "cifar10/test_batch.bin", cifarRecords(0, [][]byte{{0}}))
	ds, err := Open(Options{Name: "cifar10", Dir: root, Normalize: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	fill := ds.(*Images).PadFill()
	mean, std := []float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616}
	for c := range 3 {
		if want := -mean[c] / std[c]; math.Abs(float64(fill[c])-want) > 1e-6 {
			t.Errorf("fill[%d] = %v, want %v", c, fill[c], want)
		}
	}
}
