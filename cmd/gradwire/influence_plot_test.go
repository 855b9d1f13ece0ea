package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/gradwire/gradwire/internal/train"
)

// TestDetectionCurve works a ranking of four examples, two mislabelled, by
// hand in both orders.
func TestDetectionCurve(t *testing.T) {
	s := []train.ScoredExample{
		{Index: 0, Score: 4, Loss: 0.1, Mislabeled: true},
		{Index: 1, Score: 3, Loss: 0.4, Mislabeled: false},
		{Index: 2, Score: 2, Loss: 0.2, Mislabeled: true},
		{Index: 3, Score: 1, Loss: 0.3, Mislabeled: false},
	}
	same := func(what string, got, want plotter.XYs) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
		}
	}
	same("by score", detectionCurve(s, func(e train.ScoredExample) float64 { return e.Score }),
		plotter.XYs{{X: 0, Y: 0}, {X: 25, Y: 50}, {X: 50, Y: 50}, {X: 75, Y: 100}, {X: 100, Y: 100}})
	// By loss: 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1).
	same("by loss", detectionCurve(s, func(e train.ScoredExample) float64 { return e.Loss }),
		plotter.XYs{{X: 0, Y: 0}, {X: 25, Y: 0}, {X: 50, Y: 0}, {X: 75, Y: 50}, {X: 100, Y: 100}})
	for i := range s {
		s[i].Mislabeled = false
	}
	if xy := detectionCurve(s, func(e train.ScoredExample) float64 { return e.Score }); xy != nil {
		t.Fatalf("no mislabelled examples: %v, want no curve", xy)
	}
}

// TestPlotDetection writes the PNG and SVG beside the JSON result's name.
func TestPlotDetection(t *testing.T) {
	dir := t.TempDir()
	res := &train.InfluenceResult{Flipped: 1, Self: []train.ScoredExample{
		{Index: 0, Score: 2, Loss: 1, Mislabeled: true}, {Index: 1, Score: 1, Loss: 2},
	}}
	if err := plotDetection(res, filepath.Join(dir, "influence-last.json")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"influence-last.png", "influence-last.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestInfluencePlotOnly redraws the plot from a saved result and refuses the
// flags that would compute one, a missing or foreign file, and a result
// without flipped labels.
func TestInfluencePlotOnly(t *testing.T) {
	dir := t.TempDir()
	res := train.InfluenceResult{Flipped: 1, Self: []train.ScoredExample{
		{Index: 0, Score: 2, Loss: 1, Mislabeled: true}, {Index: 1, Score: 1, Loss: 2},
	}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "influence.json")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "influence", dir, "--plot-only"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "influence.png")); err != nil {
		t.Fatal(err)
	}
	res.Flipped = 0
	b, _ = json.Marshal(res)
	noFlips := filepath.Join(dir, "clean.json")
	if err := os.WriteFile(noFlips, b, 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--plot-only", "--test", "1"}, "--test does not apply"},
		{[]string{"--plot-only", "--last-layer"}, "--last-layer does not apply"},
		{[]string{"--plot-only", "--out", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"--plot-only", "--out", notJSON}, "not an influence result"},
		{[]string{"--plot-only", "--out", noFlips}, "flipped no labels"},
	} {
		_, _, err := run(t, append([]string{"influence", dir}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}
