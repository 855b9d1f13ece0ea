package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
		r.content = nil // see withContent
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

// nothingLeft checks that dir is empty: Fetch removed the folder it created for the
// data set, and left no temporary file.
func nothingLeft(t *testing.T, dir string) {
	t.Helper()
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("left behind in %s: %v", dir, names)
	}
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
	nothingLeft(t, dir)
}

func TestFetchHTTPError(t *testing.T) {
	srv := newServer(t, map[string][]byte{})
	dir := t.TempDir()
	err := Fetch(t.Context(), "tinyshakespeare", dir, srv.options("tinyshakespeare", nil, nil))
	if err == nil || !strings.Contains(err.Error(), "404 Not Found") || !strings.Contains(err.Error(), srv.URL+"/files/input.txt") {
		t.Fatalf("error %v, want a 404 naming the URL", err)
	}
	nothingLeft(t, dir)
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
	nothingLeft(t, dir)
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

// closedURL returns the URL of a local port that nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/"
	l.Close()
	return url
}

func TestFetchOffline(t *testing.T) {
	sys := filepath.Join(t.TempDir(), "datasets")
	useSystemDir(t, sys)
	root := t.TempDir()
	dir := filepath.Join(root, "new", "data")
	base := closedURL(t)
	err := Fetch(t.Context(), "fashion-mnist", dir, FetchOptions{BaseURL: base})
	if err == nil {
		t.Fatal("fetch from a closed port succeeded")
	}
	dest := filepath.Join(dir, "fashion-mnist")
	for _, want := range []string{
		`fetch fashion-mnist: Get "` + base + `train-images-idx3-ubyte.gz"`,
		"connection refused",
		"could not be downloaded (offline, or the server is unreachable)",
		"gradwire data fetch fashion-mnist --dir " + dir + " --base-url URL (downloads URL/train-images-idx3-ubyte.gz and the other files by the same names",
		"by hand: copy train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz into " + dest + " (or uncompressed, named without .gz)",
		"apt-get install dataset-fashion-mnist, which installs them into " + filepath.Join(sys, "fashion-mnist"),
		"nothing was written; removed the folders this fetch had created: " + dest + ", " + dir + ", " + filepath.Join(root, "new"),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	var dnsOrDial *net.OpError
	if !errors.As(err, &dnsOrDial) {
		t.Errorf("error %v does not wrap the *net.OpError", err)
	}
	nothingLeft(t, root)

	// A folder that existed before stays; only the data set folder goes.
	err = Fetch(t.Context(), "tinyshakespeare", root, FetchOptions{BaseURL: base})
	if err == nil || !strings.Contains(err.Error(), "by hand: copy input.txt into "+filepath.Join(root, "tinyshakespeare")) ||
		strings.Contains(err.Error(), "apt-get") || strings.Contains(err.Error(), "uncompressed") {
		t.Errorf("tinyshakespeare offline: error %v", err)
	}
	nothingLeft(t, root)

	// CIFAR: the advice names the archive and the files to extract from it.
	err = Fetch(t.Context(), "cifar100", root, FetchOptions{BaseURL: base})
	if err == nil || !strings.Contains(err.Error(), "by hand: download cifar-100-binary.tar.gz elsewhere and extract train.bin, test.bin into "+
		filepath.Join(root, "cifar100")+" (the archive's cifar-100-binary/ folder may be kept as it is)") {
		t.Errorf("cifar100 offline: error %v", err)
	}
	nothingLeft(t, root)
}

func TestFetchFailsMidway(t *testing.T) {
	files := mnistFiles(t)
	srv := newServer(t, maps.Clone(files))
	opts := srv.options("mnist", files, nil)
	delete(srv.files, "t10k-images-idx3-ubyte.gz") // the third download gets a 404
	dir := t.TempDir()
	err := Fetch(t.Context(), "mnist", dir, opts)
	dest := filepath.Join(dir, "mnist")
	for _, want := range []string{
		"GET " + srv.URL + "/files/t10k-images-idx3-ubyte.gz: 404 Not Found",
		"--base-url URL",
		"kept the files verified before the failure in " + dest + ": train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz (running the same command again downloads only the rest)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if got, want := listDir(t, dest), []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}; !slices.Equal(got, want) {
		t.Errorf("left %v, want only the verified %v", got, want)
	}
	// Once the server has the file, the same command completes with two requests.
	srv.files["t10k-images-idx3-ubyte.gz"] = files["t10k-images-idx3-ubyte.gz"]
	srv.requests.Store(0)
	if err := Fetch(t.Context(), "mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("second fetch made %d requests, want 2", n)
	}
}

// TestFetchBrokenTransfer checks a connection that breaks off inside a body.
func TestFetchBrokenTransfer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("First Citizen"))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	err := Fetch(t.Context(), "tinyshakespeare", dir, FetchOptions{BaseURL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") || !strings.Contains(err.Error(), "other ways to get tinyshakespeare") {
		t.Errorf("error %v, want a broken transfer with advice", err)
	}
	nothingLeft(t, dir)
}

// regzip compresses the content of a gzip file again, differently: another level,
// a file name in the header, another modification time. Debian's copies differ from
// the publisher's so.
func regzip(t *testing.T, gz []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	content, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	zw.Name = "recompressed"
	zw.ModTime = time.Unix(1e9, 0)
	zw.Write(content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(out.Bytes(), gz) {
		t.Fatal("recompressed file equals the original")
	}
	return out.Bytes()
}

// withContent adds to opts the payload fingerprint of every gzip file of files, as
// the catalogue holds for Fashion-MNIST.
func withContent(t *testing.T, opts FetchOptions, name string, files map[string][]byte) FetchOptions {
	src := opts.sources[name]
	for i, r := range src.files {
		zr, err := gzip.NewReader(bytes.NewReader(files[r.name]))
		if err != nil {
			t.Fatal(err)
		}
		content, _ := io.ReadAll(zr)
		src.files[i].content = &payload{int64(len(content)), sumOf("sha256", content).hex}
	}
	return opts
}

func TestFetchAcceptsOtherGzipEncodings(t *testing.T) {
	canonical := mnistFiles(t)
	served := map[string][]byte{}
	for name, b := range canonical {
		served[name] = regzip(t, b)
	}
	srv := newServer(t, served)
	opts := withContent(t, srv.options("fashion-mnist", canonical, nil), "fashion-mnist", canonical)
	var progress bytes.Buffer
	opts.Progress = &progress
	dir := t.TempDir()
	if err := Fetch(t.Context(), "fashion-mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "fashion-mnist")
	if got, _ := os.ReadFile(filepath.Join(dest, "train-images-idx3-ubyte.gz")); !bytes.Equal(got, served["train-images-idx3-ubyte.gz"]) {
		t.Error("the recompressed file was not saved as served")
	}
	if n := strings.Count(progress.String(), "saved, decompressed content ok"); n != 4 {
		t.Errorf("%d files accepted by content, want 4:\n%s", n, progress.String())
	}

	// Present in another encoding, or uncompressed: nothing to download.
	raw, _ := io.ReadAll(must(gzip.NewReader(bytes.NewReader(canonical["t10k-labels-idx1-ubyte.gz"]))))
	os.Remove(filepath.Join(dest, "t10k-labels-idx1-ubyte.gz"))
	writeFile(t, dest, "t10k-labels-idx1-ubyte", raw)
	srv.requests.Store(0)
	progress.Reset()
	if err := Fetch(t.Context(), "fashion-mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("fetch with every file present made %d requests, want 0:\n%s", n, progress.String())
	}
	if !strings.Contains(progress.String(), filepath.Join(dest, "t10k-labels-idx1-ubyte")+": already present uncompressed, decompressed content ok") {
		t.Errorf("progress does not report the uncompressed file:\n%s", progress.String())
	}

	// Other content in gzip: refused, naming both fingerprints.
	other := gzipBytes(t, idxBytes(idxLabelsMagic, []uint32{3}, []byte{1, 2, 4}))
	srv.files["t10k-labels-idx1-ubyte.gz"] = other
	os.Remove(filepath.Join(dest, "t10k-labels-idx1-ubyte"))
	err := Fetch(t.Context(), "fashion-mnist", dir, opts)
	r := opts.sources["fashion-mnist"].files[3]
	want := fmt.Sprintf("%s/files/t10k-labels-idx1-ubyte.gz: md5 checksum mismatch: expected %s, got %s, and its decompressed content is not the canonical one either: expected 11 bytes with sha256 %s, got 11 bytes with sha256 %s",
		srv.URL, r.sum.hex, sumOf("md5", other).hex, r.content.sha256, sumOf("sha256", idxBytes(idxLabelsMagic, []uint32{3}, []byte{1, 2, 4})).hex)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %q", err, want)
	}
	if strings.Contains(err.Error(), "other ways") {
		t.Errorf("a wrong file is not an unreachable server:\n%v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCatalogueMatchesRealData checks the catalogue's fingerprints against the real
// files under $GRADWIRE_DATA: each is accepted as it is (Debian's recompressed
// Fashion-MNIST by its content) and uncompressed.
func TestCatalogueMatchesRealData(t *testing.T) {
	root := os.Getenv(EnvDataDir)
	checked := 0
	for name, src := range sources {
		for _, r := range src.files {
			path := filepath.Join(root, name, r.name)
			if _, err := os.Stat(path); root == "" || err != nil {
				continue
			}
			if _, err := verify(path, r); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			if r.content == nil {
				continue
			}
			raw := filepath.Join(t.TempDir(), "raw")
			f, err := os.Create(raw)
			if err != nil {
				t.Fatal(err)
			}
			gz, _ := os.Open(path)
			io.Copy(f, must(gzip.NewReader(gz)))
			gz.Close()
			f.Close()
			if how, err := verify(raw, r); err != nil || !strings.HasPrefix(how, "decompressed content ok") {
				t.Errorf("%s uncompressed: %s, %v", path, how, err)
			}
			checked++
		}
	}
	if checked == 0 {
		if os.Getenv("GRADWIRE_REQUIRE_DATA") == "1" {
			t.Fatalf("no real data under $%s=%q", EnvDataDir, root)
		}
		t.Skipf("no real data: set $%s", EnvDataDir)
	}
	t.Logf("%d files checked", checked)
}

// TestFetchBaseURLNotHTTP: a mirror that is no http(s) URL is refused before
// any folder is made (it was reported as an unreachable server).
func TestFetchBaseURLNotHTTP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	for _, base := range []string{"notaurl", "ftp://mirror/", "http://", "/srv/mirror"} {
		err := Fetch(t.Context(), "fashion-mnist", dir, FetchOptions{BaseURL: base})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("base URL %q: expected an http:// or https:// URL", base)) {
			t.Errorf("%s: %v", base, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the target folder was made: %v", base, err)
		}
	}
}
