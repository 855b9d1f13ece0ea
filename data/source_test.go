package data

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Dir(dst), filepath.Base(dst), b)
}

func sourcesOf(t *testing.T, opts Options) Source {
	t.Helper()
	src, err := Sources(opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSources(t *testing.T) {
	isolate(t)
	root := t.TempDir()
	dir := filepath.Join(root, "mnist")
	// A training file larger than the 64 KiB head: 100 images of 28x28 (78,416 bytes).
	train := idxBytes(idxImagesMagic, []uint32{100, 28, 28}, testImages(100, 28, 28))
	writeFile(t, dir, "train-images-idx3-ubyte", train)
	trainLabels := gzipBytes(t, idxBytes(idxLabelsMagic, []uint32{100}, make([]byte, 100)))
	writeFile(t, dir, "train-labels-idx1-ubyte.gz", trainLabels)
	writeIDXSplit(t, dir, "t10k", 28, 28, []byte{1, 2})
	// A raw copy beside the .gz: Open reads the .gz, so Sources lists it.
	writeFile(t, dir, "train-labels-idx1-ubyte", []byte("ignored"))

	src := sourcesOf(t, Options{Name: "mnist", Dir: root})
	if src.Dir != dir {
		t.Errorf("Dir = %s, want %s", src.Dir, dir)
	}
	t10kImages, _ := os.ReadFile(filepath.Join(dir, "t10k-images-idx3-ubyte"))
	t10kLabels, _ := os.ReadFile(filepath.Join(dir, "t10k-labels-idx1-ubyte"))
	want := []SourceFile{
		{"train", "train-images-idx3-ubyte", int64(len(train)), sha256Hex(train[:64<<10])},
		{"train", "train-labels-idx1-ubyte.gz", int64(len(trainLabels)), sha256Hex(trainLabels)},
		{"test", "t10k-images-idx3-ubyte", int64(len(t10kImages)), sha256Hex(t10kImages)},
		{"test", "t10k-labels-idx1-ubyte", int64(len(t10kLabels)), sha256Hex(t10kLabels)},
	}
	if !slices.Equal(src.Files, want) {
		t.Errorf("Files =\n%+v\nwant\n%+v", src.Files, want)
	}

	// The order of Files does not matter to the digest; the folder does not either.
	d := src.Digest()
	if len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
		t.Errorf("digest %q is not hex SHA-256", d)
	}
	reversed := Source{Dir: "elsewhere", Files: slices.Clone(src.Files)}
	slices.Reverse(reversed.Files)
	if reversed.Digest() != d {
		t.Error("digest depends on the order of Files or on Dir")
	}
	other := t.TempDir()
	for _, f := range src.Files {
		copyFile(t, filepath.Join(dir, f.Path), filepath.Join(other, "mnist", f.Path))
	}
	if got := sourcesOf(t, Options{Name: "mnist", Dir: other}); got.Digest() != d || got.Dir != filepath.Join(other, "mnist") {
		t.Errorf("the same files in %s: digest %s (want %s), Dir %s", other, got.Digest(), d, got.Dir)
	}

	// A folder with other files.
	different := t.TempDir()
	writeIDXSplit(t, filepath.Join(different, "mnist"), "train", 28, 28, []byte{3, 1, 4})
	writeIDXSplit(t, filepath.Join(different, "mnist"), "t10k", 28, 28, []byte{1, 5})
	if sourcesOf(t, Options{Name: "mnist", Dir: different}).Digest() == d {
		t.Error("two folders with different files give the same digest")
	}

	// Replaced training data: the t10k files copied in as the training split.
	copyFile(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), filepath.Join(other, "mnist", "train-images-idx3-ubyte"))
	replaced := sourcesOf(t, Options{Name: "mnist", Dir: other})
	if replaced.Digest() == d {
		t.Error("digest unchanged after the training images were replaced by the test images")
	}
	if f := replaced.Files[0]; f.Size != int64(len(t10kImages)) || f.HeadSHA256 != sha256Hex(t10kImages) {
		t.Errorf("replaced training file: %+v", f)
	}

	// Different files of the same size and head: only bytes past 64 KiB differ, which
	// the digest does not read (the price of fingerprinting without reading it all).
	changed := slices.Clone(train)
	changed[len(changed)-1] ^= 1
	writeFile(t, dir, "train-images-idx3-ubyte", changed)
	if sourcesOf(t, Options{Name: "mnist", Dir: root}).Digest() != d {
		t.Error("a change past the first 64 KiB changed the digest; Digest is documented to read only the head")
	}
	writeFile(t, dir, "train-images-idx3-ubyte", changed[:len(changed)-1])
	if sourcesOf(t, Options{Name: "mnist", Dir: root}).Digest() == d {
		t.Error("digest unchanged after the training file lost a byte")
	}
}

func TestSourcesSplitsInTwoFolders(t *testing.T) {
	isolate(t)
	root := t.TempDir()
	cfg, env := filepath.Join(root, "cfg"), filepath.Join(root, "env")
	t.Setenv(EnvDataDir, env)
	writeIDXSplit(t, filepath.Join(cfg, "mnist"), "train", 2, 3, []byte{1})
	writeIDXSplit(t, filepath.Join(env, "mnist"), "t10k", 2, 3, []byte{2})
	src := sourcesOf(t, Options{Name: "mnist", Dir: cfg})
	var paths []string
	for _, f := range src.Files {
		paths = append(paths, f.Split+" "+f.Path)
	}
	want := []string{
		"train " + filepath.Join("cfg", "mnist", "train-images-idx3-ubyte"),
		"train " + filepath.Join("cfg", "mnist", "train-labels-idx1-ubyte"),
		"test " + filepath.Join("env", "mnist", "t10k-images-idx3-ubyte"),
		"test " + filepath.Join("env", "mnist", "t10k-labels-idx1-ubyte"),
	}
	if src.Dir != root || !slices.Equal(paths, want) {
		t.Errorf("Dir %s, files %v; want %s and %v", src.Dir, paths, root, want)
	}
}

func TestSourcesTextAndErrors(t *testing.T) {
	isolate(t)
	root := t.TempDir()
	corpus := []byte("To be, or not to be, that is the question")
	writeFile(t, root, "tinyshakespeare/input.txt", corpus)
	src := sourcesOf(t, Options{Name: "tinyshakespeare", Dir: root})
	want := []SourceFile{
		{"train", "input.txt", int64(len(corpus)), sha256Hex(corpus)},
		{"test", "input.txt", int64(len(corpus)), sha256Hex(corpus)},
	}
	if !slices.Equal(src.Files, want) {
		t.Errorf("Files = %+v, want %+v", src.Files, want)
	}

	// The MNIST test split alone: the training split is missing.
	writeIDXSplit(t, filepath.Join(root, "mnist"), "t10k", 2, 3, []byte{1})
	if _, err := Sources(Options{Name: "mnist", Dir: root}); err == nil || !strings.Contains(err.Error(), "mnist (train split)") {
		t.Errorf("mnist without train split: error %v", err)
	}
	if _, err := Sources(Options{Name: "mnist", Dir: filepath.Join(root, "typo")}); err == nil || !strings.Contains(err.Error(), "data.dir") {
		t.Errorf("missing data.dir: error %v", err)
	}
}
