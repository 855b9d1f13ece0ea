// Package compress exchanges gradients between data-parallel workers, with
// compression. Only LGC's autoencoder (lgc_net.go) uses Gorgonia; the rest is
// plain Go on flat float32 buffers.
//
// Exchange is one worker's exchange (a dist.Exchanger). Tensors that the
// layer policy keeps dense (Compressed) are all-reduced as float32 (or
// float16 with compress.dense_fp16); the others are packed and go through the
// configured Compressor in a generic step:
//
//	compensate  add the residual (error feedback, when the compressor asks)
//	encode      the compressor's payload, per collective round
//	residual    compensated - DecodeAdd(this worker's own payload)
//	collective  all-reduce (summable payloads) or all-gather
//	decode      DecodeAdd of every worker's payload in rank order, divided by N
//
// A compressor declares what it needs once (Needs: collective, rounds, error
// feedback, momentum ownership). Registry names them: none (every tensor
// dense), fp16, topk, randomk, dgc, adacomp, onebit, efsignsgd, qsgd, terngrad,
// powersgd, scalecom, gradiveq, lgc.
// The exchange counts every byte it puts on the wire (Traffic), per layer
// kind and after warm-up.
package compress

import (
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// Tensor is one parameter tensor as a compressor sees it: its place in the
// packed buffer of compressed tensors (Offset) and in the model's flat
// parameter and gradient buffers (FlatOffset).
type Tensor struct {
	Name       string
	Shape      []int
	Kind       optim.Kind
	Offset     int // in the packed buffer handed to the compressor
	FlatOffset int // in the model's flat buffers (StepInfo.Params)
	Size       int
}

// StepInfo is what a compressor may need to know about the step.
type StepInfo struct {
	Step          int       // global optimizer step, from 0
	StepsPerEpoch int       // for epoch-based warm-up schedules
	Worker        int       // this worker's rank
	Workers       int       // N
	Params        []float32 // the model's current flat parameters (read only)
}

// Epoch is the step's epoch, from 0.
func (s StepInfo) Epoch() int {
	if s.StepsPerEpoch <= 0 {
		return 0
	}
	return s.Step / s.StepsPerEpoch
}

// Payload is what one worker puts on the wire in one round.
type Payload struct {
	// Floats is summed element-wise over the workers (all-reduce rounds).
	Floats []float32
	// Bytes is delivered from every worker to every worker (all-gather rounds).
	Bytes []byte
	// Wire is the number of bytes this payload costs on the wire: the encoded
	// size, counted by the exchange (4 per float32 for Floats unless the
	// encoding is smaller, len(Bytes) for all-gather).
	Wire int64
	// TensorWire, when set, splits Wire over the compressed tensors in layout
	// order (headers and framing may make the sum smaller than Wire); it feeds
	// the per-layer-kind compression ratios.
	TensorWire []int64
}

// Combined is a round's result on every worker.
type Combined struct {
	Floats  []float32 // sum of every worker's Floats (all-reduce rounds)
	Bytes   [][]byte  // every worker's Bytes in rank order (all-gather rounds); read only
	Workers int
}

// Needs is what a compressor asks of the exchange, fixed when it is built.
type Needs struct {
	// Collective is the collective every round needs: all-reduce rounds sum
	// the workers' Floats element-wise, so only payloads whose sum decodes to
	// the sum of the decoded payloads may use it.
	Collective dist.Op
	// RoundOps, when set (one per round), overrides Collective round by round,
	// for compressors whose rounds differ (ScaleCom: the leader's indices are
	// all-gathered, the values at them all-reduced).
	RoundOps []dist.Op
	// Rounds is the number of collective rounds per step (PowerSGD: 2).
	Rounds int
	// ErrorFeedback asks the exchange to keep the residual: it adds it to the
	// gradient before Encode and sets it to the compensated gradient minus
	// DecodeAdd of this worker's own payload. Compressors whose residual is not
	// that (DGC's masked velocity, PowerSGD's residual against the aggregated
	// P, AdaComp's residue, whose selection reads the raw gradient too) keep
	// it themselves and leave this false.
	ErrorFeedback bool
	// OwnsMomentum: the compressor applies momentum and weight decay itself
	// (DGC's momentum correction), so the optimizer must take plain steps on
	// the compressed tensors.
	OwnsMomentum bool
	// DecayAtOptimizer, with OwnsMomentum: the compressor applies momentum but
	// not weight decay, which the optimizer applies to the compressed tensors
	// densely, with a momentum buffer of its own (DGC's reference optimizer;
	// optim.SGD.DecaySteps).
	DecayAtOptimizer bool
	// Reciprocal: the mean multiplies the sum by float32(1/N) instead of
	// dividing it by N. The two differ in the last bit for some N; each
	// compressor keeps the arithmetic its results were produced with.
	Reciprocal bool
}

// Op is round r's collective.
func (n Needs) Op(r int) dist.Op {
	if r < len(n.RoundOps) {
		return n.RoundOps[r]
	}
	return n.Collective
}

// Compressor is one logical worker's side of a compression algorithm for the
// tensors it compresses (tensors that the layer policy sends dense never reach
// it). The exchange calls Encode for rounds 0..Rounds-1, combining each
// round's payloads through the Collective; then it adds up what the last
// round's payloads decode to (DecodeAdd, in rank order) and divides by N.
type Compressor interface {
	Needs() Needs
	// Encode returns round r's payload for this worker's packed gradient grad
	// (compensated when Needs.ErrorFeedback; the compressor may use it as
	// scratch: the exchange does not read it afterwards); for r > 0, prev is
	// round r-1's combined result.
	Encode(r int, grad []float32, prev Combined, info StepInfo) (Payload, error)
	// DecodeAdd adds what one payload decodes to into dst (packed like
	// grad): one worker's Bytes after an all-gather, or the workers' summed
	// Floats after an all-reduce (which decode to the sum of their values).
	// It rejects a malformed payload.
	DecodeAdd(p Payload, dst []float32, info StepInfo) error
	// Steady reports whether the step is past the compressor's warm-up (for the
	// steady-state compression ratio).
	Steady(info StepInfo) bool
	// State returns the worker's compressor state (momenta, ...) as named
	// buffers for checkpoints; SetState restores it.
	State() map[string][]float32
	SetState(map[string][]float32) error
}

// StateSizer is a compressor whose checkpointed state can exceed twice the
// size of the tensors it compresses (GradiVeQ's per-tensor PCA basis and
// accumulators, LGC's autoencoder). StateValues is the most float32 values
// State may return on one worker; a checkpoint holding more is refused as
// damaged. Compressors without it are held to twice the parameter count.
type StateSizer interface {
	StateValues() int
}

// CombinedDecoder is a compressor whose last round cannot be decoded payload
// by payload (PowerSGD: the summed Q is scaled, then multiplies the
// aggregated P, and the residual is taken against that). The exchange hands
// it the combined result, and it writes the mean itself.
type CombinedDecoder interface {
	DecodeMean(last Combined, dst []float32, info StepInfo) error
}
