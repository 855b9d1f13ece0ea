package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeIDX writes an IDX file (gzip-compressed when the name ends in .gz).
func writeIDX(t *testing.T, path string, magic uint32, dims []uint32, payload []byte) {
	t.Helper()
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(payload)
	out := b.Bytes()
	if strings.HasSuffix(path, ".gz") {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(out)
		zw.Close()
		out = z.Bytes()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDataList(t *testing.T) {
	root := t.TempDir()
	t.Setenv("GRADWIRE_DATA", root)
	// The MNIST test split only (3 images of 2x2), and a 50-character corpus.
	writeIDX(t, filepath.Join(root, "mnist", "t10k-images-idx3-ubyte.gz"), 0x803, []uint32{3, 2, 2}, make([]byte, 12))
	writeIDX(t, filepath.Join(root, "mnist", "t10k-labels-idx1-ubyte.gz"), 0x801, []uint32{3}, []byte{1, 2, 3})
	if err := os.MkdirAll(filepath.Join(root, "tinyshakespeare"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tinyshakespeare", "input.txt"), []byte(strings.Repeat("To be, or", 5)+"?????"), 0o644); err != nil {
		t.Fatal(err)
	}
	// CIFAR-10 with a damaged test batch (not a whole record) and no training batches.
	if err := os.MkdirAll(filepath.Join(root, "cifar10"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cifar10", "test_batch.bin"), make([]byte, 3000), 0o644); err != nil {
		t.Fatal(err)
	}

	out, _, err := run(t, "data", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		lines[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
	}
	for key, want := range map[string]string{
		"mnist train":           "missing (no folder holds train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, each gzipped or not; gradwire data fetch mnist)",
		"mnist test":            "3 examples " + filepath.Join(root, "mnist"),
		"tinyshakespeare train": "45 characters " + filepath.Join(root, "tinyshakespeare"),
		"tinyshakespeare test":  "5 characters " + filepath.Join(root, "tinyshakespeare"),
		"cifar10 train":         "missing (no folder holds data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin; gradwire data fetch cifar10)",
		"cifar10 test":          "unusable open cifar10 test split: " + filepath.Join(root, "cifar10", "test_batch.bin") + ": size 3000 bytes is not a positive multiple of the 3073-byte cifar10 record",
	} {
		if got := lines[key]; !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q\n%s", key, got, want, out)
		}
	}
	if len(lines) != 10 {
		t.Errorf("%d lines, want 2 for each of 5 data sets:\n%s", len(lines), out)
	}

	// --dir is searched first and must exist.
	if _, _, err := run(t, "data", "list", "--dir", filepath.Join(root, "typo")); err == nil ||
		!strings.Contains(err.Error(), "--dir "+filepath.Join(root, "typo")+": not an existing folder") {
		t.Errorf("list --dir of a missing folder: error %v", err)
	}
}

func TestDataFetchOffline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	root := t.TempDir()
	dir := filepath.Join(root, "sets")
	_, _, err = run(t, "data", "fetch", "fashion-mnist", "--dir", dir, "--base-url", closed)
	for _, want := range []string{
		"connection refused",
		"--base-url URL",
		"by hand: copy train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz into " + filepath.Join(dir, "fashion-mnist"),
		"apt-get install dataset-fashion-mnist",
		"removed the folders this fetch had created",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("left behind in %s: %v", root, entries)
	}
}

// TestDataHelp checks that the help states what the commands do (the behaviour itself
// is tested in the data package).
func TestDataHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"data", "--help"}, []string{"data.dir", "$GRADWIRE_DATA/<name>", "/usr/share/datasets/<name>", "not an existing folder is\nan error"}},
		{[]string{"data", "fetch", "--help"}, []string{"--base-url", "decompresses to the canonical content", "copying them by hand", "dataset-fashion-mnist", "removes the\nfolders it created"}},
		{[]string{"data", "list", "--help"}, []string{"number of examples", "missing", "splits whose images differ in shape"}},
	} {
		out, _, err := run(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v does not say %q:\n%s", tc.args, w, out)
			}
		}
	}
}
