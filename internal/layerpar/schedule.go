package layerpar

import "math"

// Phase is a run of consecutive epochs of one kind: parallel rounds (each
// stage one epoch on its sub-problem, then the u-step and, for the augmented
// Lagrangian, the multiplier step) or serial epochs (ordinary forward-backward
// training of the whole network).
type Phase struct {
	Parallel bool
	First    int // first epoch (0-based) of the phase
	Epochs   int
}

// Schedule splits train.epochs into phases: cycles of (parallel rounds,
// serial epochs) with the parallel rounds and the serial epochs divided
// evenly over the cycles. With one cycle it is the serial-parallel hybrid of
// the package doc: all parallel rounds first, then the serial correction.
func (c Config) Schedule(epochs int) []Phase {
	cycles := max(c.Cycles, 1)
	par := (epochs - c.SerialEpochs) / cycles
	ser := c.SerialEpochs / cycles
	var out []Phase
	e := 0
	for i := range cycles {
		p := par
		if i == cycles-1 {
			p = epochs - c.SerialEpochs - par*(cycles-1)
		}
		out = append(out, Phase{Parallel: true, First: e, Epochs: p})
		e += p
		s := ser
		if i == cycles-1 {
			s = c.SerialEpochs - ser*(cycles-1)
		}
		if s > 0 {
			out = append(out, Phase{Parallel: false, First: e, Epochs: s})
			e += s
		}
	}
	return out
}

// RhoAt is the penalty weight of parallel round r (0-based, counted over the
// whole run): rho * rho_growth^r, capped at rho_max.
func (c Config) RhoAt(r int) float64 {
	return math.Min(c.Rho*math.Pow(c.RhoGrowth, float64(r)), c.RhoMax)
}
