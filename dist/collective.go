// Package dist runs data-parallel training: the Collective interface and its
// backends (in-process goroutines; OpenMPI behind the mpi build tag), the engine
// that maps logical workers onto replicas, byte accounting and the cluster time
// model. It never imports Gorgonia.
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

// Kind is the collective a gradient exchange needs.
type Kind int

const (
	KindAllReduce Kind = iota // summable payloads (dense, PowerSGD, random-k with a shared seed)
	KindAllGather             // per-worker payloads (top-k, DGC, AdaComp)
)

func (k Kind) String() string {
	switch k {
	case KindAllReduce:
		return "allreduce"
	case KindAllGather:
		return "allgather"
	}
	return "unknown"
}
