// Package par runs a function over index ranges on persistent helper
// goroutines. A training step hands work to the second core a dozen times or
// more (every fast op, the optimizer's update); starting goroutines for each
// hand-off costs a thread wake-up per call (tens of microseconds on a virtual
// machine) and an allocation. The helpers here spin briefly after each call
// before they park, so calls that follow each other closely, as the ops of one
// step do, find them awake.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Linger is how long an idle helper keeps polling for the next call before it
// parks; each call sets it (Run: LingerOps, RunLinger: any). The helper polls
// without yielding (runtime.Gosched) and on no thread of its own. Measured
// on the 2-core Xeon, best of interleaved trials (mlp step at batch 64 /
// ResNet-20 step): a helper yielding every 64 polls lost the mlp step's
// parallel speed-up in most trials (1.8 against 1.0 ms); one locked to its OS
// thread (runtime.LockOSThread) was steady on mlp but 5-10% slower on
// ResNet-20, whose longer serial stretches park it and a locked goroutine
// wakes slowly; polling 1 ms rather than 100 or 300 µs gave the steadiest
// figures on both (1.0-1.1 ms, 100-102 ms). A polling helper holds a
// processor, so a pool should have fewer helpers than GOMAXPROCS (Default
// has GOMAXPROCS-1), and work that comes once per step (the optimizer's
// update, while other replicas compute) should linger briefly. On a machine
// shared with other processes a polling helper may not be scheduled at all
// when a call comes; the caller then runs the helper's range itself (see
// Pool.claims) rather than wait: with two training processes on the 2 cores,
// a hand-off after serial work measured 14 µs this way against 70-280 µs
// waiting for the helper (and 28 µs starting goroutines).
const (
	LingerOps   = time.Millisecond      // between the ops of a step
	LingerBurst = 50 * time.Microsecond // within a burst of calls, then park
)

// Func is the work of one call: f(worker, lo, hi) handles [lo, hi).
type Func func(wk, lo, hi int)

// Pool is a set of helper goroutines. One call runs at a time; a call that
// finds the pool busy runs on fresh goroutines instead (as before the pool),
// so concurrent callers never wait on each other.
type Pool struct {
	busy    sync.Mutex
	helpers []*helper
	// call is the current call's generation (bumped once per call) times 256
	// plus its worker count: a helper reads both at once, so one that missed
	// a call never takes part in the next with the old count.
	call atomic.Uint64
	// claims is the current call's generation (low 32 bits) times 2^32 plus
	// one bit per range taken. A range goes to whoever claims it first: its
	// helper, or the caller once its own range is done, so that a helper the
	// OS has not scheduled (a machine shared with other processes) is not
	// waited for.
	claims  atomic.Uint64
	pending atomic.Int32 // ranges 1..w-1 not yet done
	// The current call's work, written before call is bumped; stable until
	// its helpers are done.
	fn Func
	n  int
	// linger is the latest call's (in nanoseconds): a helper that finds a
	// call's ranges already taken (the caller ran them) lingers for it too,
	// not for some earlier call's, so an atomic, read after the call is seen.
	linger atomic.Int64
}

type helper struct {
	idx    int // worker index: helper i takes part w = i+1 of a call
	asleep atomic.Bool
	wake   chan struct{}
}

// New returns a pool of helpers helper goroutines (a call can then use up to
// helpers+1 workers). The goroutines live as long as the process.
func New(helpers int) *Pool {
	p := &Pool{}
	for i := range helpers {
		h := &helper{idx: i + 1, wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		go p.loop(h)
	}
	return p
}

var (
	defaultOnce sync.Once
	defaultPool *Pool
)

// Default is the process's shared pool, with GOMAXPROCS-1 helpers (read at
// its first use).
func Default() *Pool {
	defaultOnce.Do(func() { defaultPool = New(runtime.GOMAXPROCS(0) - 1) })
	return defaultPool
}

// Run splits [0, n) into w contiguous ranges, [k*n/w, (k+1)*n/w), and runs
// f(k, lo, hi) on each: range 0 on the calling goroutine, the others on the
// pool's helpers. It returns when all are done. A busy pool, or one with
// fewer than w-1 helpers, hands the ranges to new goroutines instead, so the
// split is always w ways.
func (p *Pool) Run(n, w int, f Func) { p.RunLinger(n, w, f, LingerOps) }

// RunLinger is Run with the helpers polling for linger after the call before
// they park.
func (p *Pool) RunLinger(n, w int, f Func, linger time.Duration) {
	if w <= 1 || n <= 1 {
		whole(n, f)
		return
	}
	if w-1 > len(p.helpers) || w > maxWorkers || !p.busy.TryLock() {
		spawn(n, w, f)
		return
	}
	p.run(n, w, f, linger)
}

// RunIfIdle is Run on the pool's helpers (w capped at Workers) when the pool
// is idle, and f(0, 0, n) on the calling goroutine when it is busy: for work
// that is worth splitting only onto idle cores (when several model replicas
// run at once, the cores are already busy).
func (p *Pool) RunIfIdle(n, w int, f Func) {
	w = min(w, p.Workers(), maxWorkers)
	if w <= 1 || n <= 1 || !p.busy.TryLock() {
		whole(n, f)
		return
	}
	p.run(n, w, f, LingerOps)
}

// whole runs all of [0, n) as worker 0's range on the caller.
func whole(n int, f Func) {
	if n > 0 {
		f(0, 0, n)
	}
}

// maxWorkers bounds a call's ranges (one claim bit each).
const maxWorkers = 32

// run is a call on the helpers; the caller holds p.busy.
func (p *Pool) run(n, w int, f Func, linger time.Duration) {
	gen := p.call.Load()>>8 + 1
	p.fn, p.n = f, n
	p.linger.Store(int64(linger))
	p.pending.Store(int32(w - 1))
	p.claims.Store(gen << 32)
	p.call.Store(gen<<8 | uint64(w))
	for _, h := range p.helpers[:w-1] {
		if h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	f(0, 0, n/w)
	// Take the ranges no helper has started, then wait for the others,
	// yielding now and then: a helper that has to be woken needs a
	// processor, and this one may be the only one free.
	for k := 1; k < w; k++ {
		if p.claim(gen, k) {
			f(k, k*n/w, (k+1)*n/w)
			p.pending.Add(-1)
		}
	}
	for i := 1; p.pending.Load() != 0; i++ {
		if i%1024 == 0 {
			runtime.Gosched()
		}
	}
	p.fn = nil
	p.busy.Unlock()
}

// claim takes range k of call gen, unless it is taken or the call is over.
func (p *Pool) claim(gen uint64, k int) bool {
	bit := uint64(1) << k
	for {
		c := p.claims.Load()
		if c>>32 != gen&(1<<32-1) || c&bit != 0 {
			return false
		}
		if p.claims.CompareAndSwap(c, c|bit) {
			return true
		}
	}
}

// loop is a helper: wait for a new call (spinning, then parked), take its
// range when the call has one for this helper and nobody took it, report
// done.
func (p *Pool) loop(h *helper) {
	var seen uint64 // the pool's state before its first call
	linger := LingerOps
	for {
		seen = p.await(h, seen, linger)
		linger = time.Duration(p.linger.Load())
		if w := int(seen & 255); h.idx < w && p.claim(seen>>8, h.idx) {
			p.fn(h.idx, h.idx*p.n/w, (h.idx+1)*p.n/w)
			p.pending.Add(-1)
		}
	}
}

// await returns the next call after seen (see Pool.call), polling for linger
// before it parks.
func (p *Pool) await(h *helper, seen uint64, linger time.Duration) uint64 {
	deadline := time.Now().Add(linger)
	for i := 0; ; i++ {
		if g := p.call.Load(); g != seen {
			return g
		}
		if i&63 != 63 {
			continue
		}
		if time.Now().Before(deadline) {
			continue
		}
		// Park. A caller that bumps call after asleep is set finds it set and
		// wakes us; one that bumped it before is seen by the check below.
		h.asleep.Store(true)
		if g := p.call.Load(); g != seen {
			if !h.asleep.CompareAndSwap(true, false) {
				<-h.wake // the caller is sending a wake-up: take it
			}
			return g
		}
		<-h.wake
		deadline = time.Now().Add(linger)
	}
}

// spawn is Run on fresh goroutines.
func spawn(n, w int, f Func) {
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for wk := 1; wk < w; wk++ {
		go func() {
			defer wg.Done()
			f(wk, wk*n/w, (wk+1)*n/w)
		}()
	}
	f(0, 0, n/w)
	wg.Wait()
}

// Workers is the most workers a call on the pool runs on its own goroutines:
// its helpers plus the caller.
func (p *Pool) Workers() int { return len(p.helpers) + 1 }
