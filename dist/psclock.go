package dist

import (
	"container/heap"
	"fmt"
)

// PSClock replays a parameter server's schedule deterministically: the order
// in which N workers' gradients reach the server and which version of the
// weights each was computed on, from the workers' step durations. Nothing
// races: training applies the events in the order PSClock gives, never in the
// order goroutines happen to finish, so a seed decides a run.
//
// A worker pulls the current version when it starts a step and pushes its
// gradient when the step ends, duration(worker, k) later for its k-th step.
// Each push is one update (a new version). A worker whose step ends starts
// its next one at once, unless the staleness bound holds it back: with bound
// s >= 0 (stale synchronous parallel, Ho et al. 2013) a worker that has
// finished c steps may start step c only when every worker has finished at
// least c - s steps; s < 0 is fully asynchronous. At equal times pushes come
// before pulls, and lower worker ids first, so a worker that finishes and
// restarts at once reads its own update.
type PSClock struct {
	workers   int
	staleness int
	duration  func(worker, k int) float64
	now       float64
	version   int
	done      []int // steps finished per worker
	started   []int // steps started per worker
	read      []int // version the running step pulled
	running   []bool
	blocked   []bool // waiting for the slowest worker (bound s)
	budget    int    // steps that may still start (a negative budget: no limit)
	queue     psQueue
	pending   []PSEvent
}

// PSEvent is one event of the schedule.
type PSEvent struct {
	Kind   PSEventKind
	Worker int
	Step   int     // the worker's step index (0-based)
	Time   float64 // simulated time
	// Read is the version the step pulled at its start. For a push, Version
	// is the version the update creates (Read+Staleness+1) and Staleness the
	// updates applied by others since the pull.
	Read, Version, Staleness int
}

// PSEventKind tells pulls (a step starts) from pushes (its gradient arrives).
type PSEventKind int

const (
	PSPull PSEventKind = iota
	PSPush
)

func (k PSEventKind) String() string {
	if k == PSPull {
		return "pull"
	}
	return "push"
}

// NewPSClock starts every worker's first step at time 0 on version 0.
// duration must be positive; budget caps the steps started over all workers
// (the batches an epoch has), negative for no cap.
func NewPSClock(workers, staleness, budget int, duration func(worker, k int) float64) (*PSClock, error) {
	if workers < 1 {
		return nil, fmt.Errorf("dist: parameter server with %d workers, expected >= 1", workers)
	}
	c := &PSClock{workers: workers, staleness: staleness, duration: duration, budget: budget,
		done: make([]int, workers), started: make([]int, workers), read: make([]int, workers),
		running: make([]bool, workers), blocked: make([]bool, workers)}
	for w := range workers {
		if err := c.start(w); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Next returns the next event in simulated time, and false when no worker
// runs any more (the budget is spent and every gradient has arrived).
func (c *PSClock) Next() (PSEvent, bool, error) {
	if len(c.pending) > 0 {
		e := c.pending[0]
		c.pending = c.pending[1:]
		return e, true, nil
	}
	if c.queue.Len() == 0 {
		return PSEvent{}, false, nil
	}
	// Every push due now, in worker order; then the pulls they allow.
	now := c.queue[0].time
	var pushes []PSEvent
	for c.queue.Len() > 0 && c.queue[0].time == now {
		f := heap.Pop(&c.queue).(psFinish)
		w := f.worker
		e := PSEvent{Kind: PSPush, Worker: w, Step: c.done[w], Time: now, Read: c.read[w]}
		e.Staleness = c.version - c.read[w]
		c.version++
		e.Version = c.version
		c.done[w]++
		c.running[w] = false
		pushes = append(pushes, e)
	}
	c.now = now
	c.pending = append(c.pending, pushes...)
	for w := range c.workers {
		if !c.running[w] {
			if err := c.start(w); err != nil {
				return PSEvent{}, false, err
			}
		}
	}
	e := c.pending[0]
	c.pending = c.pending[1:]
	return e, true, nil
}

// start begins worker w's next step now if the budget and the staleness
// bound allow it, queueing its pull event.
func (c *PSClock) start(w int) error {
	if c.budget == 0 {
		return nil
	}
	if c.staleness >= 0 {
		slowest := c.done[0]
		for _, d := range c.done[1:] {
			slowest = min(slowest, d)
		}
		if slowest < c.done[w]-c.staleness {
			c.blocked[w] = true
			return nil
		}
	}
	c.blocked[w] = false
	k := c.started[w]
	d := c.duration(w, k)
	if !(d > 0) {
		return fmt.Errorf("dist: worker %d step %d lasts %v, expected a positive duration", w, k, d)
	}
	c.started[w]++
	if c.budget > 0 {
		c.budget--
	}
	c.read[w] = c.version
	c.running[w] = true
	c.pending = append(c.pending, PSEvent{Kind: PSPull, Worker: w, Step: k, Time: c.now, Read: c.version})
	heap.Push(&c.queue, psFinish{time: c.now + d, worker: w})
	return nil
}

// psFinish is a step's end; the queue orders by time, then worker id.
type psFinish struct {
	time   float64
	worker int
}

type psQueue []psFinish

func (q psQueue) Len() int { return len(q) }
func (q psQueue) Less(i, j int) bool {
	return q[i].time < q[j].time || q[i].time == q[j].time && q[i].worker < q[j].worker
}
func (q psQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *psQueue) Push(x any)   { *q = append(*q, x.(psFinish)) }
func (q *psQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
