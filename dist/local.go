package dist

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gradwire/gradwire/internal/vec"
)

// ErrClosed is the cause reported for a member that was closed: calls on it
// fail with it, and so do calls of the other members of its group.
var ErrClosed = errors.New("dist: member closed")

// RankError reports that a member of a group failed (or was closed): every
// member blocked in or entering a collective of that group returns it.
type RankError struct {
	Rank int   // rank of the failed member
	Err  error // its cause
}

func (e *RankError) Error() string { return fmt.Sprintf("dist: rank %d failed: %v", e.Rank, e.Err) }

// Unwrap returns the cause.
func (e *RankError) Unwrap() error { return e.Err }

// Aborter is implemented by collectives that can fail their whole group: a
// logical worker that cannot go on calls Abort so that the others return an
// error instead of waiting for it forever. Abort may be called from any
// goroutine, also while other members are blocked in a collective.
type Aborter interface {
	Abort(err error)
}

// NewLocal returns the n members of an in-process group; member i has rank i
// and must be used from one goroutine at a time (each logical worker drives
// its own member). The members share memory and copy no more than an
// operation needs:
//   - AllReduce: each member sums its own share of the elements over all
//     members, always in rank order 0..n-1, and writes the sums straight into
//     every member's buffer. Results are bit-identical on every member and in
//     every run.
//   - AllGather returns the members' payload slices themselves (zero-copy).
//   - Broadcast: every member copies from the root's buffer.
//
// Calls reuse the group's synchronisation state: no goroutines, and no
// allocations in steady state.
//
// Members implement Averager: AllReduceScaled scales the sums on the way and
// writes them only into the buffers of the members that read them.
//
// Members implement Aborter: Abort (or Close) on one member makes every member
// blocked in or entering a collective return a *RankError naming it at once.
// Members that pass buffers of different lengths (or call different
// operations) all get the same error naming the ranks and lengths, and the
// group stays usable.
func NewLocal(n int) ([]Collective, error) {
	if n < 1 {
		return nil, fmt.Errorf("dist: local group of %d members; need at least 1", n)
	}
	g := newGroup(n, 0, n)
	members := make([]Collective, n)
	for i := range members {
		members[i] = &localMember{g: g, rank: i, out: make([][]byte, n)}
	}
	return members, nil
}

// op names a collective operation; members check they all call the same one.
type op uint8

const (
	opAllReduce op = iota + 1
	opAllGather
	opBroadcast
	opBarrier
)

func (o op) String() string {
	switch o {
	case opAllReduce:
		return "AllReduce"
	case opAllGather:
		return "AllGather"
	case opBroadcast:
		return "Broadcast"
	case opBarrier:
		return "Barrier"
	}
	return "unknown operation"
}

// Averager is implemented by collectives that can finish an average for the
// caller inside the all-reduce, where the sums are still in cache.
type Averager interface {
	// AllReduceScaled is AllReduce followed by buf[i] *= scale (one float32
	// multiplication of each sum: the same bits as that), except that a
	// member passing keep false only contributes: its buf is left with
	// unspecified contents, and nothing is written into it that it would not
	// read. All members pass the same scale.
	AllReduceScaled(buf []float32, scale float32, keep bool) error
}

// call is what a member registers for one operation.
type call struct {
	op   op
	f    []float32
	b    []byte
	root int
	// AllReduceScaled: multiply the sums by scale; drop: the member does
	// not read the result (the zero values are a plain AllReduce).
	scaled, drop bool
	scale        float32
}

// group is the state shared by the members of an in-process group (NewLocal)
// or by the logical workers of one process (NewHierarchical). Members are
// numbered 0..n-1 here; base+i is the rank reported in errors and size the
// rank count Broadcast roots are checked against.
type group struct {
	n, base, size int

	mu      sync.Mutex
	cond    sync.Cond
	count   int        // members arrived at the current barrier
	gen     uint64     // completed barriers
	fail    *RankError // set once, by the first abort
	verdict error      // validation result of the last checked barrier

	// calls[p][i] is member i's registration for its calls of parity p. Two
	// sets let a member register its next call while slower members still
	// read this one (AllGather has a single barrier): a set is reused two calls
	// later, and the call in between cannot complete before every member has
	// finished with it.
	calls [2][]call
}

func newGroup(n, base, size int) *group {
	g := &group{n: n, base: base, size: size}
	g.cond.L = &g.mu
	g.calls[0] = make([]call, n)
	g.calls[1] = make([]call, n)
	return g
}

// barrier blocks until all n members have arrived. With check, the last
// member to arrive validates the registrations of parity p and every member
// returns the verdict. An abortable barrier returns the group's failure
// instead of waiting.
func (g *group) barrier(p int, check, abortable bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if abortable && g.fail != nil {
		return g.fail
	}
	gen := g.gen
	g.count++
	if g.count == g.n {
		g.count = 0
		g.gen++
		if check {
			g.verdict = g.validate(g.calls[p])
		}
		g.cond.Broadcast()
	} else {
		for g.gen == gen {
			if abortable && g.fail != nil {
				return g.fail
			}
			g.cond.Wait()
		}
	}
	if check {
		return g.verdict
	}
	return nil
}

// registered waits until every member has registered its call of parity p
// and returns the validation verdict, or the group's failure.
func (g *group) registered(p int) error { return g.barrier(p, true, true) }

// await waits for every member, or returns the group's failure.
func (g *group) await() error { return g.barrier(0, false, true) }

// complete waits for every member and cannot be aborted. It ends operations
// in which members read or write each other's buffers after the registration
// barrier: all of them are then running and will arrive, and none may return
// while another still touches its buffer.
func (g *group) complete() { _ = g.barrier(0, false, false) }

// abort fails the group: members waiting in an abortable barrier wake up, and
// later calls fail at once. The first failure wins.
func (g *group) abort(e *RankError) {
	g.mu.Lock()
	if g.fail == nil {
		g.fail = e
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// rankError attributes err to member i, unless err already names the rank
// that failed first (a failure forwarded from another group).
func (g *group) rankError(i int, err error) *RankError {
	if re, ok := err.(*RankError); ok {
		return re
	}
	return &RankError{Rank: g.base + i, Err: err}
}

// validate checks that all members called the same operation with the same
// length (and the same root); the same error is returned to every member.
func (g *group) validate(calls []call) error {
	c0 := calls[0]
	for i, c := range calls[1:] {
		if c.op != c0.op {
			return fmt.Errorf("dist: members called different collectives: rank %d %v, rank %d %v",
				g.base, c0.op, g.base+i+1, c.op)
		}
		if len(c.f) != len(c0.f) {
			return fmt.Errorf("dist: %v length mismatch: rank %d passed %d floats, rank %d passed %d",
				c.op, g.base, len(c0.f), g.base+i+1, len(c.f))
		}
		if c.scaled != c0.scaled || c.scale != c0.scale {
			return fmt.Errorf("dist: AllReduce scale mismatch: rank %d %s, rank %d %s",
				g.base, c0.scaleString(), g.base+i+1, c.scaleString())
		}
		if c.root != c0.root {
			return fmt.Errorf("dist: Broadcast root mismatch: rank %d named root %d, rank %d named root %d",
				g.base, c0.root, g.base+i+1, c.root)
		}
	}
	if c0.op == opBroadcast && (c0.root < 0 || c0.root >= g.size) {
		return fmt.Errorf("dist: Broadcast root %d out of range [0, %d)", c0.root, g.size)
	}
	return nil
}

func (c call) scaleString() string {
	if !c.scaled {
		return "did not scale"
	}
	return fmt.Sprintf("scaled by %v", c.scale)
}

// span is member i's share of an n-element AllReduce among m members. Shares
// start on 16-float (64-byte) boundaries so that members never write the same
// cache line.
func span(i, m, n int) (lo, hi int) {
	units := (n + 15) / 16
	return min(i*units/m*16, n), min((i+1)*units/m*16, n)
}

// sumBlock is the number of floats summed at a time: the partial sums stay in
// L1 cache while every member's buffer streams past.
const sumBlock = 2048

// sumSpan adds the members' buffers over [lo, hi) into member 0's buffer,
// in rank order 0..n-1 for every element, so that all members of every run
// get the same bits. Registrations of AllReduceScaled then multiply the sums
// by their scale. With scatter it then copies the results into the buffers
// of the other members that read them.
func sumSpan(calls []call, lo, hi int, scatter bool) {
	c0 := calls[0]
	for b := lo; b < hi; b += sumBlock {
		e := min(b+sumBlock, hi)
		dst := c0.f[b:e]
		j := 1
		for ; j+4 <= len(calls); j += 4 {
			vec.Add4(dst, calls[j].f[b:e], calls[j+1].f[b:e], calls[j+2].f[b:e], calls[j+3].f[b:e])
		}
		switch len(calls) - j { // the rest in one pass too
		case 3:
			vec.Add3(dst, calls[j].f[b:e], calls[j+1].f[b:e], calls[j+2].f[b:e])
		case 2:
			vec.Add2(dst, calls[j].f[b:e], calls[j+1].f[b:e])
		case 1:
			vec.Add1(dst, calls[j].f[b:e])
		}
		if c0.scaled {
			vec.Scale(dst, c0.scale)
		}
		if scatter {
			for _, c := range calls[1:] {
				if !c.drop {
					copy(c.f[b:e], dst)
				}
			}
		}
	}
}

// localMember is one member of a NewLocal group.
type localMember struct {
	g      *group
	rank   int
	seq    uint64   // calls made, for the parity of the registration set
	out    [][]byte // AllGather result, reused
	closed bool
}

var (
	_ Collective = (*localMember)(nil)
	_ Aborter    = (*localMember)(nil)
	_ Averager   = (*localMember)(nil)
)

func (m *localMember) Rank() int { return m.rank }
func (m *localMember) Size() int { return m.g.n }

// register records this member's call and returns the registration set.
func (m *localMember) register(c call) (p int, err error) {
	if m.closed {
		return 0, ErrClosed
	}
	p = int(m.seq & 1)
	m.seq++
	m.g.calls[p][m.rank] = c
	return p, nil
}

// AllReduce sums buf over all members: each member sums its own share of the
// elements for everybody, then waits until all shares are done. Buffers of
// different members must not overlap.
func (m *localMember) AllReduce(buf []float32) error {
	return m.allReduce(call{op: opAllReduce, f: buf})
}

// AllReduceScaled is AllReduce with the sums multiplied by scale, written
// only into the buffers of the members that keep them.
func (m *localMember) AllReduceScaled(buf []float32, scale float32, keep bool) error {
	return m.allReduce(call{op: opAllReduce, f: buf, scaled: true, scale: scale, drop: !keep})
}

func (m *localMember) allReduce(c call) error {
	buf := c.f
	p, err := m.register(c)
	if err != nil {
		return err
	}
	if err := m.g.registered(p); err != nil {
		return err
	}
	lo, hi := span(m.rank, m.g.n, len(buf))
	sumSpan(m.g.calls[p], lo, hi, true)
	m.g.complete()
	return nil
}

// AllGather returns the members' payload slices themselves, not copies. They
// must not be modified, and they are valid until this member's next call.
// In turn a caller must leave its payload untouched until its own next call
// on this member has returned (alternate two buffers to reuse them).
func (m *localMember) AllGather(payload []byte) ([][]byte, error) {
	p, err := m.register(call{op: opAllGather, b: payload})
	if err != nil {
		return nil, err
	}
	if err := m.g.registered(p); err != nil {
		return nil, err
	}
	for i, c := range m.g.calls[p] {
		m.out[i] = c.b
	}
	return m.out, nil
}

// Broadcast copies root's buf into every member's buf; root returns once all
// members have copied it.
func (m *localMember) Broadcast(buf []float32, root int) error {
	p, err := m.register(call{op: opBroadcast, f: buf, root: root})
	if err != nil {
		return err
	}
	if err := m.g.registered(p); err != nil {
		return err
	}
	if m.rank != root {
		copy(buf, m.g.calls[p][root].f)
	}
	m.g.complete()
	return nil
}

// Barrier returns once every member has called it.
func (m *localMember) Barrier() error {
	p, err := m.register(call{op: opBarrier})
	if err != nil {
		return err
	}
	return m.g.registered(p)
}

// Abort fails the group with err attributed to this member's rank.
func (m *localMember) Abort(err error) { m.g.abort(m.g.rankError(m.rank, err)) }

// Close closes the member. The group cannot complete another collective
// without it, so Close aborts the group with ErrClosed: members waiting for
// this one return at once instead of hanging. Closing again does nothing.
func (m *localMember) Close() error {
	if !m.closed {
		m.closed = true
		m.g.abort(m.g.rankError(m.rank, ErrClosed))
	}
	return nil
}
