package layerpar

import (
	"fmt"
	"math"

	"github.com/gradwire/gradwire/internal/problem"
)

// Methods: the objective the parallel rounds minimise.
const (
	MethodPenalty = "penalty"              // J_rho, rho grown by rho_growth per round
	MethodAL      = "augmented_lagrangian" // J_rho plus the multiplier term, multipliers updated per round
)

// MethodNames lists the valid Config.Method values.
func MethodNames() []string { return []string{MethodPenalty, MethodAL} }

// MaxDownsample bounds the auxiliary variables' filter (pooling by this factor
// per side): ResNet-20's smallest feature map on 28x28 inputs is 7x7.
const MaxDownsample = 8

// Config is the `layer_parallel` section of a run config (used when
// train.mode is layer_parallel). The number of stages K is dist.workers.
type Config struct {
	// Method is penalty or augmented_lagrangian.
	Method string `mapstructure:"method" yaml:"method"`
	// Rho is the penalty weight of the first round.
	Rho float64 `mapstructure:"rho" yaml:"rho"`
	// RhoGrowth multiplies rho after every parallel round (1 = constant).
	RhoGrowth float64 `mapstructure:"rho_growth" yaml:"rho_growth"`
	// RhoMax caps rho.
	RhoMax float64 `mapstructure:"rho_max" yaml:"rho_max"`
	// UCurvature is c in the u-step size 1/(rho + c): a bound on the
	// curvature the next stage's loss adds to rho (c = (1+b)^2 makes the
	// step exact on the scalar example of the package doc).
	UCurvature float64 `mapstructure:"u_curvature" yaml:"u_curvature"`
	// Downsample is the filter's factor s: the auxiliary variables are
	// stored and sent as s x s average pools of the feature maps and
	// upsampled (nearest) before use; 1 = no filter.
	Downsample int `mapstructure:"downsample" yaml:"downsample"`
	// AuxFP16 stores and sends the auxiliary variables and the boundary
	// gradients in half precision (2 bytes a value); the multipliers stay
	// float32 on their owner.
	AuxFP16 bool `mapstructure:"aux_fp16" yaml:"aux_fp16"`
	// SerialEpochs is how many of train.epochs are ordinary full forward-
	// backward epochs (the serial-parallel hybrid's correction); 0 = none.
	SerialEpochs int `mapstructure:"serial_epochs" yaml:"serial_epochs"`
	// Cycles splits the run into this many (parallel rounds, serial
	// epochs) cycles of equal parts: 1 = all parallel rounds first, then
	// the serial epochs.
	Cycles int `mapstructure:"cycles" yaml:"cycles"`
}

// DefaultConfig is the section's defaults: the augmented Lagrangian with a
// constant rho (the source summary's default), the 2x2 filter and half
// precision (assumptions). The summary's rho = 1 diverges on ResNet-20 at
// lr 0.1 in the sum form; rho 0.003 and u_curvature 0.03 are this project's
// (README, "Layer-parallel training").
func DefaultConfig() Config {
	return Config{Method: MethodAL, Rho: 0.003, RhoGrowth: 1, RhoMax: 1e4, UCurvature: 0.03,
		Downsample: 2, AuxFP16: true, SerialEpochs: 0, Cycles: 1}
}

// Problems checks every key of the section on its own, keyed
// "layer_parallel.<key>". Rules involving other sections are the run
// config's (CrossProblems).
func (c Config) Problems() []problem.Problem {
	var ps problem.List
	ps.OneOf("layer_parallel.method", c.Method, MethodNames())
	ps.Need(c.Rho > 0 && !math.IsInf(c.Rho, 0), "layer_parallel.rho", c.Rho, "must be a finite number > 0 (the penalty weight)")
	ps.Need(c.RhoGrowth >= 1 && !math.IsInf(c.RhoGrowth, 0), "layer_parallel.rho_growth", c.RhoGrowth, "must be a finite number >= 1 (rho's factor per round; 1 = constant)")
	ps.Need(c.RhoMax >= c.Rho && !math.IsInf(c.RhoMax, 0), "layer_parallel.rho_max", c.RhoMax,
		fmt.Sprintf("must be a finite number >= layer_parallel.rho (%v)", c.Rho))
	ps.Need(c.UCurvature >= 0 && !math.IsInf(c.UCurvature, 0), "layer_parallel.u_curvature", c.UCurvature, "must be a finite number >= 0 (the u-step is 1/(rho + u_curvature))")
	ps.Within("layer_parallel.downsample", c.Downsample, 1, MaxDownsample)
	ps.AtLeast("layer_parallel.serial_epochs", c.SerialEpochs, 0)
	ps.AtLeast("layer_parallel.cycles", c.Cycles, 1)
	return ps
}

// CrossProblems checks the section against the run: K stages
// (dist.workers) of a network with the given number of basic blocks, and
// train.epochs epochs in all.
func (c Config) CrossProblems(stages, blocks, epochs int) []problem.Problem {
	var ps problem.List
	ps.Need(stages >= 1 && stages <= blocks, "dist.workers", stages,
		fmt.Sprintf("with train.mode layer_parallel is the number of stages K: must be in [1, %d] (the network's basic blocks)", blocks))
	ps.Need(c.SerialEpochs < epochs, "layer_parallel.serial_epochs", c.SerialEpochs,
		fmt.Sprintf("must be below train.epochs (%d): at least one parallel round", epochs))
	ps.Need(c.Cycles <= epochs-c.SerialEpochs, "layer_parallel.cycles", c.Cycles,
		fmt.Sprintf("must be at most the parallel rounds, train.epochs - serial_epochs = %d", epochs-c.SerialEpochs))
	ps.Need(c.Cycles == 1 || c.SerialEpochs%c.Cycles == 0 && (epochs-c.SerialEpochs)%c.Cycles == 0, "layer_parallel.cycles", c.Cycles,
		fmt.Sprintf("must divide both the parallel rounds (%d) and layer_parallel.serial_epochs (%d)", epochs-c.SerialEpochs, c.SerialEpochs))
	return ps
}
