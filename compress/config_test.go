package compress

import (
	"errors"
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
