package data

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
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
	// content, for a gzip file, fingerprints its decompressed payload, so that the same
	// data in another gzip encoding (Debian's packages recompress) or uncompressed is
	// accepted too. Nil where the payload was not available to derive it from.
	content *payload
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

// payload is the decompressed content of a gzip file: its length and hex SHA-256.
type payload struct {
	size   int64
	sha256 string
}

// sources is the download catalogue. Each gzip file has the publisher's checksum of the
// archive (the official MD5s; SHA-256 where the official file was at hand) and, where
// the real data was available to derive it, the SHA-256 of its decompressed payload,
// computed from copies whose decoded contents are the public releases': Fashion-MNIST
// from Debian's dataset-fashion-mnist (recompressed, so its archive MD5s differ from the
// official ones) and the MNIST test split from the official files. The MNIST training
// files were not available, so they keep the archive MD5 only and must be the
// canonical gzip files.
var sources = map[string]source{
	"fashion-mnist": {base: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", files: []remote{
		{name: "train-images-idx3-ubyte.gz", sum: checksum{"md5", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
			content: &payload{47040016, "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"}},
		{name: "train-labels-idx1-ubyte.gz", sum: checksum{"md5", "25c81989df183df01b3e8a0aad5dffbe"},
			content: &payload{60008, "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"}},
		{name: "t10k-images-idx3-ubyte.gz", sum: checksum{"md5", "bef4ecab320f06d8554ea6380940ec79"},
			content: &payload{7840016, "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"}},
		{name: "t10k-labels-idx1-ubyte.gz", sum: checksum{"md5", "bb300cfdad3c16e7a12a480ee83cd310"},
			content: &payload{10008, "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}},
	}},
	"mnist": {base: "https://ossci-datasets.s3.amazonaws.com/mnist/", files: []remote{
		{name: "train-images-idx3-ubyte.gz", sum: checksum{"md5", "f68b3c2dcbeaaa9fbdd348bbdeb94873"}},
		{name: "train-labels-idx1-ubyte.gz", sum: checksum{"md5", "d53e105ee54ea40749a09fcbcd1e9432"}},
		{name: "t10k-images-idx3-ubyte.gz", sum: checksum{"sha256", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"},
			content: &payload{7840016, "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"}},
		{name: "t10k-labels-idx1-ubyte.gz", sum: checksum{"sha256", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"},
			content: &payload{10008, "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"}},
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
// verifies every download: a file is accepted when it is the publisher's (its checksum
// matches) or, for gzip files whose decompressed payload the catalogue fingerprints,
// when it decompresses to that payload, whatever the gzip encoding. Files already
// present and accepted are skipped, including uncompressed copies of such gzip files.
// Each file is written atomically: downloaded to a temporary file in the same folder,
// verified, then renamed. CIFAR archives are unpacked and only their .bin files kept.
//
// On failure nothing half-made is left: no temporary file, and the folders this call
// created are removed unless files verified earlier in the call are in them (those are
// kept, so that running it again downloads only the rest). When the server cannot be
// reached, the error says how else to get the files: a mirror, copying them by hand,
// or Debian's package.
func Fetch(ctx context.Context, name, dir string, opts FetchOptions) error {
	info, err := Lookup(name)
	if err != nil {
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
		// Checked here, or "notaurl" would be reported as a server that is
		// unreachable, with the offline advice.
		if u, err := url.Parse(opts.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("fetch %s: base URL %q: expected an http:// or https:// URL of the folder that holds the files", name, opts.BaseURL)
		}
		base = strings.TrimSuffix(opts.BaseURL, "/") + "/"
	}
	f := fetcher{ctx: ctx, client: opts.Client, progress: opts.Progress, dest: filepath.Join(dir, name)}
	if f.client == nil {
		f.client = http.DefaultClient
	}
	created := missingFolders(f.dest)
	if err := os.MkdirAll(f.dest, 0o755); err != nil {
		removeEmpty(created)
		return fmt.Errorf("fetch %s: %w", name, err)
	}
	for _, r := range src.files {
		if r.members == nil {
			err = f.file(base+r.name, r)
		} else {
			err = f.archive(base+r.name, r)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fetch %s: %v", name, err)
	var unreachable downloadError
	if errors.As(err, &unreachable) && ctx.Err() == nil {
		b.WriteString("\n" + otherWays(info, src, dir, f.dest))
	}
	removed := removeEmpty(created)
	switch {
	case len(f.saved) > 0:
		fmt.Fprintf(&b, "\nkept the files verified before the failure in %s: %s (running the same command again downloads only the rest)",
			f.dest, strings.Join(f.saved, ", "))
	case len(removed) > 0:
		fmt.Fprintf(&b, "\nnothing was written; removed the folders this fetch had created: %s", strings.Join(removed, ", "))
	default:
		b.WriteString("\nnothing was written")
	}
	return &fetchError{msg: b.String(), err: err}
}

// fetchError is Fetch's error: the cause, with advice and what was left, in its message.
type fetchError struct {
	msg string
	err error
}

func (e *fetchError) Error() string { return e.msg }
func (e *fetchError) Unwrap() error { return e.err }

// downloadError is a download that did not complete: the server could not be reached,
// answered with an error status, or the transfer broke off.
type downloadError struct{ err error }

func (e downloadError) Error() string { return e.err.Error() }
func (e downloadError) Unwrap() error { return e.err }

// otherWays tells how to get a data set's files without the server Fetch used.
func otherWays(info Info, src source, dir, dest string) string {
	var names []string
	for _, r := range src.files {
		names = append(names, r.name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the files could not be downloaded (offline, or the server is unreachable); other ways to get %s:\n", info.Name)
	fmt.Fprintf(&b, "  - from a mirror: gradwire data fetch %s --dir %s --base-url URL (downloads URL/%s", info.Name, dir, names[0])
	if len(names) > 1 {
		b.WriteString(" and the other files by the same names")
	}
	b.WriteString(", and verifies them)\n")
	archive := false
	for _, r := range src.files {
		archive = archive || r.members != nil
	}
	if archive {
		var members []string
		for _, r := range src.files {
			for _, m := range r.members {
				members = append(members, m.name)
			}
		}
		fmt.Fprintf(&b, "  - by hand: download %s elsewhere and extract %s into %s",
			strings.Join(names, ", "), strings.Join(members, ", "), dest)
		if sub := cifarSubdir[info.Name]; sub != "" {
			fmt.Fprintf(&b, " (the archive's %s/ folder may be kept as it is)", sub)
		}
	} else {
		fmt.Fprintf(&b, "  - by hand: copy %s into %s", strings.Join(names, ", "), dest)
		if strings.HasSuffix(names[0], ".gz") {
			b.WriteString(" (or uncompressed, named without .gz)")
		}
	}
	if info.Name == "fashion-mnist" {
		fmt.Fprintf(&b, "\n  - on Debian or Ubuntu: apt-get install dataset-fashion-mnist, which installs them into %s, where training finds them without any fetch",
			filepath.Join(systemDataDir, info.Name))
	}
	return b.String()
}

// missingFolders returns dir and those of its ancestors that do not exist, deepest
// first: what MkdirAll(dir) will create.
func missingFolders(dir string) []string {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	return missing
}

// removeEmpty removes the folders (deepest first) that are empty and returns those it
// removed; os.Remove leaves a folder with files in it alone.
func removeEmpty(folders []string) []string {
	var removed []string
	for _, d := range folders {
		if os.Remove(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}

// fetcher holds what every download of one Fetch shares.
type fetcher struct {
	ctx      context.Context
	client   *http.Client
	progress io.Writer
	dest     string
	saved    []string // files this Fetch wrote and verified
}

// say writes a line of progress, if wanted.
func (f *fetcher) say(format string, args ...any) {
	if f.progress != nil {
		fmt.Fprintf(f.progress, format+"\n", args...)
	}
}

// file fetches a plain file unless it is already present and accepted (see verify):
// as r.name or, for a gzip file with a known payload, uncompressed without .gz.
func (f *fetcher) file(url string, r remote) error {
	final := filepath.Join(f.dest, r.name)
	if _, err := os.Stat(final); err == nil {
		how, err := verify(final, r)
		if err == nil {
			f.say("%s: already present, %s", final, how)
			return nil
		}
		f.say("%s: %v; downloading again", final, err)
	} else if raw, ok := strings.CutSuffix(final, ".gz"); ok && r.content != nil {
		if how, err := verify(raw, r); err == nil {
			f.say("%s: already present uncompressed, %s", raw, how)
			return nil
		}
	}
	tmp, err := f.download(url, r)
	if err != nil {
		return err
	}
	how, err := verify(tmp, r)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", url, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	f.saved = append(f.saved, r.name)
	f.say("%s: saved, %s", final, how)
	return nil
}

// archive fetches a tar.gz and extracts its members, unless all are already present.
func (f *fetcher) archive(url string, r remote) error {
	if f.membersPresent(r.members) {
		f.say("%s: already present (every file of %s with its expected size)", f.dest, r.name)
		return nil
	}
	tmp, err := f.download(url, r)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := verify(tmp, r); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
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
		f.saved = append(f.saved, m.name)
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

// download fetches url into a temporary file in the destination folder and returns
// its path; on error nothing is left behind. Failures to transfer are downloadErrors.
func (f *fetcher) download(url string, r remote) (path string, err error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", downloadError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", downloadError{fmt.Errorf("GET %s: %s", url, resp.Status)}
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
	var w io.Writer = tmp
	var bar *progressbar.ProgressBar
	if f.progress != nil {
		bar = newBar(f.progress, resp.ContentLength, r.name)
		w = io.MultiWriter(w, bar)
	}
	if _, err = io.Copy(w, resp.Body); err != nil {
		return "", downloadError{fmt.Errorf("GET %s: %w", url, err)}
	}
	if bar != nil {
		if err = bar.Finish(); err != nil {
			return "", err
		}
	}
	if err = tmp.Close(); err != nil {
		return "", err
	}
	return tmp.Name(), nil
}

// verify accepts the file at path as r when its checksum is the publisher's or, for a
// gzip file with a known payload, when it decompresses (or, uncompressed, is equal) to
// that payload. It says how the file was accepted, or why not.
func verify(path string, r remote) (string, error) {
	got, err := fileSum(path, r.sum.algo)
	if err != nil {
		return "", err
	}
	if got == r.sum.hex {
		return r.sum.algo + " checksum ok", nil
	}
	mismatch := fmt.Sprintf("%s checksum mismatch: expected %s, got %s", r.sum.algo, r.sum.hex, got)
	if r.content == nil {
		return "", errors.New(mismatch)
	}
	size, sum, err := payloadSum(path, r.content.size+1)
	if err != nil {
		return "", fmt.Errorf("%s, and its content cannot be read: %w", mismatch, err)
	}
	if size != r.content.size || sum != r.content.sha256 {
		return "", fmt.Errorf("%s, and its decompressed content is not the canonical one either: expected %d bytes with sha256 %s, got %d bytes with sha256 %s",
			mismatch, r.content.size, r.content.sha256, size, sum)
	}
	return "decompressed content ok (sha256 " + sum[:12] + "...)", nil
}

// payloadSum returns the length and hex SHA-256 of the content of the file at path,
// decompressed when it is gzip, reading at most limit bytes of it.
func payloadSum(path string, limit int64) (int64, string, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer file.Close()
	r, err := maybeGunzip(bufio.NewReader(file))
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, limit))
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
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
