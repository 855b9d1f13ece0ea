package optim

import (
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/problem"
)

func problemKeys(ps []problem.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key)
	}
	return out
}

func TestDefaultConfigsValid(t *testing.T) {
	c := DefaultConfig()
	c.ApplyDefaults()
	if ps := c.Problems(); len(ps) != 0 {
		t.Errorf("DefaultConfig: %v", ps)
	}
	if ps := DefaultScheduleConfig().Problems(); len(ps) != 0 {
		t.Errorf("DefaultScheduleConfig: %v", ps)
	}
	// Every registered optimizer accepts the section defaults with its own filled in.
	for _, name := range Names() {
		c := DefaultConfig()
		c.Name = name
		c.ApplyDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestConfigProblemsAll: every problem is reported at once, including the ones
// only the named optimizer's constructor knows (eps for Adam), and only those:
// SGD divides by nothing, so eps 0 is fine for it.
func TestConfigProblemsAll(t *testing.T) {
	c := Config{Name: "adam", LR: -1, Beta1: 0.9, Beta2: 2, Eps: 0, ClipNorm: -1}
	got := problemKeys(c.Problems())
	want := []string{"optim.lr", "optim.beta2", "optim.clip_norm", "optim.eps"}
	if !slices.Equal(got, want) {
		t.Errorf("adam problems %v, want %v", got, want)
	}
	sgd := Config{Name: "sgd", LR: 0.1}
	if ps := sgd.Problems(); len(ps) != 0 {
		t.Errorf("sgd with eps 0: %v, want no problems", ps)
	}
	// An unknown name: the name alone. Eps left at zero would take the named
	// optimizer's default, so it is no problem until a value breaks a rule.
	unknown := Config{Name: "lion", LR: 0.1}
	ps := unknown.Problems()
	if got := problemKeys(ps); !slices.Equal(got, []string{"optim.name"}) {
		t.Errorf("unknown name problems %v, want [optim.name]", got)
	}
	badEps := Config{Name: "lion", LR: 0.1, Eps: -1}
	if got := problemKeys(badEps.Problems()); !slices.Equal(got, []string{"optim.name", "optim.eps"}) {
		t.Errorf("unknown name with eps -1: problems %v, want [optim.name optim.eps]", got)
	}
	if msg := ps[0].Error(); !strings.Contains(msg, `"lion"`) || !strings.Contains(msg, strings.Join(Names(), ", ")) {
		t.Errorf("name problem %q does not quote the value and list %v", msg, Names())
	}
}

// TestScheduleProblems: the field ranges and, where they hold, the named
// schedule's own rules, each key once.
func TestScheduleProblems(t *testing.T) {
	for _, c := range []struct {
		sc   ScheduleConfig
		want []string
	}{
		{ScheduleConfig{Name: "spiral", Gamma: 0.1, Scaling: "linear", Power: 2}, []string{"schedule.name"}},
		{ScheduleConfig{Name: "cosine", Gamma: 2, MinLR: -1, WarmupEpochs: -1, BaseBatch: -1, Scaling: "cubic", Power: 0},
			[]string{"schedule.gamma", "schedule.min_lr", "schedule.warmup_epochs", "schedule.base_batch", "schedule.power", "schedule.scaling"}},
		// A milestone inside the warm-up passes the range check but not the step schedule's rule.
		{ScheduleConfig{Name: "step", Milestones: []float64{1, 3}, Gamma: 0.1, WarmupEpochs: 2, Scaling: "linear", Power: 2}, []string{"schedule.milestones"}},
		{ScheduleConfig{Name: "step", Milestones: []float64{}, Gamma: 0.1, Scaling: "linear", Power: 2}, []string{"schedule.milestones"}},
	} {
		if got := problemKeys(c.sc.Problems()); !slices.Equal(got, c.want) {
			t.Errorf("%+v: problems %v, want %v", c.sc, got, c.want)
		}
	}
}
