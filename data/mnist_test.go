package data

import (
	"os"
	"path/filepath"
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
	isolate(t)
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
	isolate(t)
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
	isolate(t)
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

// writeIDXSplit writes a raw IDX split of len(labels) images of rows x cols into dir.
func writeIDXSplit(t *testing.T, dir, prefix string, rows, cols int, labels []byte) (imagesPath string) {
	t.Helper()
	n := uint32(len(labels))
	imagesPath = writeFile(t, dir, prefix+"-images-idx3-ubyte", idxBytes(idxImagesMagic, []uint32{n, uint32(rows), uint32(cols)}, testImages(len(labels), rows, cols)))
	writeFile(t, dir, prefix+"-labels-idx1-ubyte", idxBytes(idxLabelsMagic, []uint32{n}, labels))
	return imagesPath
}

func TestSplitsMustAgree(t *testing.T) {
	isolate(t)
	root := t.TempDir()
	dir := filepath.Join(root, "mnist")
	trainImages := writeIDXSplit(t, dir, "train", 28, 28, []byte{1, 2, 3})
	testImages := writeIDXSplit(t, dir, "t10k", 14, 14, []byte{4, 5})
	opts := Options{Name: "mnist", Dir: root}
	want := "mnist: the train and test splits disagree: " + trainImages + " has examples of 1x28x28 in 10 classes, " +
		testImages + " has 1x14x14 in 10 classes"

	_, _, err := OpenTrainTest(opts)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("OpenTrainTest: error %v, want %q", err, want)
	}
	// Open alone refuses either split too: it reads the other split's header.
	for _, split := range []string{"train", "test"} {
		if _, err := Open(opts, split); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open %s: error %v, want %q", split, err, want)
		}
	}

	// Without a test split, the training split opens on its own.
	for _, f := range []string{"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := Open(opts, "train"); err != nil || ds.Len() != 3 {
		t.Fatalf("train alone: %v", err)
	}

	// A test split that agrees: both open, with their own lengths.
	writeIDXSplit(t, dir, "t10k", 28, 28, []byte{4, 5})
	train, test, err := OpenTrainTest(opts)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 3 || test.Len() != 2 {
		t.Errorf("lengths %d and %d, want 3 and 2", train.Len(), test.Len())
	}

	// A test split with a broken header: the training split still opens (the header
	// error belongs to the test split), the pair does not.
	writeFile(t, dir, "t10k-images-idx3-ubyte", idxBytes(idxImagesMagic, []uint32{2}, nil))
	if _, err := Open(opts, "train"); err != nil {
		t.Errorf("train beside a broken test file: %v", err)
	}
	if _, _, err := OpenTrainTest(opts); err == nil || !strings.Contains(err.Error(), "open mnist test split: "+testImages+": truncated header") {
		t.Errorf("OpenTrainTest with a broken test file: error %v", err)
	}
}

func TestCompareSplitsClasses(t *testing.T) {
	err := compareSplits("cifar100",
		splitShape{"train", "/d/train.bin", []int{3, 32, 32}, 100},
		splitShape{"test", "/d/test.bin", []int{3, 32, 32}, 20})
	want := "cifar100: the train and test splits disagree: /d/train.bin has examples of 3x32x32 in 100 classes, /d/test.bin has 3x32x32 in 20 classes"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	if err := compareSplits("x", splitShape{"train", "a", []int{5}, 3}, splitShape{"test", "b", []int{5}, 3}); err != nil {
		t.Errorf("equal splits: %v", err)
	}
}

func TestOpenTrainTestText(t *testing.T) {
	root := t.TempDir()
	// 20 characters: the first 18 train, the last 2 validate; the vocabulary is the
	// whole corpus's (a, b, c, e), shared by both splits although the validation part
	// has only c and e.
	writeFile(t, root, "tinyshakespeare/input.txt", []byte("abababababababababce"))
	train, test, err := OpenTrainTest(Options{Name: "tinyshakespeare", Dir: root, SeqLen: 1})
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 17 || test.Len() != 1 || train.Classes() != 4 || test.Classes() != 4 {
		t.Errorf("train %d windows, %d classes; test %d windows, %d classes; want 17, 4, 1, 4",
			train.Len(), train.Classes(), test.Len(), test.Classes())
	}
}
