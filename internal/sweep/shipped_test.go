package sweep

import (
	"path/filepath"
	"testing"
)

// TestShippedSweepsLoad loads every sweep file under experiments/: each
// resolves, and every run's config validates (Load checks them all), so a
// typo in a sweep that takes days to run fails here rather than hours in.
func TestShippedSweepsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "experiments", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no sweep files under experiments/")
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Error(err) // it names the file
			continue
		}
		if len(s.Runs) == 0 {
			t.Errorf("%s: no runs", f)
		}
	}
}
