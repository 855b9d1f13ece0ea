package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gradwire/gradwire/dist"
)

// AllReduceTiming is the measured time of the all-reduces of one size.
type AllReduceTiming struct {
	Bytes  int64   // buffer size, float32 values x 4
	Best   float64 // fastest call, seconds (the slowest rank's time of that call)
	Median float64 // median call, seconds
	Reps   int
}

// MeasureAllReduce times reps all-reduces of each size on c; every member of
// the group must call it at the same time with the same arguments. Per size:
// one untimed call, then for each timed call a barrier, the call, and the
// slowest member's time (gathered, so that every member returns the same
// figures). Sizes are bytes, rounded down to whole float32 values.
func MeasureAllReduce(c dist.Collective, sizes []int64, reps int) ([]AllReduceTiming, error) {
	if reps < 1 {
		return nil, fmt.Errorf("bench: %d repetitions, expected >= 1", reps)
	}
	out := make([]AllReduceTiming, 0, len(sizes))
	for _, size := range sizes {
		if size < 4 {
			return nil, fmt.Errorf("bench: all-reduce of %d bytes, expected at least one float32 (4 bytes)", size)
		}
		buf := make([]float32, size/4)
		for i := range buf {
			buf[i] = 1
		}
		if err := c.AllReduce(buf); err != nil {
			return nil, err
		}
		times := make([]float64, reps)
		for r := range times {
			if err := c.Barrier(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if err := c.AllReduce(buf); err != nil {
				return nil, err
			}
			own := time.Since(t0).Seconds()
			all, err := c.AllGather(binary.LittleEndian.AppendUint64(nil, math.Float64bits(own)))
			if err != nil {
				return nil, err
			}
			for _, p := range all {
				if len(p) != 8 {
					return nil, fmt.Errorf("bench: a member sent a %d-byte time, expected 8", len(p))
				}
				times[r] = math.Max(times[r], math.Float64frombits(binary.LittleEndian.Uint64(p)))
			}
		}
		slices.Sort(times)
		out = append(out, AllReduceTiming{Bytes: 4 * int64(len(buf)), Best: times[0], Median: median(times), Reps: reps})
	}
	return out, nil
}

// LinearFit is T(S) = Intercept + Slope*S, fitted to measured times.
type LinearFit struct {
	Intercept, Slope float64 // seconds, seconds per byte; both >= 0
	RMSRelError      float64 // root mean square of (fit - T)/T over the points
	MaxRelError      float64 // largest |fit - T|/T
	Points           int
}

// FitRelative fits T(S) = a + b*S to the points (S, T) by least squares on
// the relative error, sum ((a + b*S - T)/T)^2, with a, b >= 0. Ordinary least
// squares over sizes from kilobytes to a hundred megabytes is decided by the
// largest sizes and returns a meaningless (often negative) intercept;
// weighting each point by 1/T keeps the small sizes, where the latency shows,
// in the fit. At least two points with distinct sizes and positive times.
func FitRelative(S, T []float64) (LinearFit, error) {
	if len(S) != len(T) || len(S) < 2 {
		return LinearFit{}, fmt.Errorf("bench: fit needs at least two points of (size, time), got %d sizes and %d times", len(S), len(T))
	}
	// Rows (1/T, S/T) against the target 1: the normal equations of the
	// weighted problem.
	var s11, s12, s22, r1, r2 float64
	for i := range S {
		if !(T[i] > 0) || S[i] < 0 {
			return LinearFit{}, fmt.Errorf("bench: point %d has size %v and time %v, expected size >= 0 and time > 0", i, S[i], T[i])
		}
		u, v := 1/T[i], S[i]/T[i]
		s11 += u * u
		s12 += u * v
		s22 += v * v
		r1 += u
		r2 += v
	}
	relErr := func(a, b float64) (rms, worst float64) {
		for i := range S {
			e := (a + b*S[i] - T[i]) / T[i]
			rms += e * e
			worst = math.Max(worst, math.Abs(e))
		}
		return math.Sqrt(rms / float64(len(S))), worst
	}
	// The unconstrained optimum, and the best with either parameter at 0:
	// with two parameters the non-negative optimum is one of these.
	var cands [][2]float64
	if det := s11*s22 - s12*s12; det > 0 {
		a, b := (r1*s22-r2*s12)/det, (s11*r2-s12*r1)/det
		if a >= 0 && b >= 0 {
			cands = append(cands, [2]float64{a, b})
		}
	}
	if s22 > 0 {
		cands = append(cands, [2]float64{0, r2 / s22})
	}
	cands = append(cands, [2]float64{r1 / s11, 0})
	best := LinearFit{RMSRelError: math.Inf(1), Points: len(S)}
	for _, c := range cands {
		if rms, worst := relErr(c[0], c[1]); rms < best.RMSRelError {
			best.Intercept, best.Slope, best.RMSRelError, best.MaxRelError = c[0], c[1], rms, worst
		}
	}
	if math.IsInf(best.RMSRelError, 1) {
		return LinearFit{}, errors.New("bench: no fit")
	}
	return best, nil
}

// AlphaBeta turns a fit of one all-reduce algorithm's times on N members into
// the time model's per-message latency alpha (seconds) and per-byte time beta
// (seconds per byte): the fit's intercept is alphas*alpha and its slope
// (link bytes per buffer byte)*beta, both read off dist.Algorithms.
func AlphaBeta(f LinearFit, algorithm string, members int) (alpha, beta float64, err error) {
	if members < 2 {
		return 0, 0, fmt.Errorf("bench: alpha and beta need at least 2 members, got %d", members)
	}
	const probe = 1 << 20                                                     // any size: the terms are linear in it
	n := dist.Network{BandwidthGbps: 8e-9, LatencyUs: 1, Topology: algorithm} // 1 byte/s and 1 us
	if err := n.Validate(); err != nil {
		return 0, 0, err
	}
	alphas := n.Cost(dist.OpAllReduce, 0, members) / 1e-6
	perByte := n.LinkBytes(dist.OpAllReduce, probe, members) / probe
	return f.Intercept / alphas, f.Slope / perByte, nil
}
