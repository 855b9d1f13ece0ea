package data

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// headBytes is how much of each file SourceFile.HeadSHA256 covers: enough to tell
// apart any two files of the catalogue (different headers, or different first
// examples), cheap to read before every run.
const headBytes = 64 << 10

// Source is the provenance of a data set: the data folder used and every file read for
// the train and test splits.
type Source struct {
	// Dir is the folder the files were found in. When the splits come from different
	// folders it is the deepest folder holding both, and absolute.
	Dir   string
	Files []SourceFile
}

// SourceFile is one file a split reads.
type SourceFile struct {
	Split      string // "train" or "test"
	Path       string // relative to Source.Dir
	Size       int64  // bytes on disk
	HeadSHA256 string // hex SHA-256 of the first 64 KiB (all of a smaller file)
}

// Sources resolves the files Open would read for the train and test splits, without
// decoding them, and fingerprints each one by its size and the hash of its head. A
// file that both splits read (text) is listed for each.
func Sources(opts Options) (Source, error) {
	info, err := checkOptions(opts)
	if err != nil {
		return Source{}, err
	}
	var folders []string
	var paths [][]string
	for _, split := range []string{"train", "test"} {
		folder, p, err := splitPaths(info, opts.Dir, split)
		if err != nil {
			return Source{}, err
		}
		folders, paths = append(folders, folder), append(paths, p)
	}
	dir := folders[0]
	if folders[1] != dir {
		if dir, err = commonFolder(folders[0], folders[1]); err != nil {
			return Source{}, err
		}
	}
	src := Source{Dir: dir}
	for i, split := range []string{"train", "test"} {
		for _, path := range paths[i] {
			f, err := fingerprint(dir, path)
			if err != nil {
				return Source{}, fmt.Errorf("%s %s split: %w", info.Name, split, err)
			}
			f.Split = split
			src.Files = append(src.Files, f)
		}
	}
	return src, nil
}

// Digest is the hex SHA-256 over the files sorted by split and path, each written as
// split, slash-separated path, size and head hash. Dir is left out, so the same files
// in another folder give the same digest; a file replaced by one of another size or
// head changes it.
func (s Source) Digest() string {
	files := slices.Clone(s.Files)
	slices.SortFunc(files, func(a, b SourceFile) int {
		return cmp.Or(cmp.Compare(a.Split, b.Split), cmp.Compare(filepath.ToSlash(a.Path), filepath.ToSlash(b.Path)))
	})
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\n", f.Split, filepath.ToSlash(f.Path), f.Size, f.HeadSHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprint reads the size and head hash of the file at path, named relative to dir.
func fingerprint(dir, path string) (SourceFile, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return SourceFile{}, err
	}
	file, err := os.Open(path)
	if err != nil {
		return SourceFile{}, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return SourceFile{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(file, headBytes)); err != nil {
		return SourceFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return SourceFile{Path: rel, Size: fi.Size(), HeadSHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// commonFolder returns the deepest folder that holds both a and b, as an absolute path.
func commonFolder(a, b string) (string, error) {
	a, err := filepath.Abs(a)
	if err != nil {
		return "", err
	}
	if b, err = filepath.Abs(b); err != nil {
		return "", err
	}
	for {
		rel, err := filepath.Rel(a, b)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return a, nil
		}
		parent := filepath.Dir(a)
		if parent == a {
			return a, nil
		}
		a = parent
	}
}
