package compress

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gradwire/gradwire/dist"
)

// memory is error feedback (the residual accumulation of Seide et al. 2014 and
// Lin et al. 2018): what a worker did not send is added to its next gradient.
// It keeps the compensated gradient of the step, so that the invariant
// compensated == sent + residual can be checked.
type memory struct {
	residual    []float32
	compensated []float32
}

// newMemory is error feedback for a packed buffer of n values.
func newMemory(n int) *memory {
	return &memory{residual: make([]float32, n), compensated: make([]float32, n)}
}

// Compensate adds the residual to g in place (g becomes the compensated gradient).
func (m *memory) Compensate(g []float32) {
	g, c := g[:len(m.residual)], m.compensated[:len(m.residual)]
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

// Residual is the current residual (aliased).
func (m *memory) Residual() []float32 { return m.residual }

// Compensated is the last compensated gradient (aliased).
func (m *memory) Compensated() []float32 { return m.compensated }

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
	sent  []float32 // DecodeAdd of this worker's own payload
	ef    ErrorFeedback
	whole CombinedDecoder // non-nil when the compressor decodes the combined result itself
}

func newSender(name string, c Compressor, n int) *sender {
	s := &sender{name: name, c: c, needs: c.Needs()}
	s.whole, _ = c.(CombinedDecoder)
	if s.needs.ErrorFeedback {
		s.mem, s.sent = newMemory(n), make([]float32, n)
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
	p, err := s.c.Encode(r, grad, prev, info)
	if err != nil || s.mem == nil || r != s.needs.Rounds-1 {
		return p, err
	}
	// Decode before the collective: an all-reduce sums into p.Floats.
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
func (s *sender) Sent() []float32 { return s.sent }

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
