package compress

import (
	"fmt"
	"time"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/vec"
	"github.com/gradwire/gradwire/optim"
)

// Traffic is a worker's wire accounting: what it sent and what dense float32
// gradients would have cost, over the whole run and after the compressor's
// warm-up, in total and per layer kind.
type Traffic struct {
	Steps       int64            `json:"steps"`
	SteadySteps int64            `json:"steady_steps"`
	DenseStep   int64            `json:"dense_step"` // bytes of the dense all-reduce per step
	Wire        int64            `json:"wire"`
	Dense       int64            `json:"dense"`
	SteadyWire  int64            `json:"steady_wire"`
	SteadyDense int64            `json:"steady_dense"`
	WireByKind  map[string]int64 `json:"wire_by_kind"`
	DenseByKind map[string]int64 `json:"dense_by_kind"`
	// SteadyRoundWire is the compressor's steady wire bytes per round, in
	// round order (the dense tensors' all-reduce is not in it): rounds with
	// different collectives cost differently on a network (ScaleCom's index
	// broadcast against its value all-reduce).
	SteadyRoundWire []int64 `json:"steady_round_wire,omitempty"`
}

// Add accumulates another worker's traffic.
func (t *Traffic) Add(o Traffic) {
	t.Steps += o.Steps
	t.SteadySteps += o.SteadySteps
	t.DenseStep = o.DenseStep
	t.Wire += o.Wire
	t.Dense += o.Dense
	t.SteadyWire += o.SteadyWire
	t.SteadyDense += o.SteadyDense
	if t.WireByKind == nil {
		t.WireByKind, t.DenseByKind = map[string]int64{}, map[string]int64{}
	}
	for k, v := range o.WireByKind {
		t.WireByKind[k] += v
	}
	for k, v := range o.DenseByKind {
		t.DenseByKind[k] += v
	}
	if len(t.SteadyRoundWire) < len(o.SteadyRoundWire) {
		t.SteadyRoundWire = append(t.SteadyRoundWire, make([]int64, len(o.SteadyRoundWire)-len(t.SteadyRoundWire))...)
	}
	for r, v := range o.SteadyRoundWire {
		t.SteadyRoundWire[r] += v
	}
}

// Exchange is one logical worker's gradient exchange: tensors that the layer
// policy sends dense are all-reduced as float32; the others go through the
// compressor's rounds. It replaces the worker's gradient with the mean over all
// workers and counts every byte the worker puts on the wire.
type Exchange struct {
	member    dist.Collective
	denseFP16 bool       // dense tensors travel as float16
	comp      Compressor // nil when every tensor travels dense
	send      *sender    // the generic step around comp
	dense     []Tensor   // Offset = position in dbuf
	packed    []Tensor   // Offset = position in cbuf
	dbuf      []float32
	cbuf      []float32
	out       []float32
	traffic   Traffic
	step      func(step int) StepInfo
	sum64     dist.Float64Mean
	// inPlace: every tensor travels dense, so dbuf's layout is grad's and
	// the dense all-reduce runs on grad itself. dbuf is kept all the same
	// (its size is the dense baseline) but never touched.
	inPlace bool
	// Set by take: round 0 was encoded from the flat gradient (first is its
	// payload) rather than packed into cbuf.
	flat  bool
	first Payload
	// Set by take: the compensated gradient (gradient + residual) is in
	// cbuf, for a sparse sender of one round (sparseSender); the residual
	// is unchanged until the exchange swaps the two buffers.
	precomp bool
	// Prepare took the gradient of step preparedStep.
	prepared     bool
	preparedStep int
	// The compressor's own computation (encoding, decoding; no collective),
	// for the time model: prepCodec is Prepare's share of the coming step,
	// codec the total over the steady steps exchanged with others, counted
	// by codecSteps.
	prepCodec  time.Duration
	codec      time.Duration
	codecSteps int64
	// gatherMax sums, per round, the largest payload any worker sent in an
	// all-gather of a steady step (a ring all-gather's rounds wait for the
	// largest block), over codecSteps steps.
	gatherMax []int64
	// solo: ExchangeMean runs the step on the workers' mean gradient alone,
	// without the collective, booking the bytes as the full exchange would.
	solo bool
	// untimed: this step's compressor time is not one worker's (ExchangeMean
	// split it over the cores), so CodecSeconds leaves it out.
	untimed bool
	before  Traffic // ExchangeMean's snapshot of traffic before the step
}

// Builder makes one worker's compressor for the tensors it compresses.
type Builder func(cfg Config, tensors []Tensor, worker, workers int, seed int64, hyper Hyper) (Compressor, error)

// Hyper is the optimizer settings a compressor may apply itself (DGC applies
// momentum and weight decay locally).
type Hyper struct {
	Momentum    float64
	Nesterov    bool
	WeightDecay float64
}

// Compressed reports whether the layer policy compresses a tensor: tensors with
// more than one dimension and at least minSize elements.
func Compressed(p optim.Param, minSize int) bool {
	dims := 0
	for _, d := range p.Shape {
		if d > 1 {
			dims++
		}
	}
	return dims > 1 && len(p.Value) >= minSize
}

// NewExchange builds worker member.Rank()'s exchange over the model's tensors.
// stepInfo returns the StepInfo of a step (the caller fills Params and
// StepsPerEpoch).
func NewExchange(cfg Config, params []optim.Param, member dist.Collective, seed int64, hyper Hyper, stepInfo func(step int) StepInfo) (*Exchange, error) {
	build, ok := Registry[cfg.Name]
	if !ok {
		return nil, fmt.Errorf("compress.name: unknown compressor %q (valid: %v)", cfg.Name, Names())
	}
	x := &Exchange{member: member, step: stepInfo, denseFP16: cfg.DenseFP16,
		traffic: Traffic{WireByKind: map[string]int64{}, DenseByKind: map[string]int64{}}}
	flat := 0
	for _, p := range params {
		t := Tensor{Name: p.Name, Shape: p.Shape, Kind: p.Kind, FlatOffset: flat, Size: len(p.Value)}
		flat += t.Size
		// Without a builder ("none") every tensor is one dense all-reduce.
		if build != nil && Compressed(p, cfg.MinSize) {
			t.Offset = len(x.cbuf)
			x.packed = append(x.packed, t)
			x.cbuf = append(x.cbuf, make([]float32, t.Size)...)
		} else {
			t.Offset = len(x.dbuf)
			x.dense = append(x.dense, t)
			x.dbuf = append(x.dbuf, make([]float32, t.Size)...)
		}
	}
	x.inPlace = len(x.packed) == 0
	if len(x.packed) > 0 {
		var err error
		if x.comp, err = build(cfg, x.packed, member.Rank(), member.Size(), seed, hyper); err != nil {
			return nil, err
		}
		x.send = newSender(cfg.Name, x.comp, len(x.cbuf))
		x.out = make([]float32, len(x.cbuf))
	}
	return x, nil
}

// Compressor is the worker's compressor (nil when nothing is compressed).
func (x *Exchange) Compressor() Compressor { return x.comp }

// Feedback is the worker's error feedback (nil when nothing is fed back).
func (x *Exchange) Feedback() ErrorFeedback {
	if x.send == nil {
		return nil
	}
	return x.send.Feedback()
}

// State is the worker's exchange state for checkpoints: the compressor's
// buffers and the error-feedback residual (nil when nothing is compressed).
func (x *Exchange) State() map[string][]float32 {
	if x.send == nil {
		return nil
	}
	return x.send.State()
}

// SetState restores State's buffers; on error nothing changes.
func (x *Exchange) SetState(st map[string][]float32) error {
	if x.send == nil {
		if len(st) > 0 {
			return fmt.Errorf("compress: state has %d buffers, but no tensor is compressed", len(st))
		}
		return nil
	}
	return x.send.SetState(st)
}

// CompressedTensors lists the tensors the compressor handles.
func (x *Exchange) CompressedTensors() []Tensor { return x.packed }

// Traffic is the worker's wire accounting so far.
func (x *Exchange) Traffic() Traffic { return x.traffic }

// GatherMax is, for each round, the mean over steady steps of the largest
// payload any worker sent in that round's all-gather (0 for all-reduce
// rounds); nil before any.
func (x *Exchange) GatherMax() []float64 {
	if x.codecSteps == 0 || x.gatherMax == nil {
		return nil
	}
	out := make([]float64, len(x.gatherMax))
	for r, b := range x.gatherMax {
		out[r] = float64(b) / float64(x.codecSteps)
	}
	return out
}

// CodecSeconds is the mean time per steady step this worker spent in its
// compressor's own computation (encoding, decoding; no collective), 0 before
// any: the time model adds it to a step's compute time, which covers forward
// and backward only.
func (x *Exchange) CodecSeconds() float64 {
	if x.codecSteps == 0 {
		return 0
	}
	return x.codec.Seconds() / float64(x.codecSteps)
}

// SetTraffic restores the accounting (resume from a checkpoint).
func (x *Exchange) SetTraffic(t Traffic) { x.traffic = t }

// Exchange replaces grad (the worker's flat gradient) with the mean over all
// workers of their (decompressed) gradients.
func (x *Exchange) Exchange(grad []float32, step int) error { return x.exchange(grad, step, true) }

// Contribute takes part in a step's exchange as Exchange does (the same
// collectives, and the same compressor state and byte counts afterwards) but
// leaves grad with unspecified contents instead of the mean. It is for a
// worker whose mean nobody reads (dist.Engine reads local worker 0's only),
// and skips the work that would only produce that mean.
func (x *Exchange) Contribute(grad []float32, step int) error { return x.exchange(grad, step, false) }

// statelessDecoder marks a compressor whose decoding changes none of its
// state (DecodeAdd writes only dst and scratch): a worker that does not read
// the mean skips decoding.
type statelessDecoder interface{ statelessDecode() }

// stateDecoder is a CombinedDecoder that can make DecodeMean's changes to
// its state without writing the mean, for a worker that does not read it.
type stateDecoder interface {
	decodeState(last Combined, info StepInfo) error
}

// flatEncoder is a compressor that can encode round 0 straight from the
// worker's flat gradient, each tensor at its FlatOffset, instead of from the
// packed copy, with the same result and state; it reads only the compressed
// tensors' values of grad. ok false declines (the exchange then packs the
// gradient and calls Encode). Only compressors without Needs.ErrorFeedback
// (the exchange compensates the packed copy in place for those), whose later
// rounds do not read grad, implement it.
type flatEncoder interface {
	encodeFlat(grad []float32, info StepInfo) (p Payload, ok bool, err error)
}

// flatDecoder is a CombinedDecoder that can write the mean straight into the
// worker's flat gradient, each compressed tensor at its FlatOffset, with
// the same values and state changes as DecodeMean into the packed buffer and
// the copy out of it; it writes nothing else of grad. ok false declines.
// Only compressors without Needs.ErrorFeedback implement it.
type flatDecoder interface {
	decodeFlat(last Combined, grad []float32, info StepInfo) (ok bool, err error)
}

// tensorIn is t's values in grad: the packed gradient, or with flat the
// worker's flat one.
func tensorIn(grad []float32, t Tensor, flat bool) []float32 {
	if flat {
		return grad[t.FlatOffset : t.FlatOffset+t.Size]
	}
	return grad[t.Offset : t.Offset+t.Size]
}

// Prepare takes the worker's gradient of a step before the exchange, while
// its replica still holds grad (dist.Preparer): it copies the dense tensors
// and, for compressors that can, encodes round 0 straight from grad, else
// copies the compressed tensors too. The step's Exchange or Contribute then
// writes the mean without reading its grad argument. Prepare declines when
// nothing is compressed: the dense all-reduce then runs in the worker's own
// buffer.
func (x *Exchange) Prepare(grad []float32, step int) (bool, error) {
	x.prepared = false
	if x.inPlace {
		return false, nil
	}
	t0 := time.Now()
	if err := x.take(grad, x.step(step)); err != nil {
		return false, err
	}
	x.prepCodec = time.Since(t0)
	x.prepared, x.preparedStep = true, step
	return true, nil
}

// take is the exchange's work on the worker's own gradient, before any
// collective: the dense tensors into dbuf (unless the all-reduce runs on grad
// itself), and round 0's encoding from grad where the compressor can (x.flat,
// x.first), else the compressed tensors into cbuf.
func (x *Exchange) take(grad []float32, info StepInfo) error {
	if !x.inPlace && !x.solo {
		for _, t := range x.dense {
			copy(x.dbuf[t.Offset:t.Offset+t.Size], grad[t.FlatOffset:t.FlatOffset+t.Size])
		}
	}
	if x.comp == nil {
		return nil
	}
	x.first, x.flat = Payload{}, false
	if fe, ok := x.comp.(flatEncoder); ok && x.send.mem == nil {
		var err error
		if x.first, x.flat, err = fe.encodeFlat(grad, info); err != nil {
			return fmt.Errorf("compress %s: round 0: %w", x.send.name, err)
		}
	}
	x.precomp = false
	if !x.flat {
		if x.send.sparse != nil && x.send.needs.Rounds == 1 {
			// Compensate while packing: one pass instead of a copy and a
			// pass over the copy and the residual (AddScale by 1: exactly
			// gradient + residual); the residual is read, not written, so
			// taking the same step again is harmless.
			res := x.send.mem.residual
			for _, t := range x.packed {
				vec.AddScale(x.cbuf[t.Offset:t.Offset+t.Size], grad[t.FlatOffset:t.FlatOffset+t.Size], res[t.Offset:t.Offset+t.Size], 1)
			}
			x.precomp = true
			return nil
		}
		for _, t := range x.packed {
			copy(x.cbuf[t.Offset:t.Offset+t.Size], grad[t.FlatOffset:t.FlatOffset+t.Size])
		}
	}
	return nil
}

// exchange is Exchange, or with keep false Contribute.
func (x *Exchange) exchange(grad []float32, step int, keep bool) error {
	info := x.step(step)
	n := x.member.Size()
	steady := x.comp == nil || x.comp.Steady(info)
	if n > 1 {
		x.traffic.Steps++
		x.traffic.DenseStep = int64(4 * len(x.dbuf))
		if x.denseFP16 {
			x.traffic.DenseStep /= 2
		}
		if steady {
			x.traffic.SteadySteps++
		}
	}
	// A single worker puts nothing on the wire.
	count := func(kind optim.Kind, wire, dense int64) {
		if n > 1 {
			x.book(kind, wire, dense, steady)
		}
	}
	var spent time.Duration // the compressor's computation in this step
	defer func() {
		if n > 1 && steady && x.comp != nil && !x.untimed {
			x.codec += spent + x.prepCodec
			x.codecSteps++
		}
		x.prepCodec = 0
	}()
	t0 := time.Now()
	if !x.prepared || x.preparedStep != step {
		x.prepCodec = 0
		if err := x.take(grad, info); err != nil {
			return err
		}
	}
	spent += time.Since(t0)
	x.prepared = false
	if len(x.dense) > 0 {
		if err := x.exchangeDense(grad, n, keep); err != nil {
			return err
		}
		bytesPer := int64(4)
		if x.denseFP16 {
			bytesPer = 2
		}
		for _, t := range x.dense {
			count(t.Kind, bytesPer*int64(t.Size), int64(4*t.Size))
		}
	}
	if x.comp == nil {
		return nil
	}
	var prev Combined
	for r := 0; r < x.send.needs.Rounds; r++ {
		p := x.first
		if r > 0 || !x.flat {
			var err error
			t0 := time.Now()
			if r == 0 && x.precomp {
				// The compensated gradient becomes the residual (the sent
				// values are taken off it there), the old residual cbuf's
				// scratch.
				x.cbuf, x.send.mem.residual = x.send.mem.residual, x.cbuf
				p, err = x.send.compressCompensated(prev, info)
			} else {
				p, err = x.send.Compress(r, x.cbuf, prev, info)
			}
			if err != nil {
				return fmt.Errorf("compress %s: round %d: %w", x.send.name, r, err)
			}
			spent += time.Since(t0)
		}
		switch x.send.needs.Op(r) {
		case dist.OpAllReduce:
			if n > 1 && !x.solo {
				if err := x.member.AllReduce(p.Floats); err != nil {
					return err
				}
			}
			prev = Combined{Floats: p.Floats, Workers: n}
			if x.solo {
				prev.Workers = 1 // the payload is already the workers' mean
			}
		case dist.OpAllGather:
			all := [][]byte{p.Bytes}
			if n > 1 {
				var err error
				if all, err = x.member.AllGather(p.Bytes); err != nil {
					return err
				}
				if steady && x.comp != nil {
					if len(x.gatherMax) != x.send.needs.Rounds {
						x.gatherMax = make([]int64, x.send.needs.Rounds)
					}
					var largest int
					for _, b := range all {
						largest = max(largest, len(b))
					}
					x.gatherMax[r] += int64(largest)
				}
			}
			prev = Combined{Bytes: all, Workers: n}
		}
		x.countPayload(p, r, count)
		if n > 1 && steady {
			if len(x.traffic.SteadyRoundWire) != x.send.needs.Rounds {
				x.traffic.SteadyRoundWire = make([]int64, x.send.needs.Rounds)
			}
			x.traffic.SteadyRoundWire[r] += p.Wire
		}
	}
	if !keep {
		if _, pure := x.comp.(statelessDecoder); pure {
			return nil
		}
		if sd, ok := x.comp.(stateDecoder); ok {
			t0 := time.Now()
			err := sd.decodeState(prev, info)
			spent += time.Since(t0)
			return err
		}
	}
	t0 = time.Now()
	if fd, ok := x.comp.(flatDecoder); ok && keep && x.send.mem == nil {
		done, err := fd.decodeFlat(prev, grad, info)
		spent += time.Since(t0)
		if err != nil {
			return fmt.Errorf("compress %s: %w", x.send.name, err)
		}
		if done {
			return nil
		}
		t0 = time.Now()
	}
	if err := x.send.Decompress(prev, x.out, info); err != nil {
		return err
	}
	spent += time.Since(t0)
	if !keep {
		return nil
	}
	for _, t := range x.packed {
		copy(grad[t.FlatOffset:t.FlatOffset+t.Size], x.out[t.Offset:t.Offset+t.Size])
	}
	return nil
}

// exchangeDense all-reduces the dense tensors (in dbuf, where take put
// them) and, with keep, writes their mean into grad. When every tensor is
// dense the all-reduce runs on grad itself (dbuf's layout is grad's); a
// collective that can average (dist.Averager) scales the sums itself and
// skips writing a result that is not kept. Either way every value is
// sum * (1/n), one float32 multiplication, as without them.
func (x *Exchange) exchangeDense(grad []float32, n int, keep bool) error {
	if x.solo {
		return nil // grad already holds the dense tensors' mean
	}
	buf := x.dbuf
	if x.inPlace {
		buf = grad[:len(x.dbuf)]
	}
	if x.denseFP16 {
		RoundF16(buf)
	}
	inv := 1 / float32(n)
	scaled := false
	if n > 1 {
		avg, ok := x.member.(dist.Averager)
		var err error
		if ok {
			err = avg.AllReduceScaled(buf, inv, keep)
		} else {
			err = x.member.AllReduce(buf)
		}
		if err != nil {
			return err
		}
		scaled = ok
	}
	switch {
	case !keep:
	case x.inPlace && n == 1:
		// The mean of one worker is its gradient (times 1: the same value).
	case x.inPlace && !scaled:
		for i, v := range buf {
			buf[i] = v * inv
		}
	case x.inPlace:
		// The collective left the mean in grad.
	default:
		for _, t := range x.dense {
			dst := grad[t.FlatOffset : t.FlatOffset+t.Size]
			src := x.dbuf[t.Offset : t.Offset+t.Size]
			if scaled {
				copy(dst, src)
				continue
			}
			for i, v := range src {
				dst[i] = v * inv
			}
		}
	}
	return nil
}

// Exchange64 replaces a float64 gradient (model.precision float64) with the
// mean over all workers. Float64 gradients travel dense and uncompressed (8
// bytes a value): only compress.name none with float32 dense tensors.
func (x *Exchange) Exchange64(grad []float64, _ int) error {
	if x.comp != nil || x.denseFP16 {
		return fmt.Errorf("compress: float64 gradients travel dense: expected compress.name none without compress.dense_fp16")
	}
	n := x.member.Size()
	if n == 1 {
		return nil
	}
	if err := x.sum64.Mean(x.member, grad); err != nil {
		return err
	}
	x.traffic.Steps++
	x.traffic.SteadySteps++
	x.traffic.DenseStep = int64(8 * len(x.dbuf))
	for _, t := range x.dense {
		x.book(t.Kind, int64(8*t.Size), int64(4*t.Size), true)
	}
	return nil
}

// book adds wire bytes and their dense float32 baseline to the accounting.
func (x *Exchange) book(kind optim.Kind, wire, dense int64, steady bool) {
	x.traffic.Wire += wire
	x.traffic.Dense += dense
	x.traffic.WireByKind[string(kind)] += wire
	x.traffic.DenseByKind[string(kind)] += dense
	if steady {
		x.traffic.SteadyWire += wire
		x.traffic.SteadyDense += dense
	}
}

// countPayload books a round's wire bytes per layer kind: each tensor's share
// when the compressor reports it (framing goes to the first tensor's kind), the
// dense baseline once per step (round 0).
func (x *Exchange) countPayload(p Payload, round int, count func(optim.Kind, int64, int64)) {
	var shared int64 = p.Wire
	for i, t := range x.packed {
		var wire, dense int64
		if len(p.TensorWire) == len(x.packed) {
			wire = p.TensorWire[i]
			shared -= wire
		}
		if round == 0 {
			dense = int64(4 * t.Size)
		}
		count(t.Kind, wire, dense)
	}
	count(x.packed[0].Kind, shared, 0)
}

// Linear reports whether the exchange is a plain float32 mean of the whole
// gradient (every tensor dense, float32 on the wire, nothing compressed): the
// mean over several workers may then be formed from sums taken before it
// (dist.Engine's fused replicas, which call Book instead of Exchange).
func (x *Exchange) Linear() bool { return x.comp == nil && !x.denseFP16 && x.inPlace }

// Book counts one step of a Linear exchange whose mean was formed without
// calling Exchange, exactly as Exchange would have counted it: every dense
// tensor's float32 bytes on the wire.
func (x *Exchange) Book(step int) error {
	if !x.Linear() {
		return fmt.Errorf("compress: Book on an exchange that is not a plain float32 mean")
	}
	n := x.member.Size()
	if n == 1 {
		return nil
	}
	x.traffic.Steps++
	x.traffic.SteadySteps++
	x.traffic.DenseStep = int64(4 * len(x.dbuf))
	for _, t := range x.dense {
		x.book(t.Kind, 4*int64(t.Size), 4*int64(t.Size), true)
	}
	return nil
}
