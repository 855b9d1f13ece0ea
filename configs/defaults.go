package configs

import (
	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Default returns the configuration a run gets for every key its file and --set
// overrides leave out. It is the only place defaults are written down: Load registers
// each of these values with viper, so a key missing here cannot have a default elsewhere.
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
		},
		Model: models.Config{
			Name:       "lenet5",
			Hidden:     []int{512, 256},
			HiddenSize: 128,
			Layers:     2,
			EmbedDim:   64,
			BNMomentum: 0.1,
			BNEpsilon:  1e-5,
			Ops:        "fast",
			Precision:  "float32",
		},
		Optim: optim.Config{
			Name:        "sgd",
			LR:          0.05,
			Momentum:    0.9,
			Nesterov:    false,
			WeightDecay: 5e-4,
			// 0 = the optimizer's own default, filled in by Load (adam/adamw 0.9,
			// 0.999, 1e-8; lamb 0.9, 0.999, 1e-6; novograd 0.95, 0.98, 1e-8).
			Beta1:    0,
			Beta2:    0,
			Eps:      0,
			ClipNorm: 0,
			// Parameter groups: biases and BatchNorm get no decay and no layer-wise adaptation.
			DecayNormBias: false,
			AdaptNormBias: false,
			// LARS, LAMB, NovoGrad options (the optimizers' own defaults).
			LARSEta:               0.001,
			LARSClip:              false,
			LAMBMaxGradNorm:       1.0,
			LAMBNoBiasCorrection:  false,
			NovoGradGradAveraging: false,
			NovoGradEpsInsideSqrt: false,
		},
		Schedule: optim.ScheduleConfig{
			Name:         "cosine",
			Milestones:   []float64{}, // empty, not nil: what a loaded `milestones: []` decodes to
			Gamma:        0.1,
			MinLR:        0,
			WarmupEpochs: 0,
			BaseBatch:    0,
			Scaling:      "linear",
			Power:        2,
		},
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
		},
		Dist: DistConfig{
			Workers:    1,
			Replicas:   0,
			Backend:    "local",
			Ranks:      0,
			CheckEvery: 100,
		},
		Compress: compress.DefaultConfig(),
		Network: NetworkConfig{
			BandwidthGbps: 10,
			LatencyUs:     50,
			Topology:      "ring",
		},
	}
}
