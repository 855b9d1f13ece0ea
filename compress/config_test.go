package compress

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

func TestConfigProblems(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Density, c.NarrowIndices, c.PowerSGD.Rank = "zip", 0, true, 0
	var got []string
	for _, p := range c.Problems() {
		got = append(got, p.Error())
	}
	want := []string{
		`compress.name: "zip": must be one of ` + strings.Join(Names(), ", "),
		`compress.density: 0: must be a fraction in (0, 1]`,
		`compress.narrow_indices: true: only topk and dgc send indices (compress.name is "zip")`,
		`compress.powersgd.rank: 0: must be at least 1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%q\nwant\n%q", got, want)
	}
	// Validate joins them; each is a *Problem naming its key.
	var p *Problem
	if err := c.Validate(); !errors.As(err, &p) || p.Key != "compress.name" {
		t.Errorf("Validate() = %v, want a *Problem for compress.name first", err)
	}
}

// TestWeightDecayAtProblems: compress.dgc.weight_decay_at is velocity or
// optimizer, the latter only under momentum correction.
func TestWeightDecayAtProblems(t *testing.T) {
	for _, tc := range []struct {
		at   string
		mc   bool
		want string
	}{
		{DecayAtVelocity, true, ""},
		{DecayAtOptimizer, true, ""},
		{DecayAtVelocity, false, ""},
		{"gradient", true, `compress.dgc.weight_decay_at: "gradient": must be one of velocity, optimizer`},
		{DecayAtOptimizer, false, `compress.dgc.weight_decay_at: "optimizer": needs compress.dgc.momentum_correction true: ` +
			`without momentum correction the optimizer applies weight decay (and momentum) to the exchanged gradient already`},
	} {
		c := DefaultConfig()
		c.Name, c.DGC.WeightDecayAt, c.DGC.MomentumCorrection = "dgc", tc.at, tc.mc
		err := c.Validate()
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("weight_decay_at %q, momentum_correction %v: %v, want %q", tc.at, tc.mc, err, tc.want)
		}
	}
}

func TestOwnsMomentumFollowsNeeds(t *testing.T) {
	for _, name := range Names() {
		for _, mc := range []bool{true, false} {
			c := DefaultConfig()
			c.Name, c.DGC.MomentumCorrection, c.LGC.MomentumCorrection = name, mc, mc
			want := (name == "dgc" || name == "lgc") && mc
			if got := c.OwnsMomentum(); got != want {
				t.Errorf("%s momentum_correction %v: OwnsMomentum %v, want %v", name, mc, got, want)
			}
		}
	}
}
