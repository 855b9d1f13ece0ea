package optim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// scheduleKind is the main schedule that follows the warm-up.
type scheduleKind int

const (
	constantSchedule scheduleKind = iota
	stepSchedule
	cosineSchedule
	polySchedule
)

// scheduleKinds maps ScheduleConfig.Name to the main schedule.
var scheduleKinds = map[string]scheduleKind{
	"constant": constantSchedule,
	"step":     stepSchedule,
	"cosine":   cosineSchedule,
	"poly":     polySchedule,
}

// ScheduleNames returns the registered schedule names, sorted.
func ScheduleNames() []string { return slices.Sorted(maps.Keys(scheduleKinds)) }

// Schedule gives the learning rate of every step of a run. Steps count from 0 over
// the whole run; an epoch is stepsPerEpoch steps.
//
// Peak rate: peak = baseLR * globalBatch/BaseBatch when BaseBatch > 0 (the linear
// scaling rule of Goyal et al. 2017; with Scaling "sqrt", baseLR *
// sqrt(globalBatch/BaseBatch), the square-root rule You et al. 2019 use for LAMB),
// else peak = baseLR.
//
// Warm-up: W = round(WarmupEpochs*stepsPerEpoch) steps (at least 1 when
// WarmupEpochs > 0; fractional epochs are fine). For step s < W,
//
//	lr(s) = start + (peak - start) * s/W
//
// so the rate grows by the same amount every step, starts at start on step 0 and
// reaches peak on step W, the first step of the main schedule. With linear scaling
// start = baseLR (Goyal et al.: from the small-batch rate up to the scaled one);
// without it start = peak/W. This is PyTorch's LinearLR with start_factor =
// start/peak and total_iters = W.
//
// Main schedule, for steps s >= W:
//
//	constant: lr = peak
//	step:     lr = peak * Gamma^k, k = the number of milestones reached; milestone
//	          epoch e is reached at step round(e*stepsPerEpoch), epochs counted from
//	          the start of the run (warm-up included), as MultiStepLR
//	cosine:   lr = MinLR + (peak-MinLR)*(1+cos(pi*t/T))/2, t = s-W, T = totalSteps-W;
//	          lr = MinLR from step totalSteps on (CosineAnnealingLR with T_max = T)
//	poly:     lr = MinLR + (peak-MinLR)*(1-t/T)^Power, t and T as cosine, Power 2 by
//	          default (the poly(2) rule of the LARS paper); lr = MinLR from step
//	          totalSteps on. With MinLR 0 this is PyTorch's PolynomialLR (total_iters
//	          = T); with MinLR it is TF's polynomial_decay to end_learning_rate.
type Schedule struct {
	kind       scheduleKind
	start      float64 // rate at step 0 of the warm-up
	peak       float64 // rate at the end of the warm-up
	warmup     int     // warm-up steps W
	milestones []int   // step: first step of each decay, increasing
	gamma      float64
	minLR      float64
	power      float64 // poly: exponent
	total      int
}

// NewSchedule builds the schedule described by sc for a run of totalSteps steps of
// stepsPerEpoch steps each, a base learning rate baseLR (Config.LR) and a global batch
// of globalBatch samples. Invalid settings are *FieldErrors naming the key.
func NewSchedule(sc ScheduleConfig, baseLR float64, globalBatch, stepsPerEpoch, totalSteps int) (*Schedule, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if !finite(baseLR) || baseLR <= 0 {
		return nil, &FieldError{Key: "optim.lr", Value: baseLR, Want: "a finite number > 0"}
	}
	if stepsPerEpoch <= 0 {
		return nil, fmt.Errorf("optim: schedule: %d steps per epoch, want > 0", stepsPerEpoch)
	}
	if totalSteps <= 0 {
		return nil, fmt.Errorf("optim: schedule: %d total steps, want > 0", totalSteps)
	}
	s := &Schedule{kind: scheduleKinds[sc.Name], peak: baseLR, gamma: sc.Gamma, minLR: sc.MinLR, power: sc.Power, total: totalSteps}
	if s.power == 0 {
		s.power = defaultPolyPower
	}
	if sc.BaseBatch > 0 {
		if globalBatch <= 0 {
			return nil, fmt.Errorf("optim: schedule: global batch %d, want > 0 for linear scaling (schedule.base_batch = %d)", globalBatch, sc.BaseBatch)
		}
		s.peak = baseLR * float64(globalBatch) / float64(sc.BaseBatch)
		if sc.Scaling == "sqrt" {
			s.peak = baseLR * math.Sqrt(float64(globalBatch)/float64(sc.BaseBatch))
		}
	}
	if sc.WarmupEpochs > 0 {
		s.warmup = max(1, int(math.Round(sc.WarmupEpochs*float64(stepsPerEpoch))))
		if s.warmup > totalSteps {
			return nil, &FieldError{Key: "schedule.warmup_epochs", Value: sc.WarmupEpochs,
				Want: fmt.Sprintf("at most the run: %d warm-up steps > %d total steps", s.warmup, totalSteps)}
		}
		s.start = s.peak / float64(s.warmup)
		if sc.BaseBatch > 0 {
			s.start = baseLR
		}
	}
	if s.kind == stepSchedule {
		s.milestones = make([]int, len(sc.Milestones))
		for i, e := range sc.Milestones {
			s.milestones[i] = int(math.Round(e * float64(stepsPerEpoch)))
		}
	}
	if (s.kind == cosineSchedule || s.kind == polySchedule) && sc.MinLR > s.peak {
		return nil, &FieldError{Key: "schedule.min_lr", Value: sc.MinLR, Want: fmt.Sprintf("at most the peak learning rate %g", s.peak)}
	}
	return s, nil
}

// LR returns the learning rate of step (counted from 0 over the whole run; a
// negative step counts as 0).
func (s *Schedule) LR(step int) float64 {
	step = max(step, 0)
	if step < s.warmup {
		return s.start + (s.peak-s.start)*float64(step)/float64(s.warmup)
	}
	switch s.kind {
	case stepSchedule:
		lr := s.peak
		for _, m := range s.milestones {
			if step < m {
				break
			}
			lr *= s.gamma
		}
		return lr
	case cosineSchedule:
		T := s.total - s.warmup
		t := step - s.warmup
		if t >= T {
			return s.minLR
		}
		return s.minLR + (s.peak-s.minLR)*(1+math.Cos(math.Pi*float64(t)/float64(T)))/2
	case polySchedule:
		T := s.total - s.warmup
		t := step - s.warmup
		if t >= T {
			return s.minLR
		}
		return s.minLR + (s.peak-s.minLR)*math.Pow(1-float64(t)/float64(T), s.power)
	default:
		return s.peak
	}
}

// Validate checks sc on its own (NewSchedule also checks it against the run) and
// reports the first invalid field as a *FieldError. Only the fields the named
// schedule uses are checked: Gamma and Milestones for step, MinLR for cosine and
// poly, Power for poly.
func (sc ScheduleConfig) Validate() error {
	kind, ok := scheduleKinds[sc.Name]
	if !ok {
		return &FieldError{Key: "schedule.name", Value: sc.Name, Want: "one of " + strings.Join(ScheduleNames(), ", ")}
	}
	if !finite(sc.WarmupEpochs) || sc.WarmupEpochs < 0 {
		return &FieldError{Key: "schedule.warmup_epochs", Value: sc.WarmupEpochs, Want: "a finite number of epochs >= 0 (0 = no warm-up)"}
	}
	if sc.BaseBatch < 0 {
		return &FieldError{Key: "schedule.base_batch", Value: sc.BaseBatch, Want: "a batch size >= 0 (0 = no linear scaling)"}
	}
	if sc.Scaling != "" && sc.Scaling != "linear" && sc.Scaling != "sqrt" {
		return &FieldError{Key: "schedule.scaling", Value: sc.Scaling, Want: "linear or sqrt"}
	}
	switch kind {
	case stepSchedule:
		if !(sc.Gamma > 0 && sc.Gamma <= 1) {
			return &FieldError{Key: "schedule.gamma", Value: sc.Gamma, Want: "a decay factor in (0, 1]"}
		}
		return sc.validateMilestones()
	case cosineSchedule, polySchedule:
		if !finite(sc.MinLR) || sc.MinLR < 0 {
			return &FieldError{Key: "schedule.min_lr", Value: sc.MinLR, Want: "a finite number >= 0"}
		}
		if kind == polySchedule && (!finite(sc.Power) || sc.Power < 0) {
			return &FieldError{Key: "schedule.power", Value: sc.Power, Want: "a finite exponent > 0 (0 selects the default 2)"}
		}
	}
	return nil
}

func (sc ScheduleConfig) validateMilestones() error {
	const want = "strictly increasing epochs after the warm-up"
	ms := sc.Milestones
	if len(ms) == 0 {
		return &FieldError{Key: "schedule.milestones", Value: ms, Want: "at least one epoch for the step schedule"}
	}
	for i, e := range ms {
		switch {
		case !finite(e) || e <= 0:
			return &FieldError{Key: "schedule.milestones", Value: ms, Want: fmt.Sprintf("%s (%v is not > 0)", want, e)}
		case e <= sc.WarmupEpochs:
			// A decay inside the warm-up would be overridden by the ramp; refuse it
			// rather than guess which the user meant.
			return &FieldError{Key: "schedule.milestones", Value: ms, Want: fmt.Sprintf("%s (%v is within warmup_epochs = %v)", want, e, sc.WarmupEpochs)}
		case i > 0 && e <= ms[i-1]:
			return &FieldError{Key: "schedule.milestones", Value: ms, Want: fmt.Sprintf("%s (%v follows %v)", want, e, ms[i-1])}
		}
	}
	return nil
}

// defaultPolyPower is the exponent of the poly schedule when ScheduleConfig.Power is
// 0: the poly(2) rule of the LARS paper (PyTorch's PolynomialLR defaults to 1).
const defaultPolyPower = 2

// ApplyDefaults sets Gamma to 0.1 (PyTorch's MultiStepLR default) for the step
// schedule when it is zero, which is never a valid decay factor, and Power to 2 for
// the poly schedule when it is zero (NewSchedule reads 0 as 2 too).
func (sc *ScheduleConfig) ApplyDefaults() {
	if sc.Name == "step" && sc.Gamma == 0 {
		sc.Gamma = 0.1
	}
	if sc.Name == "poly" && sc.Power == 0 {
		sc.Power = defaultPolyPower
	}
}
