package data

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// FetchOptions configures Fetch.
type FetchOptions struct {
	// BaseURL replaces the data set's canonical base URL (a mirror, or a test server);
	// file names are appended to it.
	BaseURL string
	// Client makes the requests; nil means http.DefaultClient.
	Client *http.Client
	// Progress receives a progress bar per download and a line per file; nil means quiet.
	Progress io.Writer

	// sources replaces the catalogue of downloads, so that tests can serve small
	// files with their own checksums.
	sources map[string]source
}

// source is where a data set is published.
type source struct {
	base  string   // canonical base URL
	files []remote // files under base
}

// remote is one published file.
type remote struct {
	name string
	sum  checksum
	// members, for a tar.gz archive, are the files to extract from it (found by base
	// name at any depth); the archive itself is not kept. Nil for a plain file.
	members []member
}

// member is a file extracted from an archive. Only the archive has a published
// checksum, so an extracted file counts as present when it has the expected size.
type member struct {
	name string
	size int64
}

// checksum is a published digest: algo is "md5" or "sha256", hex lower-case hex.
type checksum struct {
	algo, hex string
}

// sources is the download catalogue. Fashion-MNIST's SHA256 sums known to the project
// are of Debian's recompressed copies, so the official MD5s are used; MNIST's test files
// are byte-identical to the official ones and get SHA256.
var sources = map[string]source{
	"fashion-mnist": {base: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", files: []remote{
		{name: "train-images-idx3-ubyte.gz", sum: checksum{"md5", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"}},
		{name: "train-labels-idx1-ubyte.gz", sum: checksum{"md5", "25c81989df183df01b3e8a0aad5dffbe"}},
		{name: "t10k-images-idx3-ubyte.gz", sum: checksum{"md5", "bef4ecab320f06d8554ea6380940ec79"}},
		{name: "t10k-labels-idx1-ubyte.gz", sum: checksum{"md5", "bb300cfdad3c16e7a12a480ee83cd310"}},
	}},
	"mnist": {base: "https://ossci-datasets.s3.amazonaws.com/mnist/", files: []remote{
		{name: "train-images-idx3-ubyte.gz", sum: checksum{"md5", "f68b3c2dcbeaaa9fbdd348bbdeb94873"}},
		{name: "train-labels-idx1-ubyte.gz", sum: checksum{"md5", "d53e105ee54ea40749a09fcbcd1e9432"}},
		{name: "t10k-images-idx3-ubyte.gz", sum: checksum{"sha256", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"}},
		{name: "t10k-labels-idx1-ubyte.gz", sum: checksum{"sha256", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"}},
	}},
	"cifar10": {base: "https://www.cs.toronto.edu/~kriz/", files: []remote{
		{name: "cifar-10-binary.tar.gz", sum: checksum{"md5", "c32a1d4ab5d03f1284b67883e8d87530"}, members: []member{
			{"data_batch_1.bin", 10000 * 3073}, {"data_batch_2.bin", 10000 * 3073}, {"data_batch_3.bin", 10000 * 3073},
			{"data_batch_4.bin", 10000 * 3073}, {"data_batch_5.bin", 10000 * 3073}, {"test_batch.bin", 10000 * 3073},
		}},
	}},
	"cifar100": {base: "https://www.cs.toronto.edu/~kriz/", files: []remote{
		{name: "cifar-100-binary.tar.gz", sum: checksum{"md5", "03b5dce01913d631647c71ecec9e9cb8"}, members: []member{
			{"train.bin", 50000 * 3074}, {"test.bin", 10000 * 3074},
		}},
	}},
	"tinyshakespeare": {base: "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/", files: []remote{
		{name: "input.txt", sum: checksum{"sha256", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"}},
	}},
}

// Fetch downloads data set name into dir/<name>/ (the layout Locate searches) and
// verifies every download against its published checksum. Files already present with
// the right checksum are skipped. Each file is written atomically: downloaded to a
// temporary file in the same folder, verified, then renamed, so a failure leaves no
// partial file behind. CIFAR archives are unpacked and only their .bin files kept.
func Fetch(ctx context.Context, name, dir string, opts FetchOptions) error {
	if _, err := Lookup(name); err != nil {
		return err
	}
	if dir == "" {
		return fmt.Errorf("fetch %s: no target folder given", name)
	}
	src := sources[name]
	if opts.sources != nil {
		src = opts.sources[name]
	}
	base := src.base
	if opts.BaseURL != "" {
		base = strings.TrimSuffix(opts.BaseURL, "/") + "/"
	}
	f := fetcher{ctx: ctx, client: opts.Client, progress: opts.Progress, dest: filepath.Join(dir, name)}
	if f.client == nil {
		f.client = http.DefaultClient
	}
	if err := os.MkdirAll(f.dest, 0o755); err != nil {
		return fmt.Errorf("fetch %s: %w", name, err)
	}
	for _, r := range src.files {
		var err error
		if r.members == nil {
			err = f.file(base+r.name, r)
		} else {
			err = f.archive(base+r.name, r)
		}
		if err != nil {
			return fmt.Errorf("fetch %s: %w", name, err)
		}
	}
	return nil
}

// fetcher holds what every download of one Fetch shares.
type fetcher struct {
	ctx      context.Context
	client   *http.Client
	progress io.Writer
	dest     string
}

// say writes a line of progress, if wanted.
func (f *fetcher) say(format string, args ...any) {
	if f.progress != nil {
		fmt.Fprintf(f.progress, format+"\n", args...)
	}
}

// file fetches a plain file unless it is already present with the right checksum.
func (f *fetcher) file(url string, r remote) error {
	final := filepath.Join(f.dest, r.name)
	if got, err := fileSum(final, r.sum.algo); err == nil {
		if got == r.sum.hex {
			f.say("%s: already present, checksum ok", final)
			return nil
		}
		f.say("%s: checksum mismatch, downloading again", final)
	}
	tmp, err := f.download(url, r)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	f.say("%s: saved", final)
	return nil
}

// archive fetches a tar.gz and extracts its members, unless all are already present.
func (f *fetcher) archive(url string, r remote) error {
	if f.membersPresent(r.members) {
		f.say("%s: already present", f.dest)
		return nil
	}
	tmp, err := f.download(url, r)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	parts, err := f.extract(tmp, url, r.members)
	if err != nil {
		return err
	}
	for i, m := range r.members {
		if err := os.Rename(parts[i], filepath.Join(f.dest, m.name)); err != nil {
			for _, p := range parts[i:] {
				os.Remove(p)
			}
			return err
		}
	}
	f.say("%s: extracted %d files from %s", f.dest, len(r.members), r.name)
	return nil
}

// membersPresent reports whether every member exists with its expected size.
func (f *fetcher) membersPresent(members []member) bool {
	for _, m := range members {
		fi, err := os.Stat(filepath.Join(f.dest, m.name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != m.size {
			return false
		}
	}
	return true
}

// download fetches url into a temporary file in the destination folder and checks its
// checksum. It returns the temporary file's path; on error nothing is left behind.
func (f *fetcher) download(url string, r remote) (path string, err error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}

	tmp, err := createPart(f.dest, r.name)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := newHash(r.sum.algo)
	var w io.Writer = io.MultiWriter(tmp, h)
	var bar *progressbar.ProgressBar
	if f.progress != nil {
		bar = newBar(f.progress, resp.ContentLength, r.name)
		w = io.MultiWriter(w, bar)
	}
	if _, err = io.Copy(w, resp.Body); err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	if bar != nil {
		if err = bar.Finish(); err != nil {
			return "", err
		}
	}
	if err = tmp.Close(); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != r.sum.hex {
		return "", fmt.Errorf("%s: %s checksum mismatch: expected %s, got %s", url, r.sum.algo, r.sum.hex, got)
	}
	return tmp.Name(), nil
}

// extract writes the wanted members of a tar.gz into temporary files in the
// destination folder and returns their paths, in the order of members. On error
// nothing is left behind.
func (f *fetcher) extract(archive, url string, members []member) (parts []string, err error) {
	parts = make([]string, len(members))
	defer func() {
		if err != nil {
			for _, p := range parts {
				if p != "" {
					os.Remove(p)
				}
			}
		}
	}()
	file, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		return parts, fmt.Errorf("%s: %w", url, err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return parts, fmt.Errorf("%s: %w", url, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		// Matching base names against a fixed list means no archive path is ever
		// used to build a file name.
		i := memberIndex(members, path.Base(hdr.Name))
		if i < 0 || parts[i] != "" {
			continue
		}
		if hdr.Size != members[i].size {
			return parts, fmt.Errorf("%s: %s has %d bytes, expected %d", url, hdr.Name, hdr.Size, members[i].size)
		}
		if parts[i], err = writePart(f.dest, members[i].name, tr); err != nil {
			return parts, fmt.Errorf("%s: %s: %w", url, hdr.Name, err)
		}
	}
	for i, p := range parts {
		if p == "" {
			return parts, fmt.Errorf("%s: archive lacks %s", url, members[i].name)
		}
	}
	return parts, nil
}

// memberIndex returns the position of the member called name, or -1.
func memberIndex(members []member, name string) int {
	for i, m := range members {
		if m.name == name {
			return i
		}
	}
	return -1
}

// createPart creates a hidden temporary file for name in dir, readable like a normal
// file once renamed.
func createPart(dir, name string) (*os.File, error) {
	tmp, err := os.CreateTemp(dir, "."+name+".*.part")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// writePart copies r into a new temporary file for name in dir and returns its path.
func writePart(dir, name string, r io.Reader) (string, error) {
	tmp, err := createPart(dir, name)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// newBar returns a byte-counting progress bar for one download (a spinner when the
// size is unknown, -1).
func newBar(w io.Writer, size int64, label string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

// newHash returns the hash for a checksum algorithm of the catalogue.
func newHash(algo string) hash.Hash {
	if algo == "md5" {
		return md5.New()
	}
	return sha256.New()
}

// fileSum returns the hex digest of a file.
func fileSum(path, algo string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := newHash(algo)
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
