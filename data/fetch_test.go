package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// server serves files by name under /files/ and counts the requests.
type server struct {
	*httptest.Server
	files    map[string][]byte
	requests atomic.Int32
}

func newServer(t *testing.T, files map[string][]byte) *server {
	s := &server{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		b, ok := s.files[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// options returns FetchOptions that download from the test server, with the
// catalogue's checksums (and archive member sizes) replaced by those of content.
func (s *server) options(name string, content map[string][]byte, progress *bytes.Buffer) FetchOptions {
	src := sources[name]
	files := make([]remote, len(src.files))
	for i, r := range src.files {
		r.sum = sumOf(r.sum.algo, content[r.name])
		members := slices.Clone(r.members)
		for j := range members {
			members[j].size = int64(len(content[members[j].name]))
		}
		r.members = members
		files[i] = r
	}
	opts := FetchOptions{BaseURL: s.URL + "/files", Client: s.Client(), sources: map[string]source{name: {base: src.base, files: files}}}
	if progress != nil {
		opts.Progress = progress
	}
	return opts
}

func sumOf(algo string, b []byte) checksum {
	if algo == "md5" {
		s := md5.Sum(b)
		return checksum{algo, hex.EncodeToString(s[:])}
	}
	s := sha256.Sum256(b)
	return checksum{algo, hex.EncodeToString(s[:])}
}

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mnistFiles returns a small, valid MNIST in the published layout: 3 test and 4 train
// images of 2x3, gzip-compressed.
func mnistFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	for prefix, labels := range map[string][]byte{"t10k": {1, 2, 3}, "train": {4, 5, 6, 7}} {
		n := uint32(len(labels))
		files[prefix+"-images-idx3-ubyte.gz"] = gzipBytes(t, idxBytes(idxImagesMagic, []uint32{n, 2, 3}, testImages(int(n), 2, 3)))
		files[prefix+"-labels-idx1-ubyte.gz"] = gzipBytes(t, idxBytes(idxLabelsMagic, []uint32{n}, labels))
	}
	return files
}

func TestFetch(t *testing.T) {
	files := mnistFiles(t)
	srv := newServer(t, files)
	dir := t.TempDir()
	var progress bytes.Buffer
	opts := srv.options("mnist", files, &progress)
	if err := Fetch(t.Context(), "mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "mnist")
	want := []string{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}
	if got := listDir(t, dest); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v (and no temporary files)", got, want)
	}
	for name, b := range files {
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: content differs (%v)", name, err)
		}
	}
	if !strings.Contains(progress.String(), "train-images-idx3-ubyte.gz") || !strings.Contains(progress.String(), "saved") {
		t.Errorf("progress output lacks the file names:\n%s", progress.String())
	}
	// What Fetch leaves is what Open reads.
	ds, err := Open(Options{Name: "mnist", Dir: dir}, "train")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 4 {
		t.Errorf("fetched train split has %d examples, want 4", ds.Len())
	}

	// Everything present: nothing downloaded.
	srv.requests.Store(0)
	if err := Fetch(t.Context(), "mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("second fetch made %d requests, want 0", n)
	}
	// A damaged file is downloaded again, and only that one.
	writeFile(t, dest, "t10k-labels-idx1-ubyte.gz", []byte("damaged"))
	if err := Fetch(t.Context(), "mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("fetch after damage made %d requests, want 1", n)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "t10k-labels-idx1-ubyte.gz")); !bytes.Equal(got, files["t10k-labels-idx1-ubyte.gz"]) {
		t.Error("damaged file not replaced")
	}
}

func TestFetchChecksumMismatch(t *testing.T) {
	content := map[string][]byte{"input.txt": []byte("To be, or not to be\n")}
	srv := newServer(t, map[string][]byte{"input.txt": []byte("To be, or not to be?\n")})
	dir := t.TempDir()
	opts := srv.options("tinyshakespeare", content, nil)
	err := Fetch(t.Context(), "tinyshakespeare", dir, opts)
	want := sumOf("sha256", content["input.txt"]).hex
	got := sumOf("sha256", srv.files["input.txt"]).hex
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/files/input.txt: sha256 checksum mismatch: expected "+want+", got "+got) {
		t.Fatalf("error %v, want a checksum mismatch naming the URL, expected and got", err)
	}
	if names := listDir(t, filepath.Join(dir, "tinyshakespeare")); len(names) != 0 {
		t.Errorf("files left behind: %v", names)
	}
}

func TestFetchHTTPError(t *testing.T) {
	srv := newServer(t, map[string][]byte{})
	dir := t.TempDir()
	err := Fetch(t.Context(), "tinyshakespeare", dir, srv.options("tinyshakespeare", nil, nil))
	if err == nil || !strings.Contains(err.Error(), "404 Not Found") || !strings.Contains(err.Error(), srv.URL+"/files/input.txt") {
		t.Fatalf("error %v, want a 404 naming the URL", err)
	}
	if names := listDir(t, filepath.Join(dir, "tinyshakespeare")); len(names) != 0 {
		t.Errorf("files left behind: %v", names)
	}
}

// tarGz packs files (path in the archive -> content) into a tar.gz.
func tarGz(t *testing.T, files [][2]string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "cifar-10-batches-bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFetchArchive(t *testing.T) {
	// As the official archive: the batches in cifar-10-batches-bin/, with extra files.
	content := map[string][]byte{}
	var entries [][2]string
	for i, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		content[name] = cifarRecords(i, [][]byte{{byte(i)}, {byte(9 - i)}})
		entries = append(entries, [2]string{"cifar-10-batches-bin/" + name, string(content[name])})
	}
	entries = append(entries, [2]string{"cifar-10-batches-bin/batches.meta.txt", "airplane\n"}, [2]string{"cifar-10-batches-bin/readme.html", "<html>"})
	archive := tarGz(t, entries)
	content["cifar-10-binary.tar.gz"] = archive
	srv := newServer(t, map[string][]byte{"cifar-10-binary.tar.gz": archive})
	dir := t.TempDir()
	var progress bytes.Buffer
	opts := srv.options("cifar10", content, &progress)
	if err := Fetch(t.Context(), "cifar10", dir, opts); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "cifar10")
	info, _ := Lookup("cifar10")
	if got := listDir(t, dest); !slices.Equal(got, slices.Sorted(slices.Values(info.Files))) {
		t.Fatalf("files %v, want only %v", got, info.Files)
	}
	for _, name := range info.Files {
		if got, _ := os.ReadFile(filepath.Join(dest, name)); !bytes.Equal(got, content[name]) {
			t.Errorf("%s: content differs", name)
		}
	}
	ds, err := Open(Options{Name: "cifar10", Dir: dir}, "train")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 10 {
		t.Errorf("fetched train split has %d examples, want 10", ds.Len())
	}
	srv.requests.Store(0)
	if err := Fetch(t.Context(), "cifar10", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("second fetch made %d requests, want 0", n)
	}
}

func TestFetchArchiveIncomplete(t *testing.T) {
	archive := tarGz(t, [][2]string{{"cifar-100-binary/train.bin", "abc"}})
	content := map[string][]byte{"cifar-100-binary.tar.gz": archive, "train.bin": []byte("abc"), "test.bin": []byte("de")}
	srv := newServer(t, map[string][]byte{"cifar-100-binary.tar.gz": archive})
	dir := t.TempDir()
	err := Fetch(t.Context(), "cifar100", dir, srv.options("cifar100", content, nil))
	if err == nil || !strings.Contains(err.Error(), "cifar-100-binary.tar.gz: archive lacks test.bin") {
		t.Fatalf("error %v, want a missing member", err)
	}
	if names := listDir(t, filepath.Join(dir, "cifar100")); len(names) != 0 {
		t.Errorf("files left behind: %v", names)
	}
}

// TestCatalogue checks the download catalogue against the data set descriptions.
func TestCatalogue(t *testing.T) {
	hexRE := map[string]*regexp.Regexp{"md5": regexp.MustCompile(`^[0-9a-f]{32}$`), "sha256": regexp.MustCompile(`^[0-9a-f]{64}$`)}
	for _, name := range Names() {
		src, ok := sources[name]
		if !ok {
			t.Errorf("%s: no download source", name)
			continue
		}
		if !strings.HasPrefix(src.base, "http") || !strings.HasSuffix(src.base, "/") {
			t.Errorf("%s: base URL %q", name, src.base)
		}
		var fetched []string
		for _, r := range src.files {
			if re := hexRE[r.sum.algo]; re == nil || !re.MatchString(r.sum.hex) {
				t.Errorf("%s/%s: malformed checksum %+v", name, r.name, r.sum)
			}
			if r.members == nil {
				fetched = append(fetched, r.name)
			}
			for _, m := range r.members {
				fetched = append(fetched, m.name)
			}
		}
		info, _ := Lookup(name)
		if !slices.Equal(slices.Sorted(slices.Values(fetched)), slices.Sorted(slices.Values(info.Files))) {
			t.Errorf("%s: Fetch writes %v, Open reads %v", name, fetched, info.Files)
		}
	}
}
