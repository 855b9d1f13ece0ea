package dist

import (
	"math"
	"slices"
)

// Collective algorithms of the time model (network.topology), in the
// alpha-beta model of Thakur, Rabenseifner and Gropp (Optimization of
// Collective Communication Operations in MPICH, IJHPCA 2005): a call costs
// alphas*alpha + bytes*beta, where bytes is what the busiest link carries in
// one direction. N workers each hold S bytes (all-reduce) or contribute s
// bytes (all-gather); lg = ceil(log2 N).

// Algorithm is one way to run a step's collectives on the cluster.
type Algorithm struct {
	// Summary says what the algorithm does, for --help and README.
	Summary string
	// allReduce and allGather give the number of message latencies and the
	// bytes charged at the link bandwidth, for N >= 2.
	allReduce func(S, N float64) (alphas, bytes float64)
	allGather func(s, N float64) (alphas, bytes float64)
}

// lengthBytes is one worker's payload length in an all-gather's first round.
const lengthBytes = 4

// lg is ceil(log2 N), the rounds of a recursive or tree algorithm.
func lg(N float64) float64 { return math.Ceil(math.Log2(N)) }

// ringAllGather is (N-1) rounds, each forwarding one worker's payload.
func ringAllGather(s, N float64) (float64, float64) { return N - 1, (N - 1) * s }

// doublingAllGather is lg rounds of exchanges that double the data held.
func doublingAllGather(s, N float64) (float64, float64) { return lg(N), (N - 1) * s }

// Algorithms maps each network.topology value to its cost model.
var Algorithms = map[string]Algorithm{
	TopologyRing: {
		Summary: "ring reduce-scatter then ring all-gather: 2(N-1)*alpha + 2(N-1)/N*S*beta (bandwidth-optimal, latency linear in N)",
		allReduce: func(S, N float64) (float64, float64) {
			return 2 * (N - 1), 2 * (N - 1) / N * S
		},
		allGather: ringAllGather,
	},
	"rd": {
		Summary: "recursive doubling: lg*alpha + lg*S*beta (few messages, whole buffers: for short messages)",
		allReduce: func(S, N float64) (float64, float64) {
			return lg(N), lg(N) * S
		},
		allGather: doublingAllGather,
	},
	"rhd": {
		Summary: "Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather: 2*lg*alpha + 2(N-1)/N*S*beta",
		allReduce: func(S, N float64) (float64, float64) {
			return 2 * lg(N), 2 * (N - 1) / N * S
		},
		allGather: doublingAllGather,
	},
	"tree": {
		Summary: "binomial-tree reduce then binomial broadcast: 2*lg*(alpha + S*beta)",
		allReduce: func(S, N float64) (float64, float64) {
			return 2 * lg(N), 2 * lg(N) * S
		},
		// Binomial gather to the root (its link receives everyone else's
		// payload), then a binomial broadcast of all N payloads.
		allGather: func(s, N float64) (float64, float64) {
			return 2 * lg(N), (N-1)*s + lg(N)*N*s
		},
	},
	"dbtree": {
		Summary: "double binary tree (two pipelined trees on complementary halves, as NCCL): 2*lg*alpha + 2*S*beta (an approximation)",
		allReduce: func(S, N float64) (float64, float64) {
			return 2 * lg(N), 2 * S
		},
		allGather: doublingAllGather,
	},
	TopologyPS: {
		Summary: "one parameter server, push then pull over its link: 2*(alpha + N*S*beta)",
		allReduce: func(S, N float64) (float64, float64) {
			return 2, 2 * N * S
		},
		// Nothing to sum: the server sends the concatenation (N*s bytes) to
		// each of the N workers.
		allGather: func(s, N float64) (float64, float64) {
			return 2, N*s + N*N*s
		},
	},
	"ps-duplex": {
		Summary: "one parameter server on a full-duplex link, pulling chunk i while chunk i+1 is pushed: alpha + N*S*beta",
		allReduce: func(S, N float64) (float64, float64) {
			return 1, N * S
		},
		allGather: func(s, N float64) (float64, float64) {
			return 1, math.Max(N*s, N*N*s)
		},
	},
	"ps-sharded": {
		Summary: "N server shards, one on each worker's machine, each owning S/N: 2*(alpha + S*beta)",
		allReduce: func(S, N float64) (float64, float64) {
			return 2, 2 * S
		},
		allGather: func(s, N float64) (float64, float64) {
			return 2, (N-1)*s/N + (N-1)*s
		},
	},
}

// AlgorithmNames lists Algorithms' keys, sorted.
func AlgorithmNames() []string {
	names := make([]string, 0, len(Algorithms))
	for n := range Algorithms {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// terms returns the latency count and bandwidth bytes of one call of kind k
// on n's algorithm; zero for N <= 1.
func (n Network) terms(k Op, bytes int64, workers int) (alphas, linkBytes float64) {
	if workers <= 1 {
		return 0, 0
	}
	a, ok := Algorithms[n.Topology]
	if !ok {
		a = Algorithms[TopologyRing] // Validate reports the name
	}
	if k == OpAllGather {
		// Payloads differ in size between workers, so the all-gather first
		// gathers their 4-byte lengths (as the MPI backend does), then the
		// payloads.
		la, lb := a.allGather(lengthBytes, float64(workers))
		pa, pb := a.allGather(float64(bytes), float64(workers))
		return la + pa, lb + pb
	}
	return a.allReduce(float64(bytes), float64(workers))
}
