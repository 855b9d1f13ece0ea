package data

import (
	"strings"
	"testing"
)

// writeMNIST writes an IDX split of n images of 2x3 with the given labels into
// root/<name>, gzip-compressed or raw, and returns the pixels.
func writeMNIST(t *testing.T, root, name, prefix string, labels []byte, gz bool) []byte {
	t.Helper()
	pix := testImages(len(labels), 2, 3)
	images := idxBytes(idxImagesMagic, []uint32{uint32(len(labels)), 2, 3}, pix)
	lb := idxBytes(idxLabelsMagic, []uint32{uint32(len(labels))}, labels)
	suffix := ""
	if gz {
		images, lb, suffix = gzipBytes(t, images), gzipBytes(t, lb), ".gz"
	}
	writeFile(t, root, name+"/"+prefix+"-images-idx3-ubyte"+suffix, images)
	writeFile(t, root, name+"/"+prefix+"-labels-idx1-ubyte"+suffix, lb)
	return pix
}

func TestOpenIDX(t *testing.T) {
	root := t.TempDir()
	labels := []byte{3, 1, 4, 1, 5}
	pix := writeMNIST(t, root, "fashion-mnist", "t10k", labels, true)
	// A raw copy with other labels beside the .gz: the .gz must win.
	writeMNIST(t, root, "fashion-mnist", "t10k", []byte{0, 0, 0, 0, 0}, false)

	for _, normalize := range []bool{false, true} {
		ds, err := Open(Options{Name: "fashion-mnist", Dir: root, Normalize: normalize}, "test")
		if err != nil {
			t.Fatal(err)
		}
		if ds.Name() != "fashion-mnist" || ds.Len() != 5 || ds.Classes() != 10 || ds.YLen() != 1 {
			t.Fatalf("got name %s len %d classes %d ylen %d", ds.Name(), ds.Len(), ds.Classes(), ds.YLen())
		}
		if s := ds.XShape(); len(s) != 3 || s[0] != 1 || s[1] != 2 || s[2] != 3 {
			t.Fatalf("shape %v, want [1 2 3]", s)
		}
		idx := []int{4, 0, 2}
		x := make([]float32, len(idx)*6)
		y := make([]int32, len(idx))
		ds.Fill(idx, x, y)
		for i, j := range idx {
			if y[i] != int32(labels[j]) {
				t.Errorf("normalize=%v: y[%d] = %d, want %d", normalize, i, y[i], labels[j])
			}
			for k := range 6 {
				want := float32(pix[j*6+k]) / 255
				if normalize {
					want = float32((float64(pix[j*6+k])/255 - 0.2860) / 0.3530)
				}
				if d := x[i*6+k] - want; d > 1e-6 || d < -1e-6 {
					t.Errorf("normalize=%v: x[%d] = %v, want %v", normalize, i*6+k, x[i*6+k], want)
				}
			}
		}
	}
}

func TestOpenIDXErrors(t *testing.T) {
	t.Run("count mismatch", func(t *testing.T) {
		root := t.TempDir()
		writeMNIST(t, root, "mnist", "t10k", []byte{1, 2, 3}, false)
		writeFile(t, root, "mnist/t10k-labels-idx1-ubyte", idxBytes(idxLabelsMagic, []uint32{2}, []byte{1, 2}))
		_, err := Open(Options{Name: "mnist", Dir: root}, "test")
		if err == nil || !strings.Contains(err.Error(), "t10k-images-idx3-ubyte has 3 images but ") ||
			!strings.Contains(err.Error(), "t10k-labels-idx1-ubyte has 2 labels") {
			t.Errorf("error %v, want an image/label count mismatch naming both files", err)
		}
	})
	t.Run("label out of range", func(t *testing.T) {
		root := t.TempDir()
		writeMNIST(t, root, "mnist", "train", []byte{1, 10}, true)
		_, err := Open(Options{Name: "mnist", Dir: root}, "train")
		if err == nil || !strings.Contains(err.Error(), "train-labels-idx1-ubyte.gz: label 10 of example 1 out of range [0, 10)") {
			t.Errorf("error %v, want label out of range naming the file", err)
		}
	})
}

func TestImagesFillDoesNotAllocate(t *testing.T) {
	root := t.TempDir()
	writeMNIST(t, root, "mnist", "t10k", []byte{1, 2, 3, 4}, false)
	ds, err := Open(Options{Name: "mnist", Dir: root, Normalize: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{3, 1, 2}
	x := make([]float32, 3*6)
	y := make([]int32, 3)
	if n := testing.AllocsPerRun(100, func() { ds.Fill(idx, x, y) }); n != 0 {
		t.Errorf("Fill allocates %v times per call", n)
	}
}
