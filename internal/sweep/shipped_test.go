package sweep

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/configs"
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

// TestDGCRecipePresetIsTheValidatedRow: compress.dgc.preset recipe gives
// exactly the compress settings of the rows it was chosen by and then run as
// (LeNet-5's validation sweep, ResNet-20, the character LSTM), so the preset
// cannot drift from the evidence README cites for it.
func TestDGCRecipePresetIsTheValidatedRow(t *testing.T) {
	for _, tc := range []struct{ file, variation string }{
		{"dgc-recipe-lenet5-fashion.yaml", "dgc-stages-clip-nomask-exact"},
		{"compression-resnet20-fashion.yaml", "dgc-recipe"},
		{"compression-charlstm-sgd-10ep.yaml", "dgc"},
	} {
		s, err := Load(filepath.Join("..", "..", "experiments", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var row *Run
		for i := range s.Runs {
			if s.Runs[i].Variation == tc.variation {
				row = &s.Runs[i]
				break
			}
		}
		if row == nil {
			t.Fatalf("%s: no variation %s", tc.file, tc.variation)
		}
		// The row's settings (the sweep's set, the row's own non-compress keys,
		// the seed) with the preset in place of the row's compress keys and of
		// the density warm-up length the sweep sets.
		var own []string
		for _, v := range s.Variations {
			if v.Name == tc.variation {
				own = v.Set
			}
		}
		sets := slices.DeleteFunc(slices.Clone(row.Sets), func(kv string) bool {
			return strings.HasPrefix(kv, "compress.dgc.warmup_epochs=") || strings.HasPrefix(kv, "compress.") && slices.Contains(own, kv)
		})
		sets = append(sets, "compress.name=dgc", "compress.dgc.preset=recipe")
		preset, err := configs.Load(s.BasePath, sets)
		if err != nil {
			t.Fatal(err)
		}
		got, want := preset.Compress, row.Config.Compress
		got.DGC.Preset = want.DGC.Preset
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s: the recipe preset gives\n%+v\nthe validated row has\n%+v", tc.file, tc.variation, got, want)
		}
	}
}
