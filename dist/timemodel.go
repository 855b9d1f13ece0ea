package dist

// The cluster time model predicts what one training step would cost on N real
// machines from quantities measured in a single-process run: the compute time of
// one logical worker's step and the bytes each collective call moved. It uses the
// alpha-beta model (a fixed latency alpha per message plus size/bandwidth), which
// is coarse but is what the literature on all-reduce and gradient compression
// reasons with, so our predicted speed-ups are comparable to published ones.

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Two of the algorithms accepted in Network.Topology (config key
// network.topology; all of them in Algorithms).
const (
	TopologyRing = "ring" // bandwidth-optimal ring collectives between peers
	TopologyPS   = "ps"   // one parameter server; all traffic crosses its link
)

// Network describes the cluster the time model predicts for; it mirrors the
// `network` section of the run configuration.
type Network struct {
	BandwidthGbps float64 // per-link bandwidth in Gbit/s (network.bandwidth_gbps)
	LatencyUs     float64 // per-message latency in microseconds (network.latency_us)
	Topology      string  // a key of Algorithms (network.topology)
}

// Validate reports every invalid field, naming its config key, the value found
// and what is expected. A zero latency is allowed (pure bandwidth model); a zero
// bandwidth is not, since every transfer would take forever.
func (n Network) Validate() error {
	var errs []error
	if b := n.BandwidthGbps; !(b > 0) || math.IsInf(b, 1) {
		errs = append(errs, fmt.Errorf("network.bandwidth_gbps = %v: want a finite number of Gbit/s > 0", b))
	}
	if l := n.LatencyUs; !(l >= 0) || math.IsInf(l, 1) {
		errs = append(errs, fmt.Errorf("network.latency_us = %v: want a finite number of microseconds >= 0", l))
	}
	if _, ok := Algorithms[n.Topology]; !ok {
		errs = append(errs, fmt.Errorf("network.topology = %q: want one of %s", n.Topology, strings.Join(AlgorithmNames(), ", ")))
	}
	return errors.Join(errs...)
}

// At returns a copy of n with the bandwidth set to gbps, so one measured run can
// be re-evaluated at, say, 1, 10 and 100 Gbit/s.
func (n Network) At(gbps float64) Network {
	n.BandwidthGbps = gbps
	return n
}

// alpha is the latency of one message in seconds.
func (n Network) alpha() float64 { return n.LatencyUs * 1e-6 }

// bytesPerSecond is the link bandwidth B in bytes/s (Gbit/s * 1e9 / 8).
func (n Network) bytesPerSecond() float64 { return n.BandwidthGbps * 1e9 / 8 }

// Cost is the time in seconds of one collective call of kind k in which each of
// the N workers contributes the given bytes, on n's algorithm (Algorithms):
// alphas*alpha + link bytes/B. Zero for N <= 1: a lone worker has nothing to
// exchange.
func (n Network) Cost(k Op, bytes int64, workers int) float64 {
	alphas, link := n.terms(k, bytes, workers)
	return alphas*n.alpha() + link/n.bytesPerSecond()
}

// LinkBytes is the number of bytes that cross the busiest link in one
// direction in one collective call of kind k in which each of the N workers
// contributes the given bytes: Cost's bandwidth term. On a ring every
// worker's outgoing link carries
//
//	all-reduce  2(N-1)/N * S   (reduce-scatter, then all-gather, of S/N chunks)
//	all-gather  (N-1) * s      (every other worker's payload passes once)
//
// and through one parameter server (ps, push then pull) its link carries 2N*S
// (N pushes, N pulls of the sum) or N*s + N*N*s (all-gather: nothing to sum).
// Zero for N <= 1.
func (n Network) LinkBytes(k Op, bytes int64, workers int) float64 {
	_, link := n.terms(k, bytes, workers)
	return link
}

// StepLinkBytes is LinkBytes summed over a step's collective calls.
func (n Network) StepLinkBytes(t StepTraffic, workers int) float64 {
	var b float64
	for _, s := range t.AllReduceBytes {
		b += n.LinkBytes(OpAllReduce, s, workers)
	}
	for _, s := range t.AllGatherBytes {
		b += n.LinkBytes(OpAllGather, s, workers)
	}
	return b
}

// StepTraffic lists the collective calls of one training step, in bytes one
// worker contributes to each call (what byte accounting records).
type StepTraffic struct {
	AllReduceBytes []int64 // one entry per all-reduce call
	AllGatherBytes []int64 // one entry per all-gather call
}

// Add records one collective call of kind k carrying bytes per worker.
func (t *StepTraffic) Add(k Op, bytes int64) {
	if k == OpAllGather {
		t.AllGatherBytes = append(t.AllGatherBytes, bytes)
		return
	}
	t.AllReduceBytes = append(t.AllReduceBytes, bytes)
}

// CommSeconds is the communication time in seconds of one step on N workers: the
// sum of the cost of each call. Calls are serialised because each one's latency
// is paid separately; this is why bucketing small tensors pays off.
func (n Network) CommSeconds(t StepTraffic, workers int) float64 {
	var s float64
	for _, b := range t.AllReduceBytes {
		s += n.Cost(OpAllReduce, b, workers)
	}
	for _, b := range t.AllGatherBytes {
		s += n.Cost(OpAllGather, b, workers)
	}
	return s
}

// Prediction is the predicted steady-state cost of one step on a cluster.
type Prediction struct {
	Workers        int     // N machines, one logical worker each
	ComputeSeconds float64 // compute of one worker's step (the same on every machine)
	CommSeconds    float64 // communication of one step
	StepSeconds    float64 // wall time of one step
	SpeedUp        float64 // one machine's time for the same global batch / StepSeconds
	Pipelined      bool    // communication overlapped with the next step's compute
}

// Predict estimates one step on N machines, each running one logical worker in
// parallel, from the measured compute time of one worker's step and the step's
// traffic. The step takes compute + comm, or max(compute, comm) when pipelined
// (the communication of step t overlaps the compute of step t+1; this is the
// steady state and ignores the one unoverlapped first step). SpeedUp compares
// with one machine processing the same global batch alone, i.e. N*compute per
// step and no communication: SpeedUp = N*compute / step. When the step takes no
// time at all SpeedUp is N, the limit with free communication. workers < 1 is
// treated as 1. n is assumed valid (see Validate): a zero bandwidth gives +Inf.
func (n Network) Predict(computePerWorkerStep float64, t StepTraffic, workers int, pipelined bool) Prediction {
	if workers < 1 {
		workers = 1
	}
	comm := n.CommSeconds(t, workers)
	step := computePerWorkerStep + comm
	if pipelined {
		step = math.Max(computePerWorkerStep, comm)
	}
	speedUp := float64(workers)
	if step > 0 {
		speedUp = float64(workers) * computePerWorkerStep / step
	}
	return Prediction{
		Workers:        workers,
		ComputeSeconds: computePerWorkerStep,
		CommSeconds:    comm,
		StepSeconds:    step,
		SpeedUp:        speedUp,
		Pipelined:      pipelined,
	}
}

// ExpectedMaxGaussian approximates the expected maximum of N i.i.d. Gaussian
// delays with standard deviation sigma, measured from their mean:
// sigma*sqrt(2 ln N). A synchronous step waits for the slowest worker, so this is
// the expected extra time per step from stragglers. It is an upper bound that is
// tight as N grows (for N = 2 the exact value is sigma/sqrt(pi) ~ 0.56 sigma
// against 1.18 sigma). Zero for N <= 1.
func ExpectedMaxGaussian(workers int, sigma float64) float64 {
	if workers <= 1 {
		return 0
	}
	return sigma * math.Sqrt(2*math.Log(float64(workers)))
}

// ExpectedMaxExponential is the expected maximum of N i.i.d. exponential delays
// with the given mean: mean * H_N, where H_N = 1 + 1/2 + ... + 1/N ~ ln N + 0.577.
// Exact, not asymptotic. Zero for N <= 0.
func ExpectedMaxExponential(workers int, mean float64) float64 {
	var h float64
	// Smallest terms first so the sum loses as little precision as possible.
	for k := workers; k >= 1; k-- {
		h += 1 / float64(k)
	}
	return mean * h
}
