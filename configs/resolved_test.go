package configs

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite configs/testdata/*.resolved.yaml from the current code")

// TestResolvedConfigs pins the resolved config of every shipped file: moving a
// default or a check between packages must not change what a run gets. The
// expected files were written by the code before defaults moved into models,
// optim and compress (go test ./configs -run TestResolvedConfigs -update).
func TestResolvedConfigs(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped configs: %v", err)
	}
	// The defaults alone, as a run without a file gets them.
	files = append(files, "")
	for _, f := range files {
		name := strings.TrimSuffix(f, ".yaml")
		if f == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			c, err := Load(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			enc := yaml.NewEncoder(&got)
			enc.SetIndent(2)
			if err := enc.Encode(c); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".resolved.yaml")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("resolved %s differs from %s:\n%s", name, golden, got.Bytes())
			}
		})
	}
}
