package compress

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gradwire/gradwire/dist"
)

// memory is error feedback (the residual accumulation of Seide et al. 2014 and
// Lin et al. 2018): what a worker did not send is added to its next gradient.
// It keeps what the compensated gradient of the step was, so that the
// invariant compensated == sent + residual can be checked.
//
// For a compressor whose own payload is a few entries (sparseSender), the
// step's passes shrink to one: Compensate writes the compensated gradient
// into the residual as well, as though nothing were sent, and Update
// subtracts the sent values at their positions only; Compensated and Sent are
// rebuilt from the residual and those entries when asked for.
type memory struct {
	residual    []float32
	compensated []float32 // dense mode only

	sparse   bool
	sentIdx  []int32   // sparse mode: positions of the own payload's entries
	sentVals []float32 // their decoded values (as DecodeAdd adds them to zeros)
	sentPre  []float32 // the compensated gradient there
	compBuf  []float32 // Compensated(), built on demand in sparse mode
	sentBuf  []float32 // Sent(), likewise
}

// newMemory is error feedback for a packed buffer of n values; sparse is
// the mode for a sparseSender.
func newMemory(n int, sparse bool) *memory {
	m := &memory{residual: make([]float32, n), sparse: sparse}
	if !sparse {
		m.compensated = make([]float32, n)
	}
	return m
}

// Compensate adds the residual to g in place (g becomes the compensated
// gradient) and keeps a copy: in the residual itself in sparse mode.
func (m *memory) Compensate(g []float32) {
	g = g[:len(m.residual)]
	if m.sparse {
		r := m.residual
		for i, e := range r {
			g[i] += e
			r[i] = g[i]
		}
		m.clearSent()
		return
	}
	c := m.compensated[:len(m.residual)]
	for i, e := range m.residual {
		g[i] += e
		c[i] = g[i] // one pass: the compensated copy is kept as it is made
	}
}

// Update keeps what was not sent: residual = compensated - sent.
func (m *memory) Update(sent []float32) {
	r, sent := m.residual, sent[:len(m.compensated)]
	for i, c := range m.compensated {
		r[i] = c - sent[i]
	}
}

// clearSent forgets the last step's sent entries (sparse mode): until
// UpdateSparse lists this step's, the residual is the compensated gradient.
func (m *memory) clearSent() {
	m.sentIdx, m.sentVals, m.sentPre = m.sentIdx[:0], m.sentVals[:0], m.sentPre[:0]
}

// UpdateSparse is Update in sparse mode: it takes the sent entries from the
// compressor, and as the residual holds the compensated gradient, only their
// positions change. Each sent value is taken as 0 + v, the value DecodeAdd
// leaves in a cleared buffer, so that the residual is bit for bit what
// Update would have made.
func (m *memory) UpdateSparse(c sparseSender) {
	m.clearSent()
	m.sentIdx, m.sentVals = c.appendSent(m.sentIdx, m.sentVals)
	var zero float32
	r := m.residual
	for i, j := range m.sentIdx {
		m.sentPre = append(m.sentPre, r[j])
		r[j] -= zero + m.sentVals[i]
	}
}

// Residual is the current residual (aliased).
func (m *memory) Residual() []float32 { return m.residual }

// Compensated is the last compensated gradient (aliased in dense mode; a
// copy rebuilt on each call in sparse mode).
func (m *memory) Compensated() []float32 {
	if !m.sparse {
		return m.compensated
	}
	d := grow(&m.compBuf, len(m.residual))
	copy(d, m.residual)
	for i, j := range m.sentIdx {
		d[j] = m.sentPre[i]
	}
	return d
}

// sent is what the own payload decodes to, in sparse mode (rebuilt on each
// call).
func (m *memory) sent() []float32 {
	d := grow(&m.sentBuf, len(m.residual))
	clear(d)
	var zero float32
	for i, j := range m.sentIdx {
		d[j] = zero + m.sentVals[i]
	}
	return d
}

// grow makes *b n values long the first time.
func grow(b *[]float32, n int) []float32 {
	if *b == nil {
		*b = make([]float32, n)
	}
	return *b
}

// sparseSender is a compressor whose own payload decodes to a few entries:
// appendSent appends their packed positions (no repeats) and their values as
// DecodeAdd adds them (float16-rounded where the payload carries float16).
// It is valid after the last round's Encode until the compressor's next
// Encode or DecodeAdd. Its Encode reads grad without writing it: the
// exchange may pass the residual itself as grad (sender.compressCompensated).
type sparseSender interface {
	appendSent(idx []int32, vals []float32) ([]int32, []float32)
}

// ErrorFeedback is a worker's residual as Exchange.Feedback reports it: the
// exchange's own for compressors with Needs.ErrorFeedback, the compressor's
// for those that keep one themselves. After a step, Compensated() == Sent() +
// Residual() element-wise: Sent is what this worker's contribution decodes to
// (for PowerSGD, the approximation every worker applies).
type ErrorFeedback interface {
	Compensated() []float32
	Sent() []float32
	Residual() []float32
}

// sender is the generic part of one worker's step around its compressor:
// error feedback when the compressor asks for it, and the checkpoint state of
// both, and the mean over the workers' decoded payloads. Encoding and
// decoding one payload stay the compressor's.
type sender struct {
	name  string // registry name, for errors
	c     Compressor
	needs Needs
	mem   *memory   // nil without Needs.ErrorFeedback
	sent  []float32 // DecodeAdd of this worker's own payload (not with sparse)
	// sparse: the compressor lists its own payload's entries; the residual
	// then changes only there (memory's sparse mode).
	sparse sparseSender
	ef     ErrorFeedback
	whole  CombinedDecoder // non-nil when the compressor decodes the combined result itself
}

func newSender(name string, c Compressor, n int) *sender {
	s := &sender{name: name, c: c, needs: c.Needs()}
	s.whole, _ = c.(CombinedDecoder)
	if s.needs.ErrorFeedback {
		if n <= math.MaxInt32 { // sparseSender's positions are int32
			s.sparse, _ = c.(sparseSender)
		}
		s.mem = newMemory(n, s.sparse != nil)
		if s.sparse == nil {
			s.sent = make([]float32, n)
		}
		s.ef = s
	} else if ef, ok := c.(ErrorFeedback); ok {
		s.ef = ef
	}
	return s
}

// Compress returns round r's payload: with error feedback, round 0 first adds
// the residual to grad, and the last round sets the residual to what this
// worker's own payload does not carry.
func (s *sender) Compress(r int, grad []float32, prev Combined, info StepInfo) (Payload, error) {
	if s.mem != nil && r == 0 {
		s.mem.Compensate(grad)
	}
	return s.encode(r, grad, prev, info)
}

// compressCompensated is Compress's round 0 for a sparse sender of one round
// whose residual already holds the step's compensated gradient (the
// exchange formed it while taking the gradient): Encode reads it there, and
// UpdateSparse takes the sent values off.
func (s *sender) compressCompensated(prev Combined, info StepInfo) (Payload, error) {
	s.mem.clearSent()
	return s.encode(0, s.mem.residual, prev, info)
}

// encode is Encode of round r on the compensated grad; after the last round
// the residual keeps what the own payload does not carry.
func (s *sender) encode(r int, grad []float32, prev Combined, info StepInfo) (Payload, error) {
	p, err := s.c.Encode(r, grad, prev, info)
	if err != nil || s.mem == nil || r != s.needs.Rounds-1 {
		return p, err
	}
	// Decode before the collective: an all-reduce sums into p.Floats.
	if s.sparse != nil {
		s.mem.UpdateSparse(s.sparse)
		return p, nil
	}
	clear(s.sent)
	if err := s.c.DecodeAdd(p, s.sent, info); err != nil {
		return p, fmt.Errorf("%s: decoding the own payload: %w", s.name, err)
	}
	s.mem.Update(s.sent)
	return p, nil
}

// Decompress writes the mean over the workers into dst from the last
// round's combined result: every payload decoded and added in rank order
// (the same float32 operations in the same order on every worker), then
// divided by N.
func (s *sender) Decompress(last Combined, dst []float32, info StepInfo) error {
	if s.whole != nil {
		return s.whole.DecodeMean(last, dst, info)
	}
	n := last.Workers
	if n < 1 {
		return fmt.Errorf("%s: %d workers", s.name, n)
	}
	clear(dst)
	if s.needs.Op(s.needs.Rounds-1) == dist.OpAllReduce {
		if err := s.c.DecodeAdd(Payload{Floats: last.Floats}, dst, info); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	} else {
		if len(last.Bytes) != n {
			return fmt.Errorf("%s: %d payloads for %d workers", s.name, len(last.Bytes), n)
		}
		for w, b := range last.Bytes {
			if err := s.c.DecodeAdd(Payload{Bytes: b}, dst, info); err != nil {
				return fmt.Errorf("%s: worker %d: %w", s.name, w, err)
			}
		}
	}
	if s.needs.Reciprocal {
		inv := 1 / float32(n)
		for i := range dst {
			dst[i] *= inv
		}
	} else {
		divideSum(dst, n)
	}
	return nil
}

// Feedback is the worker's error feedback, nil when nothing is fed back.
func (s *sender) Feedback() ErrorFeedback { return s.ef }

// Compensated is the step's gradient plus the previous residual.
func (s *sender) Compensated() []float32 { return s.mem.Compensated() }

// Sent is what this worker's payload decodes to.
func (s *sender) Sent() []float32 {
	if s.sparse != nil {
		return s.mem.sent()
	}
	return s.sent
}

// Residual is what is carried into the next step.
func (s *sender) Residual() []float32 { return s.mem.Residual() }

// State is the compressor's state plus, with error feedback, a copy of the
// residual named "residual".
func (s *sender) State() map[string][]float32 {
	st := s.c.State()
	if s.mem != nil {
		if st == nil {
			st = map[string][]float32{}
		}
		st["residual"] = slices.Clone(s.mem.Residual())
	}
	return st
}

// SetState restores State's buffers; with error feedback the residual must be
// present with the right length. On error nothing changes.
func (s *sender) SetState(st map[string][]float32) error {
	if s.mem == nil {
		return s.c.SetState(st)
	}
	r, has := st["residual"]
	switch {
	case !has:
		return fmt.Errorf("%s: state has no \"residual\" buffer", s.name)
	case has && len(r) != len(s.mem.Residual()):
		return fmt.Errorf("%s: state buffer \"residual\" has %d values, want %d", s.name, len(r), len(s.mem.Residual()))
	}
	rest := maps.Clone(st)
	delete(rest, "residual")
	if err := s.c.SetState(rest); err != nil {
		return err
	}
	copy(s.mem.Residual(), r)
	return nil
}
