package models

import (
	"slices"
	"testing"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
	// A Config built in code gets the same sizes for the fields it leaves at zero.
	got := withDefaults(Config{Name: "mlp"})
	want := DefaultConfig()
	want.Name, want.Ops, want.Precision = "mlp", "", ""
	if !slices.Equal(got.Hidden, want.Hidden) || got.HiddenSize != want.HiddenSize || got.Layers != want.Layers ||
		got.EmbedDim != want.EmbedDim || got.BNMomentum != want.BNMomentum || got.BNEpsilon != want.BNEpsilon {
		t.Errorf("withDefaults(mlp) = %+v, want the sizes of %+v", got, want)
	}
	// Set fields are kept.
	if c := withDefaults(Config{Hidden: []int{7}, Layers: 3}); !slices.Equal(c.Hidden, []int{7}) || c.Layers != 3 {
		t.Errorf("withDefaults overwrote set fields: %+v", c)
	}
}

func TestConfigProblems(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Hidden, c.Layers, c.BNMomentum, c.Ops = "vit", []int{3, 0}, MaxLayers+1, 1.5, "turbo"
	var got []string
	for _, p := range c.Problems() {
		got = append(got, p.Error())
	}
	want := []string{
		`model.name: "vit": must be one of charlstm, lenet5, lstm, mlp, resnet20, resnet32, resnet56`,
		`model.hidden: [3, 0]: must be a non-empty list of sizes >= 1`,
		`model.layers: 65: must be at most 64`,
		`model.bn_momentum: 1.5: must be in (0, 1]`,
		`model.ops: "turbo": must be one of fast, gorgonia (empty means fast)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%q\nwant\n%q", got, want)
	}
}

// TestZeroInitResidualProblems: the option is for the ResNets only.
func TestZeroInitResidualProblems(t *testing.T) {
	for name, ok := range map[string]bool{"resnet20": true, "resnet56": true, "lenet5": false, "charlstm": false} {
		c := DefaultConfig()
		c.Name, c.ZeroInitResidual = name, true
		ps := c.Problems()
		if ok && len(ps) > 0 {
			t.Errorf("%s: %v", name, ps)
		}
		want := `model.zero_init_residual: true: applies to the ResNets only (resnet20, resnet32, resnet56; model.name is ` + name + `): the other models have no residual blocks`
		if !ok && (len(ps) != 1 || ps[0].Error() != want) {
			t.Errorf("%s: problems %v, want\n%s", name, ps, want)
		}
	}
}
