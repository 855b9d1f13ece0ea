package data

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// survey runs Survey and returns one line per split: split, folder, examples, and
// the error's text or "ok".
func survey(t *testing.T, opts Options) []string {
	t.Helper()
	st, err := Survey(opts)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range st {
		e := "ok"
		if s.Err != nil {
			e = s.Err.Error()
		}
		lines = append(lines, fmt.Sprintf("%s %s %d %s", s.Split, s.Dir, s.Examples, e))
	}
	return lines
}

func TestSurvey(t *testing.T) {
	isolate(t)
	root := t.TempDir()
	mnist := filepath.Join(root, "mnist")
	writeIDXSplit(t, mnist, "t10k", 2, 3, []byte{1, 2, 3})

	// The MNIST test split alone: train is reported missing, test with its count.
	st, err := Survey(Options{Name: "mnist", Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Split != "train" || st[0].Dir != "" || !errors.Is(st[0].Err, ErrNotFound) ||
		st[1].Split != "test" || st[1].Dir != mnist || st[1].Examples != 3 || st[1].Err != nil {
		t.Errorf("test split only: %+v", st)
	}

	// A training split that is truncated, beside the test split.
	writeIDXSplit(t, mnist, "train", 2, 3, []byte{1, 2})
	writeFile(t, mnist, "train-images-idx3-ubyte", idxBytes(idxImagesMagic, []uint32{2, 2, 3}, testImages(1, 2, 3)))
	lines := survey(t, Options{Name: "mnist", Dir: root})
	if !strings.HasPrefix(lines[0], "train "+mnist+" 0 open mnist train split: ") || !strings.Contains(lines[0], "truncated") ||
		lines[1] != "test "+mnist+" 3 ok" {
		t.Errorf("truncated train split:\n%s", strings.Join(lines, "\n"))
	}

	// Splits that disagree: each is reported with both files.
	writeIDXSplit(t, mnist, "train", 4, 4, []byte{1, 2})
	for _, l := range survey(t, Options{Name: "mnist", Dir: root}) {
		if !strings.Contains(l, "has examples of 1x4x4 in 10 classes, "+filepath.Join(mnist, "t10k-images-idx3-ubyte")+" has 1x2x3") {
			t.Errorf("disagreeing splits: %s", l)
		}
	}

	// Text: characters per part, 90% and 10% of 20.
	writeFile(t, root, "tinyshakespeare/input.txt", []byte("abababababababababce"))
	text := filepath.Join(root, "tinyshakespeare")
	if lines := survey(t, Options{Name: "tinyshakespeare", Dir: root}); lines[0] != "train "+text+" 18 ok" || lines[1] != "test "+text+" 2 ok" {
		t.Errorf("text:\n%s", strings.Join(lines, "\n"))
	}

	// CIFAR-100 as the archive extracts it.
	writeFile(t, root, "cifar100/cifar-100-binary/train.bin", cifarRecords(0, [][]byte{{1, 2}, {3, 4}, {5, 6}}))
	writeFile(t, root, "cifar100/cifar-100-binary/test.bin", cifarRecords(0, [][]byte{{1, 2}}))
	sub := filepath.Join(root, "cifar100", "cifar-100-binary")
	if lines := survey(t, Options{Name: "cifar100", Dir: root}); lines[0] != "train "+sub+" 3 ok" || lines[1] != "test "+sub+" 1 ok" {
		t.Errorf("cifar100:\n%s", strings.Join(lines, "\n"))
	}

	if _, err := Survey(Options{Name: "mnist", Dir: filepath.Join(root, "typo")}); err == nil || !strings.Contains(err.Error(), "data.dir "+filepath.Join(root, "typo")+": no such folder") {
		t.Errorf("missing data.dir: error %v", err)
	}
}
