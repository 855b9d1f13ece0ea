package layerpar

import (
	"math"

	"github.com/gradwire/gradwire/dist"
)

// TimeModel predicts the wall time of layer-parallel training on K devices
// (one stage each) against serial training on one, from per-stage compute
// times and the bytes the method moves:
//
//	serial epoch      T_s = N sum_k t_k
//	parallel round    T_p = N max_k t_k + max_k (2 N b_k / B + 2 alpha) + sum_{k>0} P_k / B + (K-1) alpha
//	initial pass      T_0 = N sum_k t_k + sum_k (N b_k / B + alpha)        (one per parallel phase)
//	speed-up          (R + S) T_s / (R T_p + S T_s + C T_0)
//
// t_k is stage k's time per example for a forward-backward-update step alone
// on one device, b_k the bytes of one example's auxiliary variable at boundary
// k (after the filter and at the stored precision: D g goes back and v
// forward, each once per round, on the link between stages k and k+1, the
// links working at once), P_k stage k's parameters and buffers in bytes
// (gathered on stage 0 each round for evaluation), B the link bandwidth, alpha
// its latency; R parallel rounds, S serial epochs (run at serial speed: the
// correction is a serial forward-backward pass), C cycles. The initial pass
// costs what this implementation spends on it, a forward-backward step per
// stage in sequence (a forward-only pass would take about a third).
type TimeModel struct {
	StageSeconds    []float64 // t_k: seconds per example
	BoundaryBytes   []int64   // b_k: bytes per example, K-1 boundaries
	StageParamBytes []int64   // P_k
	Examples        int       // N
}

// SerialEpoch is T_s.
func (m TimeModel) SerialEpoch() float64 {
	var s float64
	for _, t := range m.StageSeconds {
		s += t
	}
	return float64(m.Examples) * s
}

// Compute is the round's compute part, N max_k t_k.
func (m TimeModel) Compute() float64 {
	var mx float64
	for _, t := range m.StageSeconds {
		mx = math.Max(mx, t)
	}
	return float64(m.Examples) * mx
}

// Comm is the round's communication time on net.
func (m TimeModel) Comm(net dist.Network) float64 {
	bw := net.BandwidthGbps * 1e9 / 8
	alpha := net.LatencyUs * 1e-6
	var link float64
	for _, b := range m.BoundaryBytes {
		link = math.Max(link, 2*float64(m.Examples)*float64(b)/bw+2*alpha)
	}
	var params float64
	for k, p := range m.StageParamBytes {
		if k > 0 {
			params += float64(p)/bw + alpha
		}
	}
	return link + params
}

// Round is T_p on net.
func (m TimeModel) Round(net dist.Network) float64 { return m.Compute() + m.Comm(net) }

// Init is T_0 on net.
func (m TimeModel) Init(net dist.Network) float64 {
	bw := net.BandwidthGbps * 1e9 / 8
	t := m.SerialEpoch()
	for _, b := range m.BoundaryBytes {
		t += float64(m.Examples)*float64(b)/bw + net.LatencyUs*1e-6
	}
	return t
}

// Speedup is the predicted speed-up over R+S serial epochs of R parallel
// rounds and S serial epochs in C cycles.
func (m TimeModel) Speedup(net dist.Network, rounds, serial, cycles int) float64 {
	ts := m.SerialEpoch()
	den := float64(rounds)*m.Round(net) + float64(serial)*ts + float64(cycles)*m.Init(net)
	return float64(rounds+serial) * ts / den
}

// RoundSpeedup is the speed-up of one parallel round over one serial epoch,
// T_s / T_p, the method's steady-state rate.
func (m TimeModel) RoundSpeedup(net dist.Network) float64 { return m.SerialEpoch() / m.Round(net) }

// AuxBytesPerRound is the boundary traffic of one round, 2 N sum_k b_k.
func (m TimeModel) AuxBytesPerRound() int64 {
	var s int64
	for _, b := range m.BoundaryBytes {
		s += 2 * int64(m.Examples) * b
	}
	return s
}

// ParamBytesPerRound is sum_{k>0} P_k.
func (m TimeModel) ParamBytesPerRound() int64 {
	var s int64
	for k, p := range m.StageParamBytes {
		if k > 0 {
			s += p
		}
	}
	return s
}
