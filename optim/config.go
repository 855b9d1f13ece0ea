package optim

// Config selects and parameterises an optimizer (the `optim` section of a run config).
type Config struct {
	Name        string  `mapstructure:"name" yaml:"name"`                 // registry name: sgd, adam, adamw
	LR          float64 `mapstructure:"lr" yaml:"lr"`                     // base learning rate (> 0)
	Momentum    float64 `mapstructure:"momentum" yaml:"momentum"`         // SGD momentum in [0, 1)
	Nesterov    bool    `mapstructure:"nesterov" yaml:"nesterov"`         // SGD Nesterov momentum
	WeightDecay float64 `mapstructure:"weight_decay" yaml:"weight_decay"` // L2 (SGD, Adam) or decoupled (AdamW) decay, >= 0
	Beta1       float64 `mapstructure:"beta1" yaml:"beta1"`               // Adam first-moment decay in [0, 1)
	Beta2       float64 `mapstructure:"beta2" yaml:"beta2"`               // Adam second-moment decay in [0, 1)
	Eps         float64 `mapstructure:"eps" yaml:"eps"`                   // Adam denominator guard (> 0)
	ClipNorm    float64 `mapstructure:"clip_norm" yaml:"clip_norm"`       // clip the global gradient norm to this; 0 = off
}

// ScheduleConfig is the learning-rate schedule (the `schedule` section of a run config).
type ScheduleConfig struct {
	Name         string    `mapstructure:"name" yaml:"name"`                   // constant, step, cosine
	Milestones   []float64 `mapstructure:"milestones" yaml:"milestones"`       // step: epochs at which lr *= gamma
	Gamma        float64   `mapstructure:"gamma" yaml:"gamma"`                 // step: decay factor in (0, 1]
	MinLR        float64   `mapstructure:"min_lr" yaml:"min_lr"`               // cosine: final learning rate
	WarmupEpochs float64   `mapstructure:"warmup_epochs" yaml:"warmup_epochs"` // linear warm-up, per step; 0 = none
	BaseBatch    int       `mapstructure:"base_batch" yaml:"base_batch"`       // linear scaling lr*global/base; 0 = off
}
