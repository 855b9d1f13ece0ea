package optim

import (
	"math"
	"slices"
	"strings"
	"testing"
)

type lrAt struct {
	step int
	want float64
}

func checkSchedule(t *testing.T, name string, sc ScheduleConfig, baseLR float64, globalBatch, stepsPerEpoch, totalSteps int, points []lrAt) {
	t.Helper()
	s, err := NewSchedule(sc, baseLR, globalBatch, stepsPerEpoch, totalSteps)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, p := range points {
		// Schedules are float64 throughout: a few roundings at most.
		if got := s.LR(p.step); math.Abs(got-p.want) > 1e-12*math.Abs(p.want)+1e-18 {
			t.Errorf("%s: LR(%d) = %.15g, want %.15g", name, p.step, got, p.want)
		}
	}
}

func TestScheduleConstant(t *testing.T) {
	checkSchedule(t, "plain", ScheduleConfig{Name: "constant"}, 0.1, 128, 100, 1000,
		[]lrAt{{0, 0.1}, {999, 0.1}, {5000, 0.1}, {-3, 0.1}})

	// Linear scaling: peak = 0.1*1024/256 = 0.4. Warm-up 5 epochs of 100 steps: W = 500,
	// lr(s) = 0.1 + (0.4-0.1)*s/500 (from the unscaled rate, Goyal et al.).
	checkSchedule(t, "warm-up, scaled", ScheduleConfig{Name: "constant", WarmupEpochs: 5, BaseBatch: 256}, 0.1, 1024, 100, 10000,
		[]lrAt{{0, 0.1}, {250, 0.25}, {499, 0.1 + 0.3*499/500}, {500, 0.4}, {9999, 0.4}})

	// No scaling: peak = 0.1. Warm-up 0.5 epochs of 8 steps: W = 4, from peak/W = 0.025:
	// lr(s) = 0.025 + 0.075*s/4 = 0.025, 0.04375, 0.0625, 0.08125, then 0.1.
	checkSchedule(t, "warm-up, unscaled", ScheduleConfig{Name: "constant", WarmupEpochs: 0.5}, 0.1, 64, 8, 100,
		[]lrAt{{0, 0.025}, {1, 0.04375}, {2, 0.0625}, {3, 0.08125}, {4, 0.1}, {99, 0.1}})

	// A warm-up shorter than a step still lasts one step, which is the peak: W = 1, start = peak.
	checkSchedule(t, "tiny warm-up", ScheduleConfig{Name: "constant", WarmupEpochs: 0.01}, 0.1, 64, 10, 100,
		[]lrAt{{0, 0.1}, {1, 0.1}})
}

func TestScheduleStep(t *testing.T) {
	// Goyal et al.'s ImageNet recipe at batch 8192: peak = 0.1*8192/256 = 3.2, warm-up 5
	// epochs (10 steps each, W = 50) from 0.1, then x0.1 at epochs 30, 60, 80 (steps 300, 600, 800).
	//   lr(25) = 0.1 + 3.1*25/50 = 1.65
	checkSchedule(t, "Goyal", ScheduleConfig{Name: "step", Milestones: []float64{30, 60, 80}, Gamma: 0.1, WarmupEpochs: 5, BaseBatch: 256},
		0.1, 8192, 10, 900,
		[]lrAt{{0, 0.1}, {25, 1.65}, {50, 3.2}, {299, 3.2}, {300, 0.32}, {599, 0.32}, {600, 0.032}, {800, 0.0032}, {899, 0.0032}})

	// No warm-up or scaling; a fractional milestone: epoch 1.5 of 10 steps is step 15.
	//   lr = 0.1 until step 14, 0.1*0.5 = 0.05 from step 15, 0.025 from step 30.
	checkSchedule(t, "fractional", ScheduleConfig{Name: "step", Milestones: []float64{1.5, 3}, Gamma: 0.5}, 0.1, 32, 10, 50,
		[]lrAt{{0, 0.1}, {14, 0.1}, {15, 0.05}, {29, 0.05}, {30, 0.025}, {49, 0.025}})
}

func TestScheduleCosine(t *testing.T) {
	// No warm-up: T = 100, lr = 0.1*(1+cos(pi*s/100))/2.
	//   s=25: 0.05*(1+cos(pi/4)) = 0.05*1.70710678 = 0.0853553391
	//   s=50: 0.05;  s=99: 0.05*(1+cos(0.99*pi)) = 0.05*(1-0.99950656) = 2.46719817e-5;  s>=100: 0
	checkSchedule(t, "plain", ScheduleConfig{Name: "cosine"}, 0.1, 32, 10, 100,
		[]lrAt{{0, 0.1}, {25, 0.05 * (1 + math.Sqrt2/2)}, {50, 0.05}, {99, 2.467198171342e-05}, {100, 0}, {150, 0}})

	// Scaled peak 0.1*512/256 = 0.2, warm-up 2 epochs of 10 steps (W = 20) from 0.1, then
	// cosine to min_lr = 0.02 over T = 120-20 = 100 steps: lr = 0.02 + 0.18*(1+cos(pi*(s-20)/100))/2.
	//   s=10: 0.1 + 0.1*10/20 = 0.15;  s=20: 0.2;  s=45: 0.02 + 0.09*1.70710678 = 0.173639610
	//   s=70: 0.02 + 0.09 = 0.11;  s=120: 0.02
	checkSchedule(t, "warm-up, scaled, min_lr", ScheduleConfig{Name: "cosine", MinLR: 0.02, WarmupEpochs: 2, BaseBatch: 256},
		0.1, 512, 10, 120,
		[]lrAt{{0, 0.1}, {10, 0.15}, {20, 0.2}, {45, 0.02 + 0.09*(1+math.Sqrt2/2)}, {70, 0.11}, {120, 0.02}})

	// Warm-up over the whole run leaves no cosine steps; after it the rate is min_lr.
	checkSchedule(t, "all warm-up", ScheduleConfig{Name: "cosine", MinLR: 0.01, WarmupEpochs: 1}, 0.1, 32, 10, 10,
		[]lrAt{{0, 0.01}, {9, 0.01 + 0.09*9/10}, {10, 0.01}})
}

func TestSchedulePoly(t *testing.T) {
	// No warm-up, power 2 (the default for 0): T = 100, lr = 0.1*(1-s/100)^2.
	//   s=10: 0.1*0.81 = 0.081;  s=50: 0.1*0.25 = 0.025;  s=90: 0.1*0.01 = 0.001;  s>=100: 0
	checkSchedule(t, "plain", ScheduleConfig{Name: "poly"}, 0.1, 32, 10, 100,
		[]lrAt{{0, 0.1}, {10, 0.081}, {50, 0.025}, {90, 0.001}, {99, 1e-5}, {100, 0}, {150, 0}})

	// Power 1 is linear decay: lr = 0.1*(1-s/100).
	checkSchedule(t, "linear", ScheduleConfig{Name: "poly", Power: 1}, 0.1, 32, 10, 100,
		[]lrAt{{0, 0.1}, {25, 0.075}, {50, 0.05}, {100, 0}})

	// The LARS recipe: scaled peak 0.1*512/256 = 0.2, warm-up 2 epochs of 10 steps (W = 20)
	// from 0.1, then poly(2) to min_lr = 0.02 over T = 120-20 = 100 steps:
	// lr = 0.02 + 0.18*(1-(s-20)/100)^2.
	//   s=10: 0.1 + 0.1*10/20 = 0.15;  s=20: 0.2;  s=70: 0.02 + 0.18*0.25 = 0.065
	//   s=110: 0.02 + 0.18*0.01 = 0.0218;  s=120: 0.02
	checkSchedule(t, "warm-up, scaled, min_lr", ScheduleConfig{Name: "poly", Power: 2, MinLR: 0.02, WarmupEpochs: 2, BaseBatch: 256},
		0.1, 512, 10, 120,
		[]lrAt{{0, 0.1}, {10, 0.15}, {20, 0.2}, {70, 0.065}, {110, 0.0218}, {120, 0.02}, {200, 0.02}})

	// A fractional power: 0.1*(1-0.75)^0.5 = 0.05 at s = 75.
	checkSchedule(t, "square root", ScheduleConfig{Name: "poly", Power: 0.5}, 0.1, 32, 10, 100,
		[]lrAt{{75, 0.05}, {96, 0.02}})
}

func TestScheduleValidation(t *testing.T) {
	step := func(ms ...float64) ScheduleConfig {
		return ScheduleConfig{Name: "step", Milestones: ms, Gamma: 0.1}
	}
	for _, c := range []struct {
		name string
		sc   ScheduleConfig
		lr   float64
		key  string
	}{
		{"unknown name", ScheduleConfig{Name: "exponential"}, 0.1, "schedule.name"},
		{"empty name", ScheduleConfig{}, 0.1, "schedule.name"},
		{"negative warm-up", ScheduleConfig{Name: "constant", WarmupEpochs: -1}, 0.1, "schedule.warmup_epochs"},
		{"NaN warm-up", ScheduleConfig{Name: "constant", WarmupEpochs: math.NaN()}, 0.1, "schedule.warmup_epochs"},
		{"warm-up longer than the run", ScheduleConfig{Name: "constant", WarmupEpochs: 20}, 0.1, "schedule.warmup_epochs"},
		{"negative base batch", ScheduleConfig{Name: "constant", BaseBatch: -256}, 0.1, "schedule.base_batch"},
		{"gamma zero", ScheduleConfig{Name: "step", Milestones: []float64{3}}, 0.1, "schedule.gamma"},
		{"gamma above one", ScheduleConfig{Name: "step", Milestones: []float64{3}, Gamma: 2}, 0.1, "schedule.gamma"},
		{"no milestones", step(), 0.1, "schedule.milestones"},
		{"milestone zero", step(0, 3), 0.1, "schedule.milestones"},
		{"milestones not increasing", step(3, 3), 0.1, "schedule.milestones"},
		{"milestones decreasing", step(6, 3), 0.1, "schedule.milestones"},
		{"milestone in warm-up", ScheduleConfig{Name: "step", Milestones: []float64{2}, Gamma: 0.1, WarmupEpochs: 2}, 0.1, "schedule.milestones"},
		{"negative min_lr", ScheduleConfig{Name: "cosine", MinLR: -1e-3}, 0.1, "schedule.min_lr"},
		{"min_lr above peak", ScheduleConfig{Name: "cosine", MinLR: 0.2}, 0.1, "schedule.min_lr"},
		{"poly min_lr above peak", ScheduleConfig{Name: "poly", MinLR: 0.2}, 0.1, "schedule.min_lr"},
		{"poly negative min_lr", ScheduleConfig{Name: "poly", MinLR: -1}, 0.1, "schedule.min_lr"},
		{"poly negative power", ScheduleConfig{Name: "poly", Power: -2}, 0.1, "schedule.power"},
		{"poly NaN power", ScheduleConfig{Name: "poly", Power: math.NaN()}, 0.1, "schedule.power"},
		{"zero lr", ScheduleConfig{Name: "constant"}, 0, "optim.lr"},
		{"infinite lr", ScheduleConfig{Name: "constant"}, math.Inf(1), "optim.lr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewSchedule(c.sc, c.lr, 32, 10, 100)
			wantFieldError(t, err, c.key)
		})
	}

	// The message names the offending value too.
	_, err := NewSchedule(step(30, 20), 0.1, 32, 10, 1000)
	wantErrorContaining(t, err, "schedule.milestones: [30, 20]:", "20 follows 30")

	// Run-shape arguments are checked too.
	sc := ScheduleConfig{Name: "constant", BaseBatch: 256}
	for _, c := range []struct {
		name                   string
		batch, perEpoch, total int
		mention                string
	}{
		{"no global batch with scaling", 0, 10, 100, "global batch"},
		{"no steps per epoch", 32, 0, 100, "steps per epoch"},
		{"no steps", 32, 10, 0, "total steps"},
	} {
		_, err := NewSchedule(sc, 0.1, c.batch, c.perEpoch, c.total)
		wantErrorContaining(t, err, c.mention)
	}
}

func TestScheduleApplyDefaults(t *testing.T) {
	sc := ScheduleConfig{Name: "step", Milestones: []float64{3}}
	sc.ApplyDefaults()
	if sc.Gamma != 0.1 {
		t.Errorf("step gamma default = %v, want 0.1", sc.Gamma)
	}
	if err := sc.Validate(); err != nil {
		t.Error(err)
	}
	sc = ScheduleConfig{Name: "cosine"}
	sc.ApplyDefaults()
	if sc.Gamma != 0 || sc.Power != 0 {
		t.Errorf("cosine got gamma %v, power %v, want them left at 0", sc.Gamma, sc.Power)
	}
	sc = ScheduleConfig{Name: "poly"}
	sc.ApplyDefaults()
	if sc.Power != 2 || sc.Gamma != 0 {
		t.Errorf("poly defaults gave power %v, gamma %v, want 2 and 0", sc.Power, sc.Gamma)
	}
	sc = ScheduleConfig{Name: "poly", Power: 1}
	sc.ApplyDefaults()
	if sc.Power != 1 {
		t.Errorf("poly power 1 changed to %v", sc.Power)
	}
}

func TestScheduleNames(t *testing.T) {
	want := []string{"constant", "cosine", "poly", "step"}
	if got := ScheduleNames(); !slices.Equal(got, want) {
		t.Errorf("ScheduleNames() = %v, want %v", got, want)
	}
	for _, name := range want {
		sc := ScheduleConfig{Name: name, Milestones: []float64{1}, Gamma: 0.5}
		if _, err := NewSchedule(sc, 0.1, 32, 10, 100); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Square-root scaling: base lr 0.001 at batch 128, global batch 8192:
// 0.001 * sqrt(8192/128) = 0.001 * 8 = 0.008 (linear would give 0.064).
func TestScheduleSqrtScaling(t *testing.T) {
	s, err := NewSchedule(ScheduleConfig{Name: "constant", BaseBatch: 128, Scaling: "sqrt"}, 0.001, 8192, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.LR(5); math.Abs(got-0.008) > 1e-12 {
		t.Fatalf("sqrt-scaled lr %v, want 0.008", got)
	}
	if err := (ScheduleConfig{Name: "constant", Scaling: "cubic"}).Validate(); err == nil || !strings.Contains(err.Error(), "schedule.scaling") {
		t.Fatalf("error %v, expected schedule.scaling to be rejected", err)
	}
}
