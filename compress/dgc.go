package compress

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gradwire/gradwire/dist"
)

// dgc is Deep Gradient Compression (Lin et al., ICLR 2018; reference code
// synxlin/deep-gradient-compression) for one worker: local gradient clipping,
// momentum correction (or plain gradient accumulation), top-k selection of the
// accumulated velocity by a sampled threshold, momentum factor masking and an
// exponential warm-up of the density. The selected (index, value) pairs of
// every tensor are all-gathered; every worker scatter-adds them in rank order
// and divides by N.
//
// Choices where the paper, the reference and ALGORITHMS.md leave room:
//   - Clipping uses the L2 norm over all compressed tensors of the worker (the
//     paper clips "the sum of their L2-norms", the usual global-norm clipping,
//     and ALGORITHMS.md says global norm); the reference clips inside its memory,
//     tensor by tensor. Dense tensors never reach the compressor and are not
//     part of the norm. The clip coefficient is thr/(norm+1e-6) as in PyTorch's
//     clip_grad_norm_, applied when below 1.
//   - Weight decay is DGC's business only with momentum correction: then DGC
//     owns the optimizer's momentum on the compressed tensors
//     (Needs.OwnsMomentum). In the gradient-accumulation baseline the
//     optimizer still applies both, and adding decay here would decay twice.
//     Where it is applied is compress.dgc.weight_decay_at:
//     "velocity" (the default) adds it to the gradient DGC accumulates,
//     u = m*u + (g + wd*w), v += u (momentumAccumulate), as the paper's
//     momentum SGD with L2 decay folded into the gradient reads; the decay of
//     a coordinate then travels only when that coordinate is selected, and
//     the optimizer takes plain steps. "optimizer" is the reference code's
//     placement (synxlin/deep-gradient-compression: dgc/memory.py accumulates
//     the gradient without decay; dgc/optim/sgd.py, DGCSGD.step, applies it
//     densely at every step with a momentum buffer on the decay term only,
//     buf = m*buf + wd*w, d = buf (Nesterov: wd*w + m*buf),
//     w -= lr*(d + exchanged)): DGC accumulates the gradient alone and
//     declares Needs.DecayAtOptimizer, so that SGD applies the decay to the
//     compressed tensors (optim.SGD.DecaySteps).
//   - With the sampled threshold, every element that passes is sent when the
//     count lies in [0.8k, 1.3k]; the reference truncates to the first k by
//     index, which favours low indices over larger magnitudes.
//   - A tensor smaller than three times the sample (ratio·n, at least
//     ceil(2/density) elements) is not sampled: its stride would be 1, so the
//     "sample" would be its first elements; it takes the exact top-k. Larger tensors are sampled at the
//     (odd) stride up to their end, not for a fixed count from the offset,
//     which left the tail unsampled.
//   - Sent entries are removed from v by subtracting what was sent: exactly
//     v[idx] = 0 with float32 values; with float16 values the rounding error
//     stays in v as error feedback instead of being lost.
type dgc struct {
	cfg      DGCConfig
	density  float64 // steady-state density (compress.density)
	fp16     bool
	narrow   bool // compress.narrow_indices
	hyper    Hyper
	tensors  []Tensor
	worker   int
	workers  int
	seed     int64
	u        []float32 // momentum per packed element (momentum correction only)
	v        []float32 // accumulated velocity (or gradient) per packed element
	enc      [2]Encoder
	flip     int // which encoder the next payload uses
	sel      dgcSelect
	vals     []float32 // values of one tensor's payload
	wire     []int64   // Payload.TensorWire
	pcg      rand.PCG
	rng      *rand.Rand
	decIdx   []int32
	decVals  []float32
	touched  []int32   // flat positions decodeFlat added to
	seen     []uint64  // decodeFlat's bit per flat position, zero between calls
	lastIdx  []int32   // packed positions sent in the last step
	lastPre  []float32 // v at lastIdx before the sent values were removed
	lastSent []float32 // the values sent at lastIdx (as decoded)
	comp     []float32 // Compensated(), built on demand
	sentBuf  []float32 // Sent(), built on demand
}

var (
	_ Compressor       = (*dgc)(nil)
	_ ErrorFeedback    = (*dgc)(nil)
	_ statelessDecoder = (*dgc)(nil)
	_ flatEncoder      = (*dgc)(nil)
	_ flatDecoder      = (*dgc)(nil)
)

// statelessDecode: DecodeAdd writes only dst and its scratch (decIdx, decVals).
func (c *dgc) statelessDecode() {}

// newDGC builds worker's DGC compressor; it validates the settings it uses.
func newDGC(cfg Config, tensors []Tensor, worker, workers int, seed int64, hyper Hyper) (Compressor, error) {
	errs := []error{checkDensity(cfg.Density), checkIndexable(tensors)}
	bad := func(ok bool, key string, v any, want string) {
		if !ok {
			errs = append(errs, Problem{Key: "compress." + key, Value: v, Want: want})
		}
	}
	d := cfg.DGC
	bad(d.SampleRatio > 0 && d.SampleRatio <= 1, "dgc.sample_ratio", d.SampleRatio, "must be a fraction in (0, 1]")
	bad(d.WarmupSchedule == "paper" || d.WarmupSchedule == "reference" || d.WarmupSchedule == "stages", "dgc.warmup_schedule", d.WarmupSchedule, "must be one of paper, reference, stages")
	bad(d.WarmupEpochs >= 0, "dgc.warmup_epochs", d.WarmupEpochs, "must be at least 0")
	bad(d.ClipNorm >= 0, "dgc.clip_norm", d.ClipNorm, "must be >= 0 (0 = off)")
	for _, p := range d.decayProblems() {
		errs = append(errs, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if d.WeightDecayAt == DecayAtOptimizer {
		hyper.WeightDecay = 0 // the optimizer applies it (Needs.DecayAtOptimizer)
	}
	n := packedSize(tensors)
	c := &dgc{cfg: d, density: cfg.Density, fp16: cfg.FP16Values, narrow: cfg.NarrowIndices, hyper: hyper,
		tensors: tensors, worker: worker, workers: workers, seed: seed,
		v: make([]float32, n), wire: make([]int64, len(tensors))}
	if d.MomentumCorrection {
		c.u = make([]float32, n)
	}
	c.rng = rand.New(&c.pcg)
	return c, nil
}

// Needs: DGC keeps its own accumulator (masked, with momentum), and with
// momentum correction the optimizer must take plain SGD steps, without
// momentum and weight decay, on the compressed tensors; or, with weight decay
// at the optimizer, steps that add the decay with its own momentum.
func (c *dgc) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 1, OwnsMomentum: c.cfg.MomentumCorrection,
		DecayAtOptimizer: c.cfg.MomentumCorrection && c.cfg.WeightDecayAt == DecayAtOptimizer}
}

// Steady reports whether the density warm-up is over.
func (c *dgc) Steady(info StepInfo) bool { return info.Epoch() >= c.cfg.WarmupEpochs }

// densityAt is the density of a step. During the warm-up it decays
// exponentially: the paper's 25%, 6.25%, 1.5625%, 0.4%, ... (0.25^(e+1) in
// epoch e), the reference's coeff^(e+1) with coeff =
// density^(1/(warmup_epochs+1)), or "stages": the paper's sequence down to the
// density, its stages spread evenly over the warm-up steps (for warm-ups
// shorter than the paper's four epochs, where the per-epoch schedule would
// jump from 25% to the final density at once). Never below the steady density.
func (c *dgc) densityAt(info StepInfo) float64 {
	epoch := info.Epoch()
	if epoch >= c.cfg.WarmupEpochs {
		return c.density
	}
	switch c.cfg.WarmupSchedule {
	case "reference":
		base := math.Pow(c.density, 1/float64(c.cfg.WarmupEpochs+1))
		return max(math.Pow(base, float64(epoch+1)), c.density)
	case "stages":
		stages := 0 // the paper's densities above the final one: 0.25^k > density
		for d := 0.25; d > c.density; d *= 0.25 {
			stages++
		}
		if stages == 0 {
			return c.density
		}
		warm := c.cfg.WarmupEpochs * info.StepsPerEpoch
		stage := info.Step * stages / warm
		return max(math.Pow(0.25, float64(stage+1)), c.density)
	}
	return max(math.Pow(0.25, float64(epoch+1)), c.density)
}

// sampleOffset is the random start of a tensor's strided sample: reproducible
// from (seed, worker, step, tensor), so a resumed run samples the same elements.
func (c *dgc) sampleOffset(step, tensor, stride int) int {
	c.pcg.Seed(dgcMix(uint64(c.seed), uint64(c.worker)), dgcMix(uint64(step), uint64(tensor)))
	return c.rng.IntN(stride)
}

// dgcMix hashes two words into one (the splitmix64 finalizer).
func dgcMix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// clipScale is the local clipping factor of the worker's gradient: the
// threshold clip_norm*N^-1/2 over the L2 norm of all compressed tensors,
// or 1 when clipping is off or the norm is below the threshold. The squares
// are summed tensor by tensor in layout order: element by element in the
// packed order.
func (c *dgc) clipScale(grad []float32, flat bool) float32 {
	if c.cfg.ClipNorm == 0 {
		return 1
	}
	var ss float64
	for _, t := range c.tensors {
		for _, g := range tensorIn(grad, t, flat) {
			ss += float64(g) * float64(g)
		}
	}
	thr := c.cfg.ClipNorm / math.Sqrt(float64(c.workers))
	if coef := thr / (math.Sqrt(ss) + 1e-6); coef < 1 {
		return float32(coef)
	}
	return 1
}

// accumulate adds one tensor's clipped gradient g (plus weight decay wd*w)
// to its accumulators: with momentum correction u = m*u + g, v += u (Nesterov:
// u = (u+g)*m, v += u + g); without it v += g.
func (c *dgc) accumulate(g, w, u, v []float32, scale float32) {
	momentumAccumulate(g, w, u, v, scale, c.hyper)
}

// momentumAccumulate is DGC's momentum correction, shared with LGC: u = m*u +
// (g*scale + wd*w), v += u (Nesterov: u = (u+g')*m, v += u + g'); with u nil,
// plain accumulation v += g*scale. w is read only when h.WeightDecay != 0.
func momentumAccumulate(g, w, u, v []float32, scale float32, h Hyper) {
	m, wd := float32(h.Momentum), float32(h.WeightDecay)
	mode := dgcAccPlain
	switch {
	case u == nil:
	case wd == 0 && h.Nesterov:
		mode = dgcAccNesterov
	case wd == 0:
		mode = dgcAccMomentum
	case h.Nesterov:
		mode = dgcAccNesterovWD
	default:
		mode = dgcAccMomentumWD
	}
	// The vector loop takes the whole vectors, the Go loops the rest.
	if n := dgcAccumulateVec(g, w, u, v, scale, m, wd, mode); n > 0 {
		g, v = g[n:], v[n:]
		if u != nil {
			u = u[n:]
		}
		if mode == dgcAccMomentumWD || mode == dgcAccNesterovWD {
			w = w[n:]
		}
	}
	// Equal lengths, resliced in each case: no bounds checks in the loops.
	g = g[:len(v)]
	switch mode {
	case dgcAccPlain:
		for i := range v {
			v[i] += g[i] * scale
		}
	case dgcAccNesterov:
		u = u[:len(v)]
		for i := range v {
			gi := g[i] * scale
			u[i] = (u[i] + gi) * m
			v[i] += u[i] + gi
		}
	case dgcAccMomentum:
		u = u[:len(v)]
		for i := range v {
			u[i] = m*u[i] + g[i]*scale
			v[i] += u[i]
		}
	case dgcAccNesterovWD:
		u, w = u[:len(v)], w[:len(v)]
		for i := range v {
			gi := g[i]*scale + wd*w[i]
			u[i] = (u[i] + gi) * m
			v[i] += u[i] + gi
		}
	default:
		u, w = u[:len(v)], w[:len(v)]
		for i := range v {
			u[i] = m*u[i] + (g[i]*scale + wd*w[i])
			v[i] += u[i]
		}
	}
}

// Modes of momentumAccumulate's loops (and of the vector loop,
// dgcAccumulateVec).
const (
	dgcAccPlain      = iota // v += g*scale
	dgcAccMomentum          // u = m*u + g*scale, v += u
	dgcAccNesterov          // u = (u + g*scale)*m, v += u + g*scale
	dgcAccMomentumWD        // u = m*u + (g*scale + wd*w), v += u
	dgcAccNesterovWD        // u = (u + g')*m, v += u + g', g' = g*scale + wd*w
)

// Compress accumulates the step's gradient, selects each tensor's top-k of
// |v| and encodes, per tensor in layout order, the count (uint32), the
// indices (int32, or uint16 with compress.narrow_indices where they fit) and
// the values (float32, or float16 with compress.fp16_values).
func (c *dgc) Encode(r int, grad []float32, _ Combined, info StepInfo) (Payload, error) {
	if r != 0 {
		return Payload{}, fmt.Errorf("dgc: round %d of 1", r)
	}
	return c.encode(grad, false, info)
}

// encodeFlat is Encode of round 0 on the worker's flat gradient; it reads
// grad and writes nothing there.
func (c *dgc) encodeFlat(grad []float32, info StepInfo) (Payload, bool, error) {
	p, err := c.encode(grad, true, info)
	return p, true, err
}

// encode is Encode's round 0 on the packed gradient, or with flat on the
// worker's flat one.
func (c *dgc) encode(grad []float32, flat bool, info StepInfo) (Payload, error) {
	if c.hyper.WeightDecay != 0 && c.u != nil && len(info.Params) < c.flatEnd() {
		return Payload{}, fmt.Errorf("dgc: weight decay needs the parameters: have %d values, the tensors reach %d", len(info.Params), c.flatEnd())
	}
	scale := c.clipScale(grad, flat)
	density := c.densityAt(info)
	enc := &c.enc[c.flip]
	c.flip ^= 1 // the collective may lend this payload until our next call
	enc.Reset()
	c.lastIdx, c.lastPre, c.lastSent = c.lastIdx[:0], c.lastPre[:0], c.lastSent[:0]
	for ti, t := range c.tensors {
		lo, hi := t.Offset, t.Offset+t.Size
		var u, w []float32
		if c.u != nil {
			u = c.u[lo:hi]
			if c.hyper.WeightDecay != 0 {
				w = info.Params[t.FlatOffset : t.FlatOffset+t.Size]
			}
		}
		v, g := c.v[lo:hi], tensorIn(grad, t, flat)
		k := sparseK(t.Size, density)
		var idx []int32
		// The whole tensor is accumulated before the threshold is sampled
		// from v: gathering the samples of g, u, v and w first (to check
		// each block against the threshold while it is in cache) touches
		// nearly every cache line of the four once more, and measured as
		// slow or slower at every size tried (BenchmarkDGCWorkers).
		c.accumulate(g, w, u, v, scale)
		if p := dgcPlan(t.Size, density, c.cfg.SampleRatio); c.cfg.Sampling && !p.whole {
			thr := c.sel.sampledKth(v, p, c.sampleOffset(info.Step, ti, p.stride))
			idx = c.sel.settle(v, k, thr, c.sel.atLeast(v, thr))
		} else {
			idx = c.sel.exact(v, k)
		}

		vals := c.vals[:0]
		for _, j := range idx {
			vals = append(vals, v[j])
		}
		c.vals = vals
		start := enc.Len()
		enc.Uint32(uint32(len(idx)))
		enc.Indices(idx, t.Size, c.narrow)
		if c.fp16 {
			enc.Float16s(vals)
			RoundF16(vals) // what the receivers decode
		} else {
			enc.Float32s(vals)
		}
		c.wire[ti] = int64(enc.Len() - start)

		// Remove what was sent from v; momentum factor masking also stops
		// the momentum of those entries (u = 0), so they do not keep pushing
		// in a stale direction.
		for i, j := range idx {
			c.lastIdx = append(c.lastIdx, int32(lo)+j)
			c.lastPre = append(c.lastPre, v[j])
			c.lastSent = append(c.lastSent, vals[i])
			v[j] -= vals[i]
			if u != nil && c.cfg.FactorMasking {
				u[j] = 0
			}
		}
	}
	b := enc.Bytes()
	return Payload{Bytes: b, Wire: int64(len(b)), TensorWire: c.wire}, nil
}

// flatEnd is the end of the last compressed tensor in the model's flat buffers.
func (c *dgc) flatEnd() int {
	end := 0
	for _, t := range c.tensors {
		end = max(end, t.FlatOffset+t.Size)
	}
	return end
}

// DecodeAdd scatter-adds one worker's (index, value) pairs.
func (c *dgc) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	return c.decodeAdd(p.Bytes, dst, false)
}

// decodeAdd is DecodeAdd into the packed dst, or with flat into the flat
// gradient (each tensor at its FlatOffset) recording in c.touched the
// positions it adds to.
func (c *dgc) decodeAdd(b []byte, dst []float32, flat bool) error {
	d := NewDecoder(b)
	for _, t := range c.tensors {
		n := int(d.Uint32())
		if d.Err() == nil && n > t.Size {
			return fmt.Errorf("sent %d values for tensor %s of %d elements", n, t.Name, t.Size)
		}
		if cap(c.decIdx) < n {
			c.decIdx, c.decVals = make([]int32, n), make([]float32, n)
		}
		idx, vals := c.decIdx[:n], c.decVals[:n]
		d.Indices(idx, t.Size, c.narrow)
		if c.fp16 {
			d.Float16s(vals)
		} else {
			d.Float32s(vals)
		}
		if d.Err() != nil {
			break
		}
		out := tensorIn(dst, t, flat)
		for i, j := range idx {
			if uint32(j) >= uint32(t.Size) {
				return fmt.Errorf("sent index %d for tensor %s of %d elements", j, t.Name, t.Size)
			}
			out[j] += vals[i]
		}
		if flat {
			for _, j := range idx {
				c.touched = append(c.touched, int32(t.FlatOffset)+j)
			}
		}
	}
	return d.Done()
}

// decodeFlat writes the mean of the workers' payloads straight into the
// worker's flat gradient: each compressed tensor cleared, every payload
// scatter-added in rank order, then the entries they added to divided by N.
// Decompress clears the packed buffer, adds the same payloads in the same
// order and divides every nonzero entry; the others are zero either way, so
// the values are the same, without two passes over every tensor (the
// division's and the copy into grad).
func (c *dgc) decodeFlat(last Combined, grad []float32, _ StepInfo) (bool, error) {
	end := c.flatEnd()
	if end > math.MaxInt32 {
		return false, nil // positions past int32: the packed path (indices per tensor) takes it
	}
	n := last.Workers
	if n < 1 {
		return false, fmt.Errorf("%d workers", n)
	}
	if len(last.Bytes) != n {
		return false, fmt.Errorf("%d payloads for %d workers", len(last.Bytes), n)
	}
	for _, t := range c.tensors {
		clear(grad[t.FlatOffset : t.FlatOffset+t.Size])
	}
	c.touched = c.touched[:0]
	for w, b := range last.Bytes {
		if err := c.decodeAdd(b, grad, true); err != nil {
			return false, fmt.Errorf("worker %d: %w", w, err)
		}
	}
	// Divide each entry once, however many workers sent it: a bit per flat
	// position, set on the first visit and cleared after.
	if words := (end + 63) / 64; len(c.seen) < words {
		c.seen = make([]uint64, words)
	}
	f := float32(n)
	for _, j := range c.touched {
		w, bit := j>>6, uint64(1)<<(j&63)
		if c.seen[w]&bit != 0 {
			continue
		}
		c.seen[w] |= bit
		if x := grad[j]; x != 0 {
			grad[j] = x / f
		}
	}
	for _, j := range c.touched {
		c.seen[j>>6] = 0
	}
	return true, nil
}

// Compensated is the accumulator v of the last step before the sent entries
// were removed (this step's contribution included).
func (c *dgc) Compensated() []float32 {
	if c.comp == nil {
		c.comp = make([]float32, len(c.v))
	}
	copy(c.comp, c.v)
	for i, j := range c.lastIdx {
		c.comp[j] = c.lastPre[i]
	}
	return c.comp
}

// Sent is what this worker sent in the last step, dense (zeros elsewhere).
func (c *dgc) Sent() []float32 {
	if c.sentBuf == nil {
		c.sentBuf = make([]float32, len(c.v))
	}
	clear(c.sentBuf)
	for i, j := range c.lastIdx {
		c.sentBuf[j] = c.lastSent[i]
	}
	return c.sentBuf
}

// Residual is the accumulator v after the last step's selection (aliased).
func (c *dgc) Residual() []float32 { return c.v }

// State is the velocity "v/<tensor>" and, with momentum correction, the
// momentum "u/<tensor>" of every compressed tensor (copies).
func (c *dgc) State() map[string][]float32 {
	st := map[string][]float32{}
	for _, t := range c.tensors {
		st["v/"+t.Name] = append([]float32(nil), c.v[t.Offset:t.Offset+t.Size]...)
		if c.u != nil {
			st["u/"+t.Name] = append([]float32(nil), c.u[t.Offset:t.Offset+t.Size]...)
		}
	}
	return st
}

// SetState restores State's buffers; names and lengths must match exactly.
func (c *dgc) SetState(st map[string][]float32) error {
	want := len(c.tensors)
	if c.u != nil {
		want *= 2
	}
	if len(st) != want {
		return fmt.Errorf("dgc state: %d buffers, want %d (v/<tensor> and, with momentum correction, u/<tensor>)", len(st), want)
	}
	for _, t := range c.tensors {
		for _, b := range []struct {
			name string
			dst  []float32
		}{{"v/" + t.Name, c.v}, {"u/" + t.Name, c.u}} {
			if b.dst == nil {
				continue
			}
			src, ok := st[b.name]
			if !ok {
				return fmt.Errorf("dgc state: no buffer %q", b.name)
			}
			if len(src) != t.Size {
				return fmt.Errorf("dgc state: %q has %d values, want %d", b.name, len(src), t.Size)
			}
		}
	}
	for _, t := range c.tensors {
		copy(c.v[t.Offset:t.Offset+t.Size], st["v/"+t.Name])
		if c.u != nil {
			copy(c.u[t.Offset:t.Offset+t.Size], st["u/"+t.Name])
		}
	}
	c.lastIdx, c.lastPre, c.lastSent = c.lastIdx[:0], c.lastPre[:0], c.lastSent[:0]
	return nil
}
