package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlatNamesEveryKeyWithItsValue(t *testing.T) {
	c := Default()
	c.Model.Hidden = []int{300, 100}
	c.Optim.LR = 0.125
	flat := Flat(c)
	if len(flat) != len(Keys()) {
		t.Fatalf("Flat has %d keys, Keys %d", len(flat), len(Keys()))
	}
	for key, want := range map[string]string{"model.hidden": "[300 100]", "optim.lr": "0.125", "data.batch_size": "64", "train.keep_checkpoints": "3"} {
		if flat[key] != want {
			t.Errorf("Flat[%q] = %q, want %q", key, flat[key], want)
		}
	}
	for key := range outcomeFree {
		if _, ok := fieldByKey[key]; !ok {
			t.Errorf("outcomeFree names %q, which is not a config key", key)
		}
	}
	if !ChangesOutcome("optim.lr") || !ChangesOutcome("train.max_steps") || ChangesOutcome("train.log_every") {
		t.Error("ChangesOutcome: optim.lr and train.max_steps change a run, train.log_every does not")
	}
}

func TestRunNamesCannotLeaveRuns(t *testing.T) {
	for _, name := range []string{"../../x", "/tmp/abs", "a/b", ".hidden", "-flag"} {
		_, err := Load("", []string{"name=" + name})
		if err == nil || !strings.Contains(err.Error(), "name") || !strings.Contains(err.Error(), name) {
			t.Errorf("name %q: err = %v, want a name error quoting the value", name, err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "my run (v2).yaml")
	if err := os.WriteFile(path, []byte("seed: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil || c.Name != "my-run-v2-" {
		t.Fatalf("name from %q = %q (%v), want my-run-v2-", path, c.Name, err)
	}
}

// TestMentionsWholeKeys: a rule's message names a --set key only where the
// key stands whole, not as the start of a longer key.
func TestMentionsWholeKeys(t *testing.T) {
	for _, tt := range []struct {
		text, key string
		want      bool
	}{
		{"must split evenly over dist.workers=3", "dist.workers", true},
		{"needs dist.workers.", "dist.workers", true},
		{"(dist.workers)", "dist.workers", true},
		{"dist.workers", "dist.workers", true},
		{"needs dist.workers_per_node 2", "dist.workers", false},
		{"needs dist.workers.extra 2", "dist.workers", false},
		{"needs xdist.workers 2", "dist.workers", false},
		{"optim.lr_scale, then optim.lr 0.1", "optim.lr", true},
		{"optim.lr_scale only", "optim.lr", false},
	} {
		if got := mentions(tt.text, tt.key); got != tt.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tt.text, tt.key, got, tt.want)
		}
	}
}
