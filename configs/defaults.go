package configs

import (
	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/internal/layerpar"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Default returns the configuration a run gets for every key its file and --set
// overrides leave out: the sections of this package written here, and those of
// models, optim and compress from their DefaultConfig functions. Load registers each
// of these values with viper, so a key missing here cannot have a default elsewhere.
func Default() Config {
	return Config{
		Name: "", // Load fills in the config file's base name, or "run"
		Seed: 1,
		Data: DataConfig{
			Name:          "fashion-mnist",
			Dir:           "",
			BatchSize:     64,
			GlobalBatch:   0,
			EvalBatchSize: 0,
			SeqLen:        64,
			Augment:       false,
			Normalize:     true,
			Validation:    0,
			TrainLimit:    0,
		},
		// The sections of models, optim and compress keep their defaults
		// beside their code.
		Model:    models.DefaultConfig(),
		Optim:    optim.DefaultConfig(),
		Schedule: optim.DefaultScheduleConfig(),
		Train: TrainConfig{
			Epochs:     5,
			LogEvery:   50,
			Progress:   true,
			Checkpoint: true,
			MaxSteps:   0,
			EvalLimit:  0,
			// Epoch ends only by default; a long epoch sets checkpoint_every or _minutes.
			CheckpointEvery:   0,
			CheckpointMinutes: 0,
			KeepCheckpoints:   3,
			MaxLoss:           0,
			StallEpochs:       0,
			Mode:              TrainModeSerial,
		},
		Dist: DistConfig{
			Workers:    1,
			Replicas:   0,
			Backend:    "local",
			Ranks:      0,
			CheckEvery: 100,
			Pipeline:   1,
			Mode:       "allreduce",
			Staleness:  0,
			Delay:      "none",
			DelayMean:  0.1,
			Passes:     "auto",
		},
		Compress: compress.DefaultConfig(),
		Network: NetworkConfig{
			BandwidthGbps: 10,
			LatencyUs:     50,
			Topology:      "ring",
		},
		LayerParallel: layerpar.DefaultConfig(),
	}
}
