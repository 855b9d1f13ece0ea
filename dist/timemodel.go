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
)

// Topologies accepted in Network.Topology (config key network.topology).
const (
	TopologyRing = "ring" // bandwidth-optimal ring collectives between peers
	TopologyPS   = "ps"   // one parameter server; all traffic crosses its link
)

// Network describes the cluster the time model predicts for; it mirrors the
// `network` section of the run configuration.
type Network struct {
	BandwidthGbps float64 // per-link bandwidth in Gbit/s (network.bandwidth_gbps)
	LatencyUs     float64 // per-message latency in microseconds (network.latency_us)
	Topology      string  // TopologyRing or TopologyPS (network.topology)
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
	if n.Topology != TopologyRing && n.Topology != TopologyPS {
		errs = append(errs, fmt.Errorf("network.topology = %q: want %q or %q", n.Topology, TopologyRing, TopologyPS))
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

// RingAllReduce is the time in seconds of a ring all-reduce of S bytes (the
// buffer every worker holds) on N workers:
//
//	2(N-1)*alpha + 2(N-1)/N * S/B
//
// reduce-scatter then all-gather, each N-1 rounds moving S/N bytes per link.
// It is zero for N <= 1: a lone worker has nothing to exchange.
func (n Network) RingAllReduce(bytes int64, workers int) float64 {
	if workers <= 1 {
		return 0
	}
	N := float64(workers)
	return 2*(N-1)*n.alpha() + 2*(N-1)/N*float64(bytes)/n.bytesPerSecond()
}

// AllGather is the time in seconds of a ring all-gather where each of N workers
// contributes s bytes:
//
//	(N-1)*alpha + (N-1)*s/B
//
// N-1 rounds, each forwarding one worker's payload. Unlike all-reduce the result
// grows with N (every worker ends with N*s bytes), which is why sparse methods
// gathered this way lose their advantage on large clusters. Zero for N <= 1.
func (n Network) AllGather(bytes int64, workers int) float64 {
	if workers <= 1 {
		return 0
	}
	N := float64(workers)
	return (N-1)*n.alpha() + (N-1)*float64(bytes)/n.bytesPerSecond()
}

// ParameterServer is the time in seconds of summing S bytes from N workers
// through one parameter server:
//
//	2*alpha + 2*N*S/B
//
// the server link receives N gradients of S bytes and sends the S-byte sum back
// to each of N workers; one latency for the push and one for the pull, since the
// messages to different workers overlap. Zero for N <= 1.
func (n Network) ParameterServer(bytes int64, workers int) float64 {
	if workers <= 1 {
		return 0
	}
	N := float64(workers)
	return 2*n.alpha() + 2*N*float64(bytes)/n.bytesPerSecond()
}

// ParameterServerGather is the time in seconds of an all-gather of s bytes per
// worker through one parameter server:
//
//	2*alpha + (N*s + N*N*s)/B
//
// the server receives N payloads of s bytes and, having nothing to sum, sends the
// concatenation (N*s bytes) to each of the N workers. Zero for N <= 1.
func (n Network) ParameterServerGather(bytes int64, workers int) float64 {
	if workers <= 1 {
		return 0
	}
	N, s := float64(workers), float64(bytes)
	return 2*n.alpha() + (N*s+N*N*s)/n.bytesPerSecond()
}

// Cost is the time in seconds of one collective call of kind k in which each of
// the N workers contributes the given bytes, on n's topology: ring collectives
// for TopologyRing, the server formulas for TopologyPS.
func (n Network) Cost(k Op, bytes int64, workers int) float64 {
	ps := n.Topology == TopologyPS
	switch {
	case k == OpAllGather && ps:
		return n.ParameterServerGather(bytes, workers)
	case k == OpAllGather:
		return n.AllGather(bytes, workers)
	case ps:
		return n.ParameterServer(bytes, workers)
	default:
		return n.RingAllReduce(bytes, workers)
	}
}

// LinkBytes is the number of bytes that cross the busiest link in one
// collective call of kind k in which each of the N workers contributes the
// given bytes: on a ring, every worker's outgoing link carries
//
//	all-reduce  2(N-1)/N * S   (reduce-scatter, then all-gather, of S/N chunks)
//	all-gather  (N-1) * s      (every other worker's payload passes once)
//
// and with a parameter server its link carries 2N*S (all-reduce: N pushes, N
// pulls of the sum) or N*s + N*N*s (all-gather: nothing to sum). These are the
// bandwidth terms of Cost; zero for N <= 1.
func (n Network) LinkBytes(k Op, bytes int64, workers int) float64 {
	if workers <= 1 {
		return 0
	}
	N, s := float64(workers), float64(bytes)
	switch ps := n.Topology == TopologyPS; {
	case k == OpAllGather && ps:
		return N*s + N*N*s
	case k == OpAllGather:
		return (N - 1) * s
	case ps:
		return 2 * N * s
	default:
		return 2 * (N - 1) / N * s
	}
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
