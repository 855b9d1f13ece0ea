package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// NewHierarchical returns the local logical workers hosted by one process of
// world (a Collective of P processes, typically NewMPI): member i has rank
// world.Rank()*local+i and Size world.Size()*local, so the engine sees all N
// logical workers whatever the number of processes. Every process must host
// the same number of workers. As with NewLocal, each member is driven by one
// goroutine and the members share memory.
//
// Each operation runs locally first, then member 0 (the leader) makes one
// call on world, then the result is shared locally:
//   - AllReduce sums the local buffers (in rank order) into the leader's,
//     which the leader all-reduces over world; the others copy the result.
//     Results are bit-identical on all members of a run but, with a different
//     summation order, may differ from a flat group's in the last bits.
//   - AllGather: the leader frames the local payloads (count, lengths, bytes)
//     and gathers the frames over world; every member gets all N payloads in
//     global rank order.
//   - Broadcast from any global root, Barrier.
//
// world belongs to the caller, who closes it after the members are done;
// only the leader calls it. Members implement Aborter: Abort fails the local
// group and, when world is an Aborter, world too, so that no process waits
// for this one. A local validation error (members passing different lengths)
// also aborts world, since the other processes would otherwise wait for this
// leader forever. Close fails only the local group.
func NewHierarchical(world Collective, local int) ([]Collective, error) {
	if world == nil {
		return nil, errors.New("dist: hierarchical group needs a world collective")
	}
	if local < 1 {
		return nil, fmt.Errorf("dist: hierarchical group of %d local members; need at least 1", local)
	}
	procs := world.Size()
	h := &hier{
		world:    world,
		g:        newGroup(local, world.Rank()*local, procs*local),
		gathered: make([][]byte, procs*local),
	}
	members := make([]Collective, local)
	for i := range members {
		members[i] = &hierMember{h: h, i: i, out: make([][]byte, procs*local)}
	}
	return members, nil
}

// hier is the state shared by the local members of a hierarchical group.
type hier struct {
	world Collective
	g     *group

	// The leader writes err (its world call's result) and gathered before a
	// barrier, and the others read them after it; the leader writes them
	// again only after every member has entered its next call.
	err      error
	gathered [][]byte // all payloads of the last AllGather, slices of world's result

	// frames are the leader's AllGather payloads to world, by call parity:
	// world may lend a payload to the other processes until the leader's next
	// world call returns, so the frame is rebuilt only two calls later.
	frames [2][]byte
}

// hierMember is local member i of a hierarchical group.
type hierMember struct {
	h      *hier
	i      int
	seq    uint64   // calls made, for the parity of the registration set
	out    [][]byte // AllGather result, reused
	closed bool
}

var (
	_ Collective = (*hierMember)(nil)
	_ Aborter    = (*hierMember)(nil)
)

func (m *hierMember) Rank() int { return m.h.g.base + m.i }
func (m *hierMember) Size() int { return m.h.g.size }

// begin registers the call and waits for the local members. A validation
// error there is seen by this process only, while the other processes will
// wait in world for its leader: the leader aborts world so that they fail too.
func (m *hierMember) begin(c call) (int, error) {
	if m.closed {
		return 0, ErrClosed
	}
	g := m.h.g
	p := int(m.seq & 1)
	m.seq++
	g.calls[p][m.i] = c
	err := g.registered(p)
	if _, aborted := err.(*RankError); err != nil && !aborted && m.i == 0 {
		if a, ok := m.h.world.(Aborter); ok {
			a.Abort(g.rankError(0, err))
		}
	}
	return p, err
}

// leaderDone waits until the leader's world call is done and returns its error.
func (h *hier) leaderDone() error {
	if err := h.g.await(); err != nil {
		return err
	}
	return h.err
}

// worldErr marks errors of the leader's world call as such. A *RankError
// means a logical worker of another process failed: it already names the
// worker, and it fails the local group too, so that later calls return it at
// once.
func (h *hier) worldErr(err error) error {
	if re, ok := err.(*RankError); ok {
		h.g.abort(re)
		return re
	}
	if err != nil {
		return fmt.Errorf("dist: between processes: %w", err)
	}
	return nil
}

// AllReduce sums buf over all N members.
func (m *hierMember) AllReduce(buf []float32) error {
	p, err := m.begin(call{op: opAllReduce, f: buf})
	if err != nil {
		return err
	}
	h, g := m.h, m.h.g
	lo, hi := span(m.i, g.n, len(buf))
	sumSpan(g.calls[p], lo, hi, false)
	g.complete()
	if m.i == 0 {
		h.err = h.worldErr(h.world.AllReduce(buf))
	}
	if err := h.leaderDone(); err != nil {
		return err
	}
	if m.i != 0 {
		copy(buf, g.calls[p][0].f)
	}
	g.complete() // the leader's buffer must outlive the copies
	return nil
}

// AllGather returns all N payloads in global rank order. The slices alias
// world's result: they must not be modified and are valid until this member's
// next call. Payloads are copied into the leader's frame, so a caller may
// reuse its payload once AllGather has returned.
func (m *hierMember) AllGather(payload []byte) ([][]byte, error) {
	p, err := m.begin(call{op: opAllGather, b: payload})
	if err != nil {
		return nil, err
	}
	if m.i == 0 {
		m.h.err = m.h.gather(p)
	}
	if err := m.h.leaderDone(); err != nil {
		return nil, err
	}
	copy(m.out, m.h.gathered)
	return m.out, nil
}

// gather frames the local payloads, gathers the frames of all processes over
// world and splits them into h.gathered.
func (h *hier) gather(p int) error {
	calls := h.g.calls[p]
	size := 8 * (len(calls) + 1)
	for _, c := range calls {
		size += len(c.b)
	}
	f := slices.Grow(h.frames[p][:0], size)
	f = binary.LittleEndian.AppendUint64(f, uint64(len(calls)))
	for _, c := range calls {
		f = binary.LittleEndian.AppendUint64(f, uint64(len(c.b)))
	}
	for _, c := range calls {
		f = append(f, c.b...)
	}
	h.frames[p] = f
	frames, err := h.world.AllGather(f)
	if err != nil {
		return h.worldErr(err)
	}
	for q, fr := range frames {
		if err := h.split(q, fr); err != nil {
			return err
		}
	}
	return nil
}

// split stores the payloads of process q's frame in h.gathered.
func (h *hier) split(q int, fr []byte) error {
	n := h.g.n
	off := 8 * (n + 1)
	if len(fr) < off || binary.LittleEndian.Uint64(fr) != uint64(n) {
		return fmt.Errorf("dist: AllGather frame of process %d is malformed (every process must host %d logical workers)", q, n)
	}
	for i := range n {
		l := binary.LittleEndian.Uint64(fr[8*(i+1):])
		if l > uint64(len(fr)-off) {
			return fmt.Errorf("dist: AllGather frame of process %d is truncated", q)
		}
		end := off + int(l)
		h.gathered[q*n+i] = fr[off:end:end]
		off = end
	}
	if off != len(fr) {
		return fmt.Errorf("dist: AllGather frame of process %d has %d trailing bytes", q, len(fr)-off)
	}
	return nil
}

// Broadcast copies global rank root's buf into every member's buf. The
// leader passes the root's own buffer to world when the root is local.
func (m *hierMember) Broadcast(buf []float32, root int) error {
	p, err := m.begin(call{op: opBroadcast, f: buf, root: root})
	if err != nil {
		return err
	}
	h, g := m.h, m.h.g
	src := 0 // local member whose buffer holds the result: the leader's, or the root's
	if r := root - g.base; r >= 0 && r < g.n {
		src = r
	}
	if m.i == 0 {
		h.err = h.worldErr(h.world.Broadcast(g.calls[p][src].f, root/g.n))
	}
	if err := h.leaderDone(); err != nil {
		return err
	}
	if m.i != src {
		copy(buf, g.calls[p][src].f)
	}
	g.complete() // the source buffer must outlive the copies
	return nil
}

// Barrier returns once all N members have called it.
func (m *hierMember) Barrier() error {
	if _, err := m.begin(call{op: opBarrier}); err != nil {
		return err
	}
	if m.i == 0 {
		m.h.err = m.h.worldErr(m.h.world.Barrier())
	}
	return m.h.leaderDone()
}

// Abort fails the local group and world (when world is an Aborter) with err
// attributed to this member's global rank.
func (m *hierMember) Abort(err error) {
	e := m.h.g.rankError(m.i, err)
	m.h.g.abort(e)
	if a, ok := m.h.world.(Aborter); ok {
		a.Abort(e)
	}
}

// Close closes the member and fails the local group with ErrClosed; world is
// left to its owner. Closing again does nothing.
func (m *hierMember) Close() error {
	if !m.closed {
		m.closed = true
		m.h.g.abort(m.h.g.rankError(m.i, ErrClosed))
	}
	return nil
}
