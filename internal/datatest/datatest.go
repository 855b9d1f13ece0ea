// Package datatest gives tests access to the real data sets, which are not part of the
// repository.
package datatest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gradwire/gradwire/data"
)

// EnvRequireData names the environment variable that, set to 1, turns a missing data set
// from a skipped test into a failed one (CI sets it, so that real-data tests cannot be
// skipped there unnoticed).
const EnvRequireData = "GRADWIRE_REQUIRE_DATA"

// Dir returns the folder holding data set name, found by data.Locate (which honours
// $GRADWIRE_DATA). When the data set is absent it skips the test, or fails it when
// $GRADWIRE_REQUIRE_DATA is 1.
//
// go test runs each package in its own folder, so a relative $GRADWIRE_DATA is taken
// relative to the module root (the folder holding go.mod), where it was most likely
// meant.
func Dir(t testing.TB, name string) string {
	t.Helper()
	dir := ""
	if env := os.Getenv(data.EnvDataDir); env != "" && !filepath.IsAbs(env) {
		if root, ok := moduleRoot(); ok {
			dir = filepath.Join(root, env)
		}
	}
	path, err := data.Locate(name, dir)
	if err == nil {
		return path
	}
	if !errors.Is(err, data.ErrNotFound) || os.Getenv(EnvRequireData) == "1" {
		t.Fatal(err)
	}
	t.Skipf("data set %s not found: set %s to a folder with %s/ in it (gradwire data fetch %s --dir DIR downloads it there); %s=1 fails instead of skipping",
		name, data.EnvDataDir, name, name, EnvRequireData)
	return ""
}

// moduleRoot returns the nearest folder at or above the working directory that holds a
// go.mod file.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
