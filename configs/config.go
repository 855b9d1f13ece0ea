// Package configs holds the typed run configuration, its defaults, loading through
// viper (unknown keys rejected) and validation. The *.yaml files beside it are the
// shipped run configs.
package configs

import (
	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/internal/layerpar"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Config is one training run, as read from a YAML file plus --set overrides.
type Config struct {
	Name     string               `mapstructure:"name" yaml:"name"` // run name; default: the config file's base name
	Seed     int64                `mapstructure:"seed" yaml:"seed"`
	Data     DataConfig           `mapstructure:"data" yaml:"data"`
	Model    models.Config        `mapstructure:"model" yaml:"model"`
	Optim    optim.Config         `mapstructure:"optim" yaml:"optim"`
	Schedule optim.ScheduleConfig `mapstructure:"schedule" yaml:"schedule"`
	Train    TrainConfig          `mapstructure:"train" yaml:"train"`
	Dist     DistConfig           `mapstructure:"dist" yaml:"dist"`
	Compress compress.Config      `mapstructure:"compress" yaml:"compress"`
	Network  NetworkConfig        `mapstructure:"network" yaml:"network"`
	// LayerParallel is the layer-parallel method's section (train.mode
	// layer_parallel; internal/layerpar).
	LayerParallel layerpar.Config `mapstructure:"layer_parallel" yaml:"layer_parallel"`
}

// DataConfig is the `data` section.
type DataConfig struct {
	Name          string `mapstructure:"name" yaml:"name"`                       // fashion-mnist, mnist, cifar10, cifar100, tinyshakespeare
	Dir           string `mapstructure:"dir" yaml:"dir"`                         // data root; default $GRADWIRE_DATA, then /usr/share/datasets
	BatchSize     int    `mapstructure:"batch_size" yaml:"batch_size"`           // per worker
	GlobalBatch   int    `mapstructure:"global_batch" yaml:"global_batch"`       // if set: split over dist.workers, replacing batch_size
	EvalBatchSize int    `mapstructure:"eval_batch_size" yaml:"eval_batch_size"` // evaluation batch; 0 = 256 for images, batch_size for text
	SeqLen        int    `mapstructure:"seq_len" yaml:"seq_len"`                 // text: characters per window (default 64)
	Augment       bool   `mapstructure:"augment" yaml:"augment"`                 // CIFAR: padded random crop + horizontal flip
	Normalize     bool   `mapstructure:"normalize" yaml:"normalize"`             // per-data-set mean/std normalisation (default true)
	// Validation holds this many training examples out as a validation split,
	// evaluated every epoch (0 = off). The held-out examples are the same for
	// every run of a data set (see data.HoldOutOf; text holds out the last
	// windows of its training part).
	Validation int `mapstructure:"validation" yaml:"validation"`
	// LabelNoise replaces this fraction of the training labels (not the
	// validation or test ones) by another class, chosen from the seed
	// (data.NewNoisyLabels); 0 = off.
	LabelNoise float64 `mapstructure:"label_noise" yaml:"label_noise"`
	// TrainLimit trains on the first this many examples of the training
	// split (after data.validation's hold-out); 0 = all of them.
	TrainLimit int `mapstructure:"train_limit" yaml:"train_limit"`
}

// TrainConfig is the `train` section.
type TrainConfig struct {
	Epochs     int  `mapstructure:"epochs" yaml:"epochs"`         // passes over the training set (>= 1)
	LogEvery   int  `mapstructure:"log_every" yaml:"log_every"`   // steps between metrics.jsonl step records (default 50)
	Progress   bool `mapstructure:"progress" yaml:"progress"`     // progress bar on stderr (default true)
	Checkpoint bool `mapstructure:"checkpoint" yaml:"checkpoint"` // write a checkpoint after every epoch (default true)
	MaxSteps   int  `mapstructure:"max_steps" yaml:"max_steps"`   // stop each epoch after this many steps; 0 = full epochs (smoke tests)
	EvalLimit  int  `mapstructure:"eval_limit" yaml:"eval_limit"` // evaluate on at most this many test examples; 0 = all
	// Mid-epoch checkpoints: every this many optimizer steps (0 = only at epoch ends)
	// and/or after this many minutes of wall-clock time since the last one (0 = off).
	CheckpointEvery   int     `mapstructure:"checkpoint_every" yaml:"checkpoint_every"`
	CheckpointMinutes float64 `mapstructure:"checkpoint_minutes" yaml:"checkpoint_minutes"`
	// KeepCheckpoints is how many of the newest checkpoints are kept (>= 1); the one
	// with the lowest test loss is kept besides them.
	KeepCheckpoints int `mapstructure:"keep_checkpoints" yaml:"keep_checkpoints"`
	// MaxLoss: a step's training loss above it (or a training or test loss not
	// finite) stops the run as diverged; 0 = 100 x ln(classes), a hundred times
	// the loss of a uniform guess.
	MaxLoss float64 `mapstructure:"max_loss" yaml:"max_loss"`
	// StallEpochs: a mean training loss no better than a uniform guess (at
	// least 0.99 x ln(classes)) in more than half of the last this many
	// epochs, all after the learning-rate warm-up, stops the run as
	// stalled; 0 = off.
	StallEpochs int `mapstructure:"stall_epochs" yaml:"stall_epochs"`
	// Mode is serial (every step a forward-backward pass of the whole
	// network, data-parallel over dist.workers) or layer_parallel (the
	// network cut into dist.workers stages trained in parallel on their
	// own sub-problems; the layer_parallel section).
	Mode string `mapstructure:"mode" yaml:"mode"`
}

// DistConfig is the `dist` section (data-parallel workers).
type DistConfig struct {
	Workers    int    `mapstructure:"workers" yaml:"workers"`         // logical workers N (>= 1)
	Replicas   int    `mapstructure:"replicas" yaml:"replicas"`       // Gorgonia replicas; 0 = number of cores
	Backend    string `mapstructure:"backend" yaml:"backend"`         // local (in-process) or mpi
	Ranks      int    `mapstructure:"ranks" yaml:"ranks"`             // expected MPI world size; 0 = any that divides workers
	CheckEvery int    `mapstructure:"check_every" yaml:"check_every"` // steps between replica agreement checks
	// Pipeline is the pipeline width: 1 exchanges each step's gradients before
	// the next step computes; 2 exchanges them while the next step computes
	// and applies them one step late (dist.Engine.StepPipelined).
	Pipeline int `mapstructure:"pipeline" yaml:"pipeline"`
	// Mode is how gradients meet: allreduce (every worker averages every
	// step) or ps (a parameter server that applies each worker's gradient as
	// it arrives, within the staleness bound; dist.PSClock).
	Mode string `mapstructure:"mode" yaml:"mode"`
	// Staleness bounds how many steps a ps worker may run ahead of the
	// slowest: 0 synchronous (the all-reduce's arithmetic), k > 0 stale
	// synchronous parallel, -1 asynchronous.
	Staleness int `mapstructure:"staleness" yaml:"staleness"`
	// Delay is the workers' step-time model that decides a ps run's arrival
	// order: none (equal steps) or exp (1 + an exponential delay of mean
	// DelayMean, drawn per worker from the run's seed).
	Delay     string  `mapstructure:"delay" yaml:"delay"`
	DelayMean float64 `mapstructure:"delay_mean" yaml:"delay_mean"`
	// Backups is b of the synchronous step with backup workers (Chen et al.
	// 2016): each step takes the first N-b gradients to arrive, in the
	// order dist.delay's step times give, and leaves out the rest.
	Backups int `mapstructure:"backups" yaml:"backups"`
	// Passes is how a replica computes its workers' gradients: auto (one
	// pass over all its workers' examples where dist.Engine.Fuse allows:
	// fused where the exchange needs only the mean, grouped where it needs
	// each worker's own gradient) or one_by_one (a pass per worker, always).
	// They agree to float32 rounding; which is faster depends on the CPU.
	Passes string `mapstructure:"passes" yaml:"passes"`
}

// NetworkConfig is the `network` section: the cluster the time model predicts for.
type NetworkConfig struct {
	BandwidthGbps float64 `mapstructure:"bandwidth_gbps" yaml:"bandwidth_gbps"`
	LatencyUs     float64 `mapstructure:"latency_us" yaml:"latency_us"`
	Topology      string  `mapstructure:"topology" yaml:"topology"` // ring, ps
}

// WorkerBatch is the number of examples each logical worker computes per step:
// data.global_batch / dist.workers when the global batch is set, else data.batch_size.
func (c Config) WorkerBatch() int {
	if c.Data.GlobalBatch > 0 && c.Dist.Workers > 0 {
		return c.Data.GlobalBatch / c.Dist.Workers
	}
	return c.Data.BatchSize
}
