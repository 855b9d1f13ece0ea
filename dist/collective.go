// Package dist runs data-parallel training. It never imports Gorgonia.
//
//   - Collective connects the logical workers of a run (all-reduce,
//     all-gather, broadcast, barrier): NewLocal runs them as goroutines,
//     NewMPI over OpenMPI (mpi build tag), NewHierarchical groups them by
//     process; DetectLaunch reads how a process was started.
//   - Engine maps the logical workers a process hosts onto model replicas in
//     a fixed order, computes every worker's gradient, hands it to the
//     worker's Exchanger (compress.Exchange: compression and byte
//     accounting live there) and writes the mean into replica 0. Whether
//     gradients are float32 or float64 is decided once, in NewEngine.
//   - Float64Mean averages float64 values identically on every backend.
//   - Network, StepTraffic and Prediction are the cluster time model: what
//     a step would cost on a given topology, latency and bandwidth.
package dist

// Collective connects the Size logical workers of a run. Every member calls each
// operation in the same order; a call returns once every member has made it.
// Buffers passed in belong to the caller; results returned are valid until the
// member's next call.
type Collective interface {
	// Rank is this member's index in [0, Size).
	Rank() int
	// Size is the number of members (logical workers).
	Size() int
	// AllReduce replaces buf, on every member, with the element-wise sum of all
	// members' buf. All members pass the same length.
	AllReduce(buf []float32) error
	// AllGather returns every member's payload, indexed by rank; payloads may
	// differ in length and may be empty. The returned slices must not be
	// modified. A backend may lend the payload to the other members instead of
	// copying it (NewLocal does): leave it unmodified until this member's next
	// call has returned (alternate two buffers to reuse one).
	AllGather(payload []byte) ([][]byte, error)
	// Broadcast copies root's buf into every member's buf (same length everywhere).
	Broadcast(buf []float32, root int) error
	// Barrier returns when every member has called it.
	Barrier() error
	// Close releases the member; further calls fail.
	Close() error
}

// Op is the collective operation a gradient exchange needs.
type Op int

const (
	OpAllReduce Op = iota // summable payloads (dense, PowerSGD, random-k with a shared seed)
	OpAllGather           // per-worker payloads (top-k, DGC, AdaComp)
)

func (k Op) String() string {
	switch k {
	case OpAllReduce:
		return "allreduce"
	case OpAllGather:
		return "allgather"
	}
	return "unknown"
}
