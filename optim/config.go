package optim

import (
	"errors"
	"reflect"

	"github.com/gradwire/gradwire/internal/problem"
)

// Config selects and parameterises an optimizer (the `optim` section of a run config).
//
// Every bool defaults to false, so the zero Config behaves as documented: behaviour
// that is on by default (LAMB's bias correction, keeping biases and BatchNorm out of
// weight decay) is switched off by an opt-out field. LARSEta 0 selects LARS's own
// default 0.001, as eta 0 could never be meant; LAMBMaxGradNorm 0 turns LAMB's
// clipping off. ApplyDefaults fills Beta1, Beta2 and Eps per optimizer.
type Config struct {
	Name        string  `mapstructure:"name" yaml:"name"`                 // registry name, one of Names()
	LR          float64 `mapstructure:"lr" yaml:"lr"`                     // base learning rate (> 0)
	Momentum    float64 `mapstructure:"momentum" yaml:"momentum"`         // SGD and LARS momentum in [0, 1)
	Nesterov    bool    `mapstructure:"nesterov" yaml:"nesterov"`         // SGD and LARS Nesterov momentum
	WeightDecay float64 `mapstructure:"weight_decay" yaml:"weight_decay"` // L2 (SGD, Adam, LARS) or decoupled (AdamW, LAMB, NovoGrad), >= 0
	Beta1       float64 `mapstructure:"beta1" yaml:"beta1"`               // Adam, LAMB, NovoGrad first-moment decay in [0, 1)
	Beta2       float64 `mapstructure:"beta2" yaml:"beta2"`               // Adam, LAMB, NovoGrad second-moment decay in [0, 1)
	Eps         float64 `mapstructure:"eps" yaml:"eps"`                   // Adam, LAMB, NovoGrad denominator guard (> 0)
	ClipNorm    float64 `mapstructure:"clip_norm" yaml:"clip_norm"`       // clip the global gradient norm to this; 0 = off

	// Parameter groups. Biases and BatchNorm parameters (Param.NoDecay, which the
	// models set for Kind bias and norm) get no weight decay and no layer-wise
	// adaptation unless these are true; then they are treated like weights.
	// DecayNormBias applies to every optimizer; AdaptNormBias to LARS and LAMB
	// (NovoGrad always normalises per tensor).
	DecayNormBias bool `mapstructure:"decay_norm_bias" yaml:"decay_norm_bias"` // weight decay on biases/BatchNorm too
	AdaptNormBias bool `mapstructure:"adapt_norm_bias" yaml:"adapt_norm_bias"` // trust ratio on biases/BatchNorm too

	// LARS (You et al. 2017). LARSClip is LARC's clipping: the per-tensor rate is
	// min(trust, lr) instead of lr*trust.
	LARSEta  float64 `mapstructure:"lars_eta" yaml:"lars_eta"`   // trust coefficient (> 0); 0 = the default 0.001
	LARSClip bool    `mapstructure:"lars_clip" yaml:"lars_clip"` // LARC clipping

	// LAMB (You et al. 2019, apex FusedLAMB). LAMBMaxGradNorm is LAMB's own global
	// gradient clipping, 0 = off; run configs default to 1.0, as apex.
	LAMBMaxGradNorm      float64 `mapstructure:"lamb_max_grad_norm" yaml:"lamb_max_grad_norm"`           // >= 0; 0 = no clipping
	LAMBNoBiasCorrection bool    `mapstructure:"lamb_no_bias_correction" yaml:"lamb_no_bias_correction"` // moments without 1-b^t

	// NovoGrad (Ginsburg et al. 2019, OpenSeq2Seq NovoGrad2). Grad averaging scales
	// the normalised gradient by 1-beta1 (off by default, as OpenSeq2Seq). The paper
	// divides by sqrt(v)+eps (the default), OpenSeq2Seq by sqrt(v+eps).
	NovoGradGradAveraging bool `mapstructure:"novograd_grad_averaging" yaml:"novograd_grad_averaging"`   // ghat *= 1-beta1
	NovoGradEpsInsideSqrt bool `mapstructure:"novograd_eps_inside_sqrt" yaml:"novograd_eps_inside_sqrt"` // g/sqrt(v+eps)

	// Sharpness-aware minimization around the optimizer above (Foret et al.
	// 2021): each worker's gradient is taken at w + e, e = SAMRho g/||g|| (0 =
	// off); SAMAdaptive scales the region per weight by |w| + SAMEta (ASAM,
	// Kwon et al. 2021).
	SAMRho      float64 `mapstructure:"sam_rho" yaml:"sam_rho"`           // radius of the ascent step, >= 0
	SAMAdaptive bool    `mapstructure:"sam_adaptive" yaml:"sam_adaptive"` // adaptive SAM
	SAMEta      float64 `mapstructure:"sam_eta" yaml:"sam_eta"`           // adaptive SAM's offset, >= 0
}

// ScheduleConfig is the learning-rate schedule (the `schedule` section of a run config).
type ScheduleConfig struct {
	Name         string    `mapstructure:"name" yaml:"name"`                   // constant, step, cosine, poly
	Milestones   []float64 `mapstructure:"milestones" yaml:"milestones"`       // step: epochs at which lr *= gamma
	Gamma        float64   `mapstructure:"gamma" yaml:"gamma"`                 // step: decay factor in (0, 1]
	MinLR        float64   `mapstructure:"min_lr" yaml:"min_lr"`               // cosine, poly: final learning rate
	WarmupEpochs float64   `mapstructure:"warmup_epochs" yaml:"warmup_epochs"` // linear warm-up, per step; 0 = none
	BaseBatch    int       `mapstructure:"base_batch" yaml:"base_batch"`       // scale lr by global/base (see Scaling); 0 = off
	Scaling      string    `mapstructure:"scaling" yaml:"scaling"`             // linear (Goyal et al.) or sqrt (LAMB's rule); "" = linear
	Power        float64   `mapstructure:"power" yaml:"power"`                 // poly: exponent (> 0); 0 = the default 2
}

// DefaultConfig is every default of the optim section, in one place: SGD with
// momentum 0.9 and L2 decay 5e-4, the ResNet-on-CIFAR recipe. Beta1, Beta2 and
// Eps stay 0 so that ApplyDefaults gives each optimizer its own.
func DefaultConfig() Config {
	return Config{
		Name:            "sgd",
		LR:              0.05,
		Momentum:        0.9,
		WeightDecay:     5e-4,
		LARSEta:         defaultLARSEta,
		LAMBMaxGradNorm: 1.0,  // apex FusedLAMB
		SAMEta:          0.01, // ASAM's class default
	}
}

// DefaultScheduleConfig is every default of the schedule section: cosine decay
// to 0 without warm-up or batch scaling; the step and poly settings are PyTorch's
// MultiStepLR gamma and the LARS paper's poly(2).
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{
		Name:       "cosine",
		Milestones: []float64{}, // empty, not nil: what a loaded `milestones: []` decodes to
		Gamma:      0.1,
		Scaling:    "linear",
		Power:      defaultPolyPower,
	}
}

// Problems checks the optim section on its own and lists every problem, keyed
// "optim.<key>". The ranges below hold for every optimizer (their zero is valid
// where a field is unused); the named optimizer's constructor then adds its own
// rules, such as eps > 0 for those that divide by it. An unknown name is checked
// against every registered optimizer's rules, each with its own defaults in the
// fields left at zero (as the name would get them), so one run reports every
// value that is wrong whatever the name, and nothing that only the name is.
func (c Config) Problems() []problem.Problem {
	var ps problem.List
	ps.OneOf("optim.name", c.Name, Names())
	ps.Positive("optim.lr", c.LR)
	ps.Unit("optim.momentum", c.Momentum)
	ps.Need(!c.Nesterov || c.Momentum > 0, "optim.nesterov", c.Nesterov, "needs optim.momentum > 0")
	ps.NonNegative("optim.weight_decay", c.WeightDecay)
	ps.Unit("optim.beta1", c.Beta1)
	ps.Unit("optim.beta2", c.Beta2)
	ps.NonNegative("optim.lars_eta", c.LARSEta)
	ps.NonNegative("optim.lamb_max_grad_norm", c.LAMBMaxGradNorm)
	ps.NonNegative("optim.clip_norm", c.ClipNorm)
	ps.NonNegative("optim.sam_rho", c.SAMRho)
	ps.NonNegative("optim.sam_eta", c.SAMEta)
	ps.Need(!c.SAMAdaptive || c.SAMRho > 0, "optim.sam_adaptive", c.SAMAdaptive, "needs optim.sam_rho > 0 (adaptive SAM's radius, e.g. 0.5)")

	if _, ok := Registry[c.Name]; ok {
		ownRules(&ps, c.Name, c)
		return ps
	}
	for _, name := range Names() {
		as := c
		as.Name = name
		as.ApplyDefaults()
		ownRules(&ps, name, as)
	}
	return ps
}

// ownRules records the problems the constructor of the named optimizer finds in c.
// A constructor stops at the first, so each offending field is put back to its
// default and the constructor run again, until it passes.
func ownRules(ps *problem.List, name string, c Config) {
	c.Name = name
	d := DefaultConfig()
	d.Name = name
	d.ApplyDefaults()
	fields := reflect.TypeFor[Config]()
	for range fields.NumField() { // each round fixes one field
		_, err := Registry[name](c)
		if err == nil {
			return
		}
		p, ok := errors.AsType[*problem.Problem](err)
		if !ok {
			ps.Need(ps.Has("optim.name"), "optim.name", name, err.Error())
			return
		}
		if !ps.Has(p.Key) {
			ps.Add(*p)
		}
		f, ok := fields.FieldByNameFunc(func(n string) bool {
			sf, _ := fields.FieldByName(n)
			return "optim."+sf.Tag.Get("mapstructure") == p.Key
		})
		if !ok {
			return
		}
		reflect.ValueOf(&c).Elem().FieldByIndex(f.Index).Set(reflect.ValueOf(d).FieldByIndex(f.Index))
	}
}

// Problems checks the schedule section on its own and lists every problem, keyed
// "schedule.<key>": first the ranges of every field, then, where those hold, the
// named schedule's own rules (Validate's, such as milestones after the warm-up).
// That the warm-up fits the run is the run config's rule; NewSchedule checks it too.
func (sc ScheduleConfig) Problems() []problem.Problem {
	var ps problem.List
	ps.OneOf("schedule.name", sc.Name, ScheduleNames())
	increasing := true
	for i, e := range sc.Milestones {
		increasing = increasing && finite(e) && e > 0 && (i == 0 || e > sc.Milestones[i-1])
	}
	ps.Need(increasing, "schedule.milestones", sc.Milestones, "must be positive epochs in increasing order")
	ps.Fraction("schedule.gamma", sc.Gamma)
	ps.NonNegative("schedule.min_lr", sc.MinLR)
	ps.Need(finite(sc.WarmupEpochs) && sc.WarmupEpochs >= 0, "schedule.warmup_epochs", sc.WarmupEpochs,
		"must be a finite number of epochs >= 0 (0 = no warm-up)")
	ps.AtLeast("schedule.base_batch", sc.BaseBatch, 0)
	ps.Positive("schedule.power", sc.Power)
	ps.OneOf("schedule.scaling", sc.Scaling, []string{"linear", "sqrt"})
	if err := sc.Validate(); err != nil {
		if p, ok := errors.AsType[*problem.Problem](err); ok && !ps.Has(p.Key) {
			ps.Add(*p)
		}
	}
	return ps
}
