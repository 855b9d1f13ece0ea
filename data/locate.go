package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotFound is wrapped by the error of Locate and LocateSplit when no folder searched
// holds the data set's files.
var ErrNotFound = errors.New("data set not found")

// EnvDataDir names the environment variable that points at a folder of data sets.
const EnvDataDir = "GRADWIRE_DATA"

// systemDataDir is where Debian's dataset-* packages install data sets (a variable so
// that tests can point it elsewhere).
var systemDataDir = "/usr/share/datasets"

// Locate returns the folder that holds data set name, searching in order:
// dir/<name> and dir itself (when dir, the config's data.dir, is set),
// $GRADWIRE_DATA/<name> (when set), then /usr/share/datasets/<name>. For CIFAR the
// folder the official tarball extracts to (cifar-10-batches-bin, cifar-100-binary) is
// also tried inside each. A folder is accepted when it holds every file of at least one
// split (the MNIST test split alone, say); use LocateSplit for a given split. The error
// (wrapping ErrNotFound) lists every folder looked at, the files expected and how to
// get them. A dir that is not an existing folder is an error of its own, never
// skipped: a mistyped data.dir must not quietly give way to another copy of the data.
func Locate(name, dir string) (string, error) {
	return locate(name, dir, "")
}

// LocateSplit is Locate for one split ("train", "test" or "val"): a folder is accepted
// when it holds every file that split needs.
func LocateSplit(name, dir, split string) (string, error) {
	split, err := canonicalSplit(split)
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", name, err)
	}
	return locate(name, dir, split)
}

// locate implements Locate (split "") and LocateSplit.
func locate(name, dir, split string) (string, error) {
	info, err := Lookup(name)
	if err != nil {
		return "", err
	}
	if err := checkDataDir(dir); err != nil {
		return "", err
	}
	splits := []string{split}
	if split == "" {
		splits = []string{"train", "test"}
	}
	var looked []string
	for _, place := range candidates(name, dir) {
		fi, err := os.Stat(place)
		if err != nil || !fi.IsDir() {
			looked = append(looked, place+": no such folder")
			continue
		}
		var lacks []string
		for _, sp := range splits {
			missing := missingFiles(place, info.splitFiles(sp))
			if len(missing) == 0 {
				return place, nil
			}
			lacks = append(lacks, fmt.Sprintf("%s split lacks %s", sp, strings.Join(missing, ", ")))
		}
		looked = append(looked, place+": "+strings.Join(lacks, "; "))
	}
	return "", notFoundError(info, dir, split, looked)
}

// checkDataDir returns an error naming data.dir when dir is set but is not an
// existing folder.
func checkDataDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	what := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "no such folder"
	case err != nil:
		what = err.Error()
	case !fi.IsDir():
		what = "not a folder"
	default:
		return nil
	}
	return fmt.Errorf("data.dir %s: %s; expected an existing folder that holds the data set (or no data.dir, to search $%s and %s)",
		dir, what, EnvDataDir, systemDataDir)
}

// candidates lists the folders to search, in order.
func candidates(name, dir string) []string {
	var roots []string
	if dir != "" {
		roots = append(roots, filepath.Join(dir, name), dir)
	}
	if env := os.Getenv(EnvDataDir); env != "" {
		roots = append(roots, filepath.Join(env, name))
	}
	roots = append(roots, filepath.Join(systemDataDir, name))
	sub, ok := cifarSubdir[name]
	if !ok {
		return roots
	}
	var places []string
	for _, r := range roots {
		places = append(places, r, filepath.Join(r, sub))
	}
	return places
}

// missingFiles returns the files of names that dir lacks.
func missingFiles(dir string, names []string) []string {
	var missing []string
	for _, n := range names {
		if _, ok := findFile(dir, n); !ok {
			missing = append(missing, n)
		}
	}
	return missing
}

// findFile returns the path of file name in dir. A name ending in .gz may also be
// present uncompressed (readers detect gzip by content); the .gz is preferred when
// both exist.
func findFile(dir, name string) (string, bool) {
	try := []string{name}
	if raw, ok := strings.CutSuffix(name, ".gz"); ok {
		try = append(try, raw)
	}
	for _, n := range try {
		path := filepath.Join(dir, n)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			return path, true
		}
	}
	return "", false
}

// notFoundError explains where Locate looked, what it expected and how to get the data.
func notFoundError(info Info, dir, split string, looked []string) error {
	var b strings.Builder
	what := "any split"
	if split != "" {
		what = split + " split"
	}
	fmt.Fprintf(&b, "%s (%s); looked in:\n", info.Name, what)
	for _, l := range looked {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	env := os.Getenv(EnvDataDir)
	if env == "" {
		fmt.Fprintf(&b, "  ($%s is not set)\n", EnvDataDir)
	}
	if split == "" {
		fmt.Fprintf(&b, "expected the files of one split: train: %s; test: %s",
			strings.Join(info.Train, ", "), strings.Join(info.Test, ", "))
	} else {
		fmt.Fprintf(&b, "expected files: %s", strings.Join(info.splitFiles(split), ", "))
	}
	if strings.HasSuffix(info.Train[0], ".gz") {
		b.WriteString(" (each may also be uncompressed, without .gz)")
	}
	target := dir
	if target == "" {
		target = env
	}
	if target == "" {
		target = "DIR"
	}
	fmt.Fprintf(&b, "\nget them with: gradwire data fetch %s --dir %s (then set data.dir or $%s to %s)",
		info.Name, target, EnvDataDir, target)
	if info.Name == "fashion-mnist" {
		fmt.Fprintf(&b, "\nor, on Debian and Ubuntu: apt-get install dataset-fashion-mnist (installs into %s)",
			filepath.Join(systemDataDir, info.Name))
	}
	return fmt.Errorf("%w: %s", ErrNotFound, b.String())
}
