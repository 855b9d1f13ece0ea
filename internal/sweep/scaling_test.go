package sweep

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/train"
)

// TestScalingMethods groups variations by name without "-wN", keeps methods
// trained at two or more worker counts above one, and orders their points by
// workers.
func TestScalingMethods(t *testing.T) {
	g := func(name string, workers int) group {
		return group{name: name, runs: []*runData{{sum: &train.Summary{Workers: workers}}}}
	}
	groups := []group{g("dense-w1", 1), g("dgc-w16", 16), g("dgc-w4", 4), g("dense-w4", 4), g("dense-w16", 16),
		g("topk-w4", 4), g("fp16", 8)}
	var got []string
	for _, m := range scalingMethods(groups) {
		var names []string
		for _, p := range m.points {
			names = append(names, p.name)
		}
		got = append(got, m.name+":"+strings.Join(names, ","))
	}
	want := []string{"dgc:dgc-w4,dgc-w16", "dense:dense-w4,dense-w16"}
	if !slices.Equal(got, want) {
		t.Errorf("methods %q, want %q (topk and fp16 have one worker count, dense-w1 no communication)", got, want)
	}
}

// TestReportScalingPlots: a sweep over worker counts gets the scaling plots,
// one without gets none.
func TestReportScalingPlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scaling")
	writeFile(t, filepath.Join(dir, "sweep.yaml"), "name: scaling\nbase: b.yaml\nset: []\nvariations: []\n")
	for _, w := range []int{4, 16} {
		for _, c := range []string{"none", "topk"} {
			s := classifierSummary(c, 1, 0.9, 10, 100, float64(w)/2)
			s.Workers = w
			name := map[string]string{"none": "dense", "topk": "topk"}[c]
			writeRun(t, dir, name+"-w"+map[int]string{4: "4", 16: "16"}[w], s)
		}
	}
	if _, err := Report(dir, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"scaling_speedup_1gbps.png", "scaling_speedup_10gbps.png", ScalingLinkPNG} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) < 1000 {
			t.Errorf("%s: %d bytes, %v", f, len(b), err)
		}
	}
	flat := filepath.Join(t.TempDir(), "flat")
	writeFile(t, filepath.Join(flat, "sweep.yaml"), "name: flat\nbase: b.yaml\nset: []\nvariations: []\n")
	writeRun(t, flat, "dense", classifierSummary("none", 1, 0.9, 1, 1, 5))
	writeRun(t, flat, "topk", classifierSummary("topk", 1, 0.9, 10, 100, 5))
	if _, err := Report(flat, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(flat, ScalingLinkPNG)); !os.IsNotExist(err) {
		t.Errorf("a sweep at one worker count has %s (%v)", ScalingLinkPNG, err)
	}
}
