package compress

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gradwire/gradwire/internal/problem"
)

// DGC's presets (compress.dgc.preset). The defaults are the paper's settings
// (Lin et al. 2018): momentum correction, momentum factor masking, the sampled
// top-k threshold, the exponential density warm-up over 4 epochs, no local
// clipping. "recipe" is the combination chosen on held-out validation data
// (experiments/dgc-recipe-lenet5-fashion.yaml, LeNet-5, 2 seeds: 90.49% against
// the defaults' 80.09 ± 9.15%) and then run unchanged on ResNet-20 and the
// character LSTM: momentum correction kept, masking off, exact top-k, the staged
// density warm-up over one epoch, local clipping at 5, and the two encodings
// of that row (16-bit indices, float16 for the tensors sent dense).
const (
	DGCPresetPaper  = "paper"
	DGCPresetRecipe = "recipe"
)

// DGCPresets maps each preset to the compress keys it sets ("compress.<key>")
// and their values. The run config loader applies them beneath the config's own
// keys: a key the file or a --set gives keeps its value.
var DGCPresets = map[string]map[string]any{
	DGCPresetPaper: {},
	DGCPresetRecipe: {
		"compress.dgc.factor_masking":  false,
		"compress.dgc.sampling":        false,
		"compress.dgc.warmup_schedule": "stages",
		"compress.dgc.warmup_epochs":   1,
		"compress.dgc.clip_norm":       5.0,
		"compress.narrow_indices":      true,
		"compress.dense_fp16":          true,
	},
}

// presetProblems checks compress.dgc.preset: a known name, and a preset other
// than the defaults only for DGC (it sets keys other compressors read).
func (c Config) presetProblems() []Problem {
	var ps problem.List
	names := slices.Sorted(maps.Keys(DGCPresets))
	ps.OneOf("compress.dgc.preset", c.DGC.Preset, names)
	ps.Need(c.DGC.Preset == DGCPresetPaper || c.Name == "dgc" || !slices.Contains(names, c.DGC.Preset), "compress.dgc.preset", c.DGC.Preset,
		fmt.Sprintf("applies to compress.name dgc (compress.name is %q); leave it at %s", c.Name, DGCPresetPaper))
	return ps
}
