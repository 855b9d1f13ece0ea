package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// useSystemDir points the /usr/share/datasets candidate at dir for one test.
func useSystemDir(t *testing.T, dir string) {
	old := systemDataDir
	systemDataDir = dir
	t.Cleanup(func() { systemDataDir = old })
}

// isolate hides $GRADWIRE_DATA and /usr/share/datasets from one test, so that only
// the folders it writes are searched (a split missing there must not be found in a
// real copy, whose images differ from the test's).
func isolate(t *testing.T) {
	t.Setenv(EnvDataDir, "")
	useSystemDir(t, filepath.Join(t.TempDir(), "none"))
}

// touch creates empty files (Locate only checks that they exist).
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		writeFile(t, dir, n, nil)
	}
}

var fashionFiles = []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}

func TestLocateOrder(t *testing.T) {
	root := t.TempDir()
	cfg, env, sys := filepath.Join(root, "cfg"), filepath.Join(root, "env"), filepath.Join(root, "sys")
	useSystemDir(t, sys)
	t.Setenv(EnvDataDir, env)
	places := []string{
		filepath.Join(cfg, "fashion-mnist"),
		cfg,
		filepath.Join(env, "fashion-mnist"),
		filepath.Join(sys, "fashion-mnist"),
	}
	for _, p := range places {
		touch(t, p, fashionFiles...)
	}
	// Each place wins while it holds the files; then the next one does.
	for _, want := range places {
		got, err := Locate("fashion-mnist", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Locate = %s, want %s", got, want)
		}
		for _, f := range fashionFiles {
			if err := os.Remove(filepath.Join(want, f)); err != nil {
				t.Fatal(err)
			}
		}
	}

	_, err := Locate("fashion-mnist", cfg)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	msg := err.Error()
	for _, want := range append(places,
		"fashion-mnist (any split)",
		"train: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz; test: t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz",
		"also be uncompressed",
		"gradwire data fetch fashion-mnist --dir "+cfg,
		"apt-get install dataset-fashion-mnist",
	) {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	// The order of the listing is the search order.
	last := -1
	for _, p := range places {
		i := strings.Index(msg, "  "+p+": ")
		if i <= last {
			t.Errorf("%s listed out of order:\n%s", p, msg)
		}
		last = i
	}
}

func TestLocateWithoutDirOrEnv(t *testing.T) {
	root := t.TempDir()
	useSystemDir(t, root)
	t.Setenv(EnvDataDir, "")
	_, err := Locate("tinyshakespeare", "")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(root, "tinyshakespeare") + ": no such folder",
		"$GRADWIRE_DATA is not set",
		"expected the files of one split: train: input.txt; test: input.txt",
		"gradwire data fetch tinyshakespeare --dir DIR",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "apt-get") || strings.Contains(msg, "uncompressed") {
		t.Errorf("error gives Fashion-MNIST or IDX advice for text:\n%s", msg)
	}

	touch(t, filepath.Join(root, "tinyshakespeare"), "input.txt")
	if got, err := Locate("tinyshakespeare", ""); err != nil || got != filepath.Join(root, "tinyshakespeare") {
		t.Errorf("Locate = %s, %v", got, err)
	}
}

func TestLocateSplitAndRawFiles(t *testing.T) {
	root := t.TempDir()
	useSystemDir(t, filepath.Join(root, "none"))
	t.Setenv(EnvDataDir, root)
	// The MNIST test split only, uncompressed.
	touch(t, filepath.Join(root, "mnist"), "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte")
	want := filepath.Join(root, "mnist")
	for _, split := range []string{"", "test", "val"} {
		var got string
		var err error
		if split == "" {
			got, err = Locate("mnist", "")
		} else {
			got, err = LocateSplit("mnist", "", split)
		}
		if err != nil || got != want {
			t.Errorf("split %q: %s, %v; want %s", split, got, err, want)
		}
	}
	_, err := LocateSplit("mnist", "", "train")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("train split: error %v, want ErrNotFound", err)
	}
	for _, s := range []string{
		"mnist (train split)",
		want + ": train split lacks train-labels-idx1-ubyte.gz\n",
		"expected files: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz",
		"gradwire data fetch mnist --dir " + root,
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q:\n%s", s, err)
		}
	}
	if _, err := LocateSplit("mnist", "", "validation"); err == nil || !strings.Contains(err.Error(), "unknown split") {
		t.Errorf("unknown split: error %v", err)
	}
}

func TestLocateCIFARSubfolder(t *testing.T) {
	root := t.TempDir()
	useSystemDir(t, filepath.Join(root, "none"))
	t.Setenv(EnvDataDir, "")
	sub := filepath.Join(root, "cifar100", "cifar-100-binary")
	_, err := Locate("cifar100", root)
	for _, p := range []string{filepath.Join(root, "cifar100"), sub, root, filepath.Join(root, "cifar-100-binary")} {
		if err == nil || !strings.Contains(err.Error(), "  "+p+": ") {
			t.Errorf("error does not list %s:\n%v", p, err)
		}
	}
	touch(t, sub, "train.bin", "test.bin")
	if got, err := Locate("cifar100", root); err != nil || got != sub {
		t.Errorf("Locate = %s, %v; want %s", got, err, sub)
	}
}

func TestUnknownName(t *testing.T) {
	for _, err := range []error{
		func() error { _, err := Locate("imagenet", ""); return err }(),
		func() error { _, err := Open(Options{Name: "imagenet"}, "train"); return err }(),
		Fetch(t.Context(), "imagenet", t.TempDir(), FetchOptions{}),
	} {
		if err == nil || errors.Is(err, ErrNotFound) ||
			!strings.Contains(err.Error(), `unknown data set "imagenet"; valid names: fashion-mnist, mnist, cifar10, cifar100, tinyshakespeare`) {
			t.Errorf("error %v, want an unknown-name error listing the names", err)
		}
	}
}

// TestMissingDataDir checks that a data.dir that is not a folder is an error naming
// data.dir and the path, even when $GRADWIRE_DATA holds the data set.
func TestMissingDataDir(t *testing.T) {
	root := t.TempDir()
	useSystemDir(t, filepath.Join(root, "none"))
	t.Setenv(EnvDataDir, root)
	touch(t, filepath.Join(root, "tinyshakespeare"), "input.txt")
	missing := filepath.Join(root, "typo")
	file := writeFile(t, root, "a-file", nil)
	for _, tc := range []struct{ dir, want string }{
		{missing, "data.dir " + missing + ": no such folder"},
		{file, "data.dir " + file + ": not a folder"},
	} {
		for what, err := range map[string]error{
			"Locate":      func() error { _, err := Locate("tinyshakespeare", tc.dir); return err }(),
			"LocateSplit": func() error { _, err := LocateSplit("tinyshakespeare", tc.dir, "train"); return err }(),
			"Open": func() error {
				_, err := Open(Options{Name: "tinyshakespeare", Dir: tc.dir, SeqLen: 1}, "train")
				return err
			}(),
			"OpenTrainTest": func() error {
				_, _, err := OpenTrainTest(Options{Name: "tinyshakespeare", Dir: tc.dir, SeqLen: 1})
				return err
			}(),
		} {
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrNotFound) {
				t.Errorf("%s with data.dir %s: error %v, want %q (not ErrNotFound)", what, tc.dir, err, tc.want)
			}
		}
	}
	// Without data.dir, $GRADWIRE_DATA is used.
	if got, err := Locate("tinyshakespeare", ""); err != nil || got != filepath.Join(root, "tinyshakespeare") {
		t.Errorf("Locate without data.dir = %s, %v", got, err)
	}
}
