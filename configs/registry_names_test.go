package configs_test

import (
	"strings"
	"testing"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// TestEveryRegisteredNameLoads: the names a run config accepts are the
// registries' names, so every registered optimizer, schedule, model and
// compressor loads with the defaults (plus what its section's own rules need),
// and a name outside the registry is refused with the registry's list.
func TestEveryRegisteredNameLoads(t *testing.T) {
	var cases [][]string
	for _, n := range optim.Names() {
		cases = append(cases, []string{"optim.name=" + n})
	}
	for _, n := range optim.ScheduleNames() {
		cases = append(cases, []string{"schedule.name=" + n, "schedule.milestones=3"})
	}
	for _, n := range models.Names() {
		set := []string{"model.name=" + n}
		if n == "charlstm" {
			set = append(set, "data.name=tinyshakespeare")
		}
		cases = append(cases, set)
	}
	for _, n := range compress.Names() {
		cases = append(cases, []string{"compress.name=" + n})
	}
	for _, sets := range cases {
		c, err := configs.Load("", sets)
		if err != nil {
			t.Errorf("%v: %v", sets, err)
			continue
		}
		// The resolved config states the optimizer's own defaults, which validate.
		if err := c.Optim.Validate(); err != nil {
			t.Errorf("%v: resolved optim section: %v", sets, err)
		}
	}

	for key, names := range map[string][]string{
		"optim.name":    optim.Names(),
		"schedule.name": optim.ScheduleNames(),
		"model.name":    models.Names(),
		"compress.name": compress.Names(),
	} {
		_, err := configs.Load("", []string{key + "=nosuch"})
		want := `--set: ` + key + `: "nosuch": must be one of ` + strings.Join(names, ", ")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=nosuch: err = %v, want %q", key, err, want)
		}
	}
}

// TestScheduleRulesAtLoad: the step schedule's own rules, which NewSchedule
// applies at the start of a run, refuse a config when it is loaded.
func TestScheduleRulesAtLoad(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"schedule.name=step"}, "schedule.milestones: []: at least one epoch for the step schedule"}, // the default, so no --set:
		{[]string{"schedule.name=step", "schedule.milestones=1,3", "schedule.warmup_epochs=2"},
			"--set: schedule.milestones: [1, 3]: strictly increasing epochs after the warm-up (1 is within warmup_epochs = 2)"},
	} {
		_, err := configs.Load("", c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.sets, err, c.want)
		}
	}
}
