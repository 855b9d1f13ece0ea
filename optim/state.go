package optim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// buffers holds an optimizer's per-parameter state: for each parameter name, one
// []float32 per slot (SGD: momentum; Adam: m, v), each as long as the parameter, or
// one element long for a per-tensor slot (NovoGrad's v). The first slot is always
// per element. Buffers are allocated on the first step that sees a parameter and
// reused afterwards, so a step over an unchanged parameter list allocates nothing.
type buffers struct {
	who       string                 // optimizer name, for error messages
	slots     []string               // slot names, in the order of the per-name slices
	perTensor []bool                 // per slot: one value per tensor rather than per element
	byName    map[string][][]float32 // parameter name -> one buffer per slot
}

// newBuffers returns empty buffers with per-element slots.
func newBuffers(who string, slots ...string) buffers {
	return buffers{who: who, slots: slots, perTensor: make([]bool, len(slots)), byName: map[string][][]float32{}}
}

// newBuffersPerTensor returns empty buffers whose slots are per element, then one
// value per tensor for each of tensorSlots.
func newBuffersPerTensor(who string, elemSlots []string, tensorSlots ...string) buffers {
	b := newBuffers(who, append(append([]string(nil), elemSlots...), tensorSlots...)...)
	for s := len(elemSlots); s < len(b.slots); s++ {
		b.perTensor[s] = true
	}
	return b
}

// slotLen is the length of slot s's buffer for a parameter of n elements.
func (b *buffers) slotLen(s, n int) int {
	if b.perTensor[s] {
		return 1
	}
	return n
}

// bytes is the size of all buffers, 4 bytes per float32.
func (b *buffers) bytes() int64 {
	var n int64
	for _, bufs := range b.byName {
		for _, buf := range bufs {
			n += int64(len(buf))
		}
	}
	return 4 * n
}

// prepare checks params against the buffers and allocates zeroed buffers for the
// parameters seen for the first time; with allowNew false a parameter without
// buffers is an error instead. It changes nothing when it fails, so a failed Step
// leaves parameters and state untouched.
func (b *buffers) prepare(params []Param, allowNew bool) error {
	missing := false
	for i := range params {
		p := &params[i]
		if len(p.Value) != len(p.Grad) {
			return fmt.Errorf("optim: %s: parameter %q has %d values but %d gradients", b.who, p.Name, len(p.Value), len(p.Grad))
		}
		if len(b.slots) == 0 {
			continue
		}
		if p.Name == "" {
			return fmt.Errorf("optim: %s: parameter %d has no name; state buffers are keyed by name", b.who, i)
		}
		bufs, ok := b.byName[p.Name]
		switch {
		case !ok && !allowNew:
			return fmt.Errorf("optim: %s: parameter %q has no state after the first step; the parameter list must not change between steps", b.who, p.Name)
		case !ok:
			missing = true
		case len(bufs[0]) != len(p.Value):
			return fmt.Errorf("optim: %s: state buffer %s/%s has %d elements, parameter %q has %d", b.who, b.slots[0], p.Name, len(bufs[0]), p.Name, len(p.Value))
		}
	}
	if !missing {
		return nil
	}
	// Cold path (a parameter is new): two tensors with one name would silently share
	// buffers, so names are checked for uniqueness here, where allocating is fine.
	seen := make(map[string]bool, len(params))
	for i := range params {
		if seen[params[i].Name] {
			return fmt.Errorf("optim: %s: two parameters are named %q", b.who, params[i].Name)
		}
		seen[params[i].Name] = true
	}
	for i := range params {
		p := &params[i]
		if _, ok := b.byName[p.Name]; ok {
			continue
		}
		bufs := make([][]float32, len(b.slots))
		for s := range bufs {
			bufs[s] = make([]float32, b.slotLen(s, len(p.Value)))
		}
		b.byName[p.Name] = bufs
	}
	return nil
}

// state returns copies of the buffers keyed "<slot>/<param name>".
func (b *buffers) state() map[string][]float32 {
	out := make(map[string][]float32, len(b.byName)*len(b.slots))
	for name, bufs := range b.byName {
		for s, slot := range b.slots {
			out[slot+"/"+name] = slices.Clone(bufs[s])
		}
	}
	return out
}

// set replaces the buffers with copies of st, keyed "<slot>/<param name>". Every key
// must name one of the optimizer's slots, every parameter must have all its slots,
// its per-element slots must have the same length and its per-tensor slots one
// element. On error nothing changes.
func (b *buffers) set(st map[string][]float32) error {
	byName := make(map[string][][]float32, len(st))
	// Sorted keys make the reported error the same from run to run.
	for _, key := range slices.Sorted(maps.Keys(st)) {
		slot, name, ok := strings.Cut(key, "/")
		if !ok || slot == "" || name == "" {
			return fmt.Errorf("optim: %s: state key %q is not <slot>/<param name>", b.who, key)
		}
		s := slices.Index(b.slots, slot)
		if s < 0 {
			if len(b.slots) == 0 {
				return fmt.Errorf("optim: %s: unknown state key %q: this configuration keeps no buffers", b.who, key)
			}
			return fmt.Errorf("optim: %s: unknown state key %q: slots are %s", b.who, key, strings.Join(b.slots, ", "))
		}
		bufs := byName[name]
		if bufs == nil {
			bufs = make([][]float32, len(b.slots))
			byName[name] = bufs
		}
		bufs[s] = slices.Clone(st[key])
		if bufs[s] == nil {
			bufs[s] = []float32{} // nil marks a missing slot below
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		bufs := byName[name]
		first := slices.IndexFunc(bufs, func(buf []float32) bool { return buf != nil })
		for s, buf := range bufs {
			switch {
			case buf == nil:
				return fmt.Errorf("optim: %s: state has %s/%s but no %s/%s", b.who, b.slots[first], name, b.slots[s], name)
			case b.perTensor[s] && len(buf) != 1:
				return fmt.Errorf("optim: %s: state buffer %s/%s has %d elements, want 1 (one value per tensor)", b.who, b.slots[s], name, len(buf))
			case !b.perTensor[s] && len(buf) != len(bufs[0]):
				// Slot 0 is per element and present (else the case above).
				return fmt.Errorf("optim: %s: state buffers %s/%s (%d elements) and %s/%s (%d) differ in length",
					b.who, b.slots[0], name, len(bufs[0]), b.slots[s], name, len(buf))
			}
		}
	}
	b.byName = byName
	return nil
}

// checkStepLR rejects a learning rate no update can use.
func checkStepLR(who string, lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("optim: %s: learning rate %v, want a finite number >= 0", who, lr)
	}
	return nil
}

func errNegativeStep(who string, step int64) error {
	return fmt.Errorf("optim: %s: state step %d, want >= 0", who, step)
}

// StateBytes returns the size in bytes of o's checkpointable state buffers (4 bytes per
// float32; the step counter is not counted): divided by the number of parameters it
// gives the state's bytes per parameter (SGD with momentum 4, Adam 8, NovoGrad a
// little over 4). It is 0 before the first step, which allocates the buffers. The
// optimizers of this package report it without copying; for any other Optimizer it
// sums the buffers of State.
func StateBytes(o Optimizer) int64 {
	if s, ok := o.(interface{ StateBytes() int64 }); ok {
		return s.StateBytes()
	}
	var n int64
	for _, buf := range o.State().Buffers {
		n += 4 * int64(len(buf))
	}
	return n
}

// stepState is the checkpointable state every optimizer keeps: a step counter
// and named buffers. Optimizers embed it for State, StateBytes and SetState.
type stepState struct {
	step int64
	bufs buffers
	// momentsNeedStep: bias-corrected moments are meaningless at step 0, so a
	// state with buffers but step 0 is refused (Adam, LAMB with bias correction).
	momentsNeedStep bool
}

// State returns a copy of the step counter and the buffers ("<slot>/<param name>").
func (s *stepState) State() State {
	return State{Step: s.step, Buffers: s.bufs.state()}
}

// StateBytes returns the size of the buffers in bytes (see StateBytes).
func (s *stepState) StateBytes() int64 { return s.bufs.bytes() }

// SetState restores a state returned by State, copying its buffers. Buffer lengths
// are checked against the parameters on the next Step.
func (s *stepState) SetState(st State) error {
	if st.Step < 0 {
		return errNegativeStep(s.bufs.who, st.Step)
	}
	if s.momentsNeedStep && st.Step == 0 && len(st.Buffers) > 0 {
		// Moments at step 0 would be bias-corrected as if they were one step old.
		return fmt.Errorf("optim: %s: state has moments but step 0", s.bufs.who)
	}
	if err := s.bufs.set(st.Buffers); err != nil {
		return err
	}
	s.step = st.Step
	return nil
}
