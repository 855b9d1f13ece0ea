package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"math"
	"sync"
	"time"
	"unsafe"
)

// Replica computes gradients on one batch; models.Net satisfies it. Each replica
// owns its parameters (Flat); the engine keeps them identical.
type Replica interface {
	// Step runs forward and backward on one batch, overwrites Grad, returns the mean loss.
	Step(x []float32, y []int32) (float64, error)
	// Grad is the gradient buffer Step writes.
	Grad() []float32
	// Flat is the parameter buffer.
	Flat() []float32
}

// Replica64 is a replica that computes its gradient in float64
// (model.precision float64; models.Net with it returns a non-nil Grad64). The
// engine then averages float64 gradients and rounds the mean once into
// replica 0's float32 Grad.
type Replica64 interface {
	Grad64() []float64
}

// Exchanger64 is an exchange that can average float64 gradients.
type Exchanger64 interface {
	Exchange64(grad []float64, step int) error
}

// Exchanger is one logical worker's gradient exchange: it replaces the worker's
// flat gradient with the mean over all workers (compressing on the way, and
// counting what it sends; compress.Exchange is the one the trainer uses).
type Exchanger interface {
	Exchange(grad []float32, step int) error
}

// Contributor is an Exchanger whose worker can take part in a step's exchange
// without receiving the mean: Contribute does what Exchange does to the
// exchange's own state and to the other workers, but may leave grad with
// unspecified contents. The engine reads only local worker 0's mean and lets
// the others contribute.
type Contributor interface {
	Contribute(grad []float32, step int) error
}

// Preparer is an Exchanger that can take a worker's gradient as soon as it is
// computed, while the replica still holds it: Prepare keeps what the step's
// exchange needs (copies, or work done on the spot), so that the engine need
// not copy the gradient into the worker's buffer, and the Exchange or
// Contribute of the same step that follows writes the mean without reading
// its grad argument. ok false declines: the engine copies the gradient and
// exchanges as usual.
type Preparer interface {
	Prepare(grad []float32, step int) (ok bool, err error)
}

// Engine maps the logical workers hosted by this process onto replicas. Worker w
// is computed by replica w mod R, always in the same order, so results do not
// depend on scheduling; each worker owns its gradient buffer and exchanges it
// through its own collective member. Only local worker 0's mean is read: the
// others contribute (Contributor) where their exchange can, and an exchange
// that takes the gradient from the replica itself (Preparer) spares the copy
// into the worker's buffer.
type Engine struct {
	replicas []Replica
	members  []Collective // one per local logical worker, in rank order
	exchange []Exchanger  // per local worker
	grads    [][]float32  // per local worker
	grads64  [][]float64  // per local worker, with float64 replicas (else nil)
	// The gradient's precision is chosen once, in NewEngine: these move a
	// replica's gradient into worker w's buffer (or hand it to the worker's
	// exchange), exchange it, and write worker 0's mean into replica 0's Grad.
	collect   func(w, r, step int) error
	collect32 func(w int, g []float32, step int) error // float32: collect from g
	exchangeW func(w, step int) error
	publish   func()
	losses    [][]float32 // per local worker, one value
	own       []float64   // per local worker, its own loss of the last step
	compute   []time.Duration
	// Per-step scratch, one slot per local worker, reused so that a step
	// allocates nothing here: each ready channel carries exactly one value a step.
	ready    []chan error
	errs     []error
	causes   []error   // the model's own failures (a NaN loss, say)
	prepErrs []error   // the exchanges' failures in Preparer.Prepare
	pipe     *pipeline // dist.pipeline 2 (EnablePipeline); nil otherwise
	// Backup workers (SetDropped): the local workers whose gradients the
	// next Step leaves out, and how many the whole run leaves out.
	dropped      []bool
	droppedTotal int
	fused        *fusion // Fuse; nil otherwise
}

// NewEngine builds an engine over the local members (ranks Rank()..Rank()+len-1 of
// a Size()-member collective) and replicas. exchange gives each local worker's
// gradient exchange.
func NewEngine(members []Collective, replicas []Replica, exchange []Exchanger) (*Engine, error) {
	if len(members) == 0 || len(replicas) == 0 {
		return nil, errors.New("dist: engine needs at least one worker and one replica")
	}
	if len(replicas) > len(members) {
		replicas = replicas[:len(members)] // a replica without a worker would idle
	}
	n := len(replicas[0].Grad())
	for i, r := range replicas {
		if len(r.Grad()) != n || len(r.Flat()) != n {
			return nil, fmt.Errorf("dist: replica %d has %d parameters, replica 0 has %d", i, len(r.Flat()), n)
		}
	}
	e := &Engine{replicas: replicas, members: members, compute: make([]time.Duration, len(members)), own: make([]float64, len(members)),
		ready: make([]chan error, len(members)), errs: make([]error, len(members)), causes: make([]error, len(members)),
		prepErrs: make([]error, len(members))}
	for w := range e.ready {
		e.ready[w] = make(chan error, 1)
	}
	if len(exchange) != len(members) {
		return nil, fmt.Errorf("dist: %d exchanges for %d workers", len(exchange), len(members))
	}
	e.exchange = exchange
	for range members {
		e.losses = append(e.losses, make([]float32, 1))
	}
	if err := e.choosePrecision(n); err != nil {
		return nil, err
	}
	e.SyncReplicas()
	return e, nil
}

// choosePrecision sets the engine up for float32 gradients, or for float64
// ones when the replicas compute them: then all replicas must, and every
// exchange must take them.
func (e *Engine) choosePrecision(n int) error {
	var wide []Replica64
	for _, r := range e.replicas {
		if r64, ok := r.(Replica64); ok && r64.Grad64() != nil {
			if len(r64.Grad64()) != n {
				return fmt.Errorf("dist: float64 gradient of %d values, the model has %d", len(r64.Grad64()), n)
			}
			wide = append(wide, r64)
		}
	}
	if len(wide) == 0 {
		for range e.members {
			e.grads = append(e.grads, make([]float32, n))
		}
		prep := make([]Preparer, len(e.exchange))
		for w, x := range e.exchange {
			prep[w], _ = x.(Preparer)
		}
		e.collect32 = func(w int, g []float32, step int) error {
			if e.dropped != nil && e.dropped[w] {
				clear(e.grads[w]) // it arrived too late: it adds nothing
				return nil
			}
			if prep[w] != nil {
				if ok, err := prep[w].Prepare(g, step); ok || err != nil {
					return err
				}
			}
			copy(e.grads[w], g)
			return nil
		}
		e.collect = func(w, r, step int) error { return e.collect32(w, e.replicas[r].Grad(), step) }
		// Only worker 0's mean is published: the others only contribute
		// where their exchanges can.
		xs := make([]func([]float32, int) error, len(e.exchange))
		for w, x := range e.exchange {
			xs[w] = x.Exchange
			if c, ok := x.(Contributor); ok && w > 0 {
				xs[w] = c.Contribute
			}
		}
		e.exchangeW = func(w, step int) error { return xs[w](e.grads[w], step) }
		e.publish = func() {
			g := e.replicas[0].Grad()
			copy(g, e.grads[0])
			if e.droppedTotal > 0 {
				// The exchange divided the sum by N; it holds N-b gradients.
				scale := float32(e.Workers()) / float32(e.Workers()-e.droppedTotal)
				for i := range g {
					g[i] *= scale
				}
			}
		}
		return nil
	}
	if len(wide) != len(e.replicas) {
		return fmt.Errorf("dist: %d of %d replicas compute float64 gradients: all or none must", len(wide), len(e.replicas))
	}
	x64 := make([]Exchanger64, len(e.exchange))
	for w, x := range e.exchange {
		var ok bool
		if x64[w], ok = x.(Exchanger64); !ok {
			return fmt.Errorf("dist: worker %d's exchange cannot average float64 gradients", e.members[w].Rank())
		}
		e.grads64 = append(e.grads64, make([]float64, n))
	}
	e.collect = func(w, r, _ int) error { copy(e.grads64[w], wide[r].Grad64()); return nil }
	e.exchangeW = func(w, step int) error { return x64[w].Exchange64(e.grads64[w], step) }
	e.publish = func() {
		// The mean is rounded to float32 once, here.
		g := e.replicas[0].Grad()
		for i, v := range e.grads64[0] {
			g[i] = float32(v)
		}
	}
	return nil
}

// Workers is the number of logical workers in the whole run.
func (e *Engine) Workers() int { return e.members[0].Size() }

// LocalWorkers is the number of logical workers this process hosts.
func (e *Engine) LocalWorkers() int { return len(e.members) }

// FirstWorker is the global index of this process's first logical worker.
func (e *Engine) FirstWorker() int { return e.members[0].Rank() }

// Replicas are the replicas in use; replica 0 holds the parameters the optimizer updates.
func (e *Engine) Replicas() []Replica { return e.replicas }

// Step computes every local worker's gradient on its batch (batch(w) returns the
// data of local worker w), exchanges the gradients (step is the global step, for
// the compressors' schedules) and writes their mean into replica 0's Grad. It
// returns the mean loss over all workers.
func (e *Engine) Step(step int, batch func(w int) ([]float32, []int32)) (float64, error) {
	if e.fusedStep(step) {
		if e.fused.groupers != nil {
			return e.exchangeStep(step, func(r int) { e.computeGrouped(r, step, batch) })
		}
		return e.stepFused(step, batch)
	}
	if f := e.fused; f != nil && f.mean != nil {
		// Worker by worker after steps on the mean: each worker starts from
		// the mean state, and afterwards their states differ.
		if err := e.SyncState(); err != nil {
			return 0, err
		}
		f.leaderMean = false
	}
	return e.exchangeStep(step, func(r int) { e.computeOneByOne(r, step, batch) })
}

// computeOneByOne computes replica r's workers one after the other, handing
// each gradient to its worker's exchange as soon as it is ready.
func (e *Engine) computeOneByOne(r, step int, batch func(w int) ([]float32, []int32)) {
	nw, nr := len(e.members), len(e.replicas)
	rep := e.replicas[r]
	for w := r; w < nw; w += nr {
		err := e.computeWorker(rep, w, batch)
		if err == nil {
			// The exchange's failure, not the model's: it goes
			// with the other exchange errors.
			e.prepErrs[w] = e.collect(w, r, step)
		}
		e.ready[w] <- err
		if err != nil {
			e.causes[w] = fmt.Errorf("worker %d: %w", e.members[w].Rank(), err)
			// Later workers of this replica never get a gradient: fail them too.
			for w2 := w + nr; w2 < nw; w2 += nr {
				e.ready[w2] <- fmt.Errorf("worker %d: not computed after worker %d failed", e.members[w2].Rank(), e.members[w].Rank())
			}
			return
		}
	}
}

// exchangeStep runs compute(r) for every replica r, each on its goroutine,
// and exchanges each worker's gradient as compute hands it over (through
// e.ready, one value per worker), then publishes the mean.
func (e *Engine) exchangeStep(step int, compute func(r int)) (float64, error) {
	nw, nr := len(e.members), len(e.replicas)
	// causes holds the model's own failures by worker; the other workers'
	// errors are consequences (aborted collectives, gradients never computed)
	// and would bury the cause in the message.
	ready, errs, causes := e.ready, e.errs, e.causes
	clear(errs)
	clear(causes)
	clear(e.prepErrs)
	var wg sync.WaitGroup
	for r := 0; r < nr; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			compute(r)
		}(r)
	}
	for w := 0; w < nw; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := <-ready[w]; err != nil {
				errs[w] = err
				e.abort(w, err)
				return
			}
			if err := e.prepErrs[w]; err != nil {
				errs[w] = err
				e.abort(w, err)
				return
			}
			if err := e.exchangeW(w, step); err != nil {
				errs[w] = err
				e.abort(w, err)
				return
			}
			errs[w] = e.members[w].AllReduce(e.losses[w])
		}(w)
	}
	wg.Wait()
	if err := errors.Join(causes...); err != nil {
		return 0, err
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	e.publish()
	return float64(e.losses[0][0] / float32(e.Workers())), nil
}

// computeWorker runs local worker w's forward and backward on replica rep,
// timing it and keeping its loss for the step's loss sum.
func (e *Engine) computeWorker(rep Replica, w int, batch func(w int) ([]float32, []int32)) error {
	x, y := batch(w)
	t0 := time.Now()
	loss, err := rep.Step(x, y)
	e.compute[w] = time.Since(t0)
	if err != nil {
		return err
	}
	e.losses[w][0] = float32(loss)
	e.own[w] = loss
	return nil
}

// SetDropped makes the following Steps leave out the gradients of the local
// workers marked in dropped (backup workers: a synchronous step that takes
// the first N-b gradients to arrive), total being the number left out over
// all processes: their buffers contribute zeros, and the mean is that of the
// N-total others. Every process must mark the same workers. nil restores
// full steps. Only for float32 gradients and exchanges that take each
// worker's gradient whole (no compressor: a dropped worker would still
// change its residuals).
func (e *Engine) SetDropped(dropped []bool, total int) error {
	if dropped == nil {
		e.dropped, e.droppedTotal = nil, 0
		return nil
	}
	if e.grads64 != nil {
		return errors.New("dist: backup workers need float32 gradients")
	}
	if len(dropped) != len(e.members) {
		return fmt.Errorf("dist: %d drop marks for %d local workers", len(dropped), len(e.members))
	}
	if total < 0 || total >= e.Workers() {
		return fmt.Errorf("dist: %d of %d workers left out, expected at least one kept", total, e.Workers())
	}
	e.dropped, e.droppedTotal = dropped, total
	return nil
}

// WorkerLosses returns the loss each logical worker of the run computed in the
// last step, in global rank order (a collective: every process calls it), so that
// a diverged step can name its worker.
func (e *Engine) WorkerLosses() ([]float64, error) {
	all, err := e.GatherAll(func(w int) []byte {
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(e.own[w]))
	})
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(all))
	for i, p := range all {
		if len(p) != 8 {
			return nil, fmt.Errorf("dist: worker %d sent a %d-byte loss, expected 8", i, len(p))
		}
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
	return out, nil
}

// abort tells the other members that worker w failed, when the backend supports it.
func (e *Engine) abort(w int, err error) {
	if a, ok := e.members[w].(Aborter); ok {
		a.Abort(err)
	}
}

// SyncReplicas copies replica 0's parameters into every other replica (after the
// optimizer step, which runs on replica 0 only).
func (e *Engine) SyncReplicas() {
	src := e.replicas[0].Flat()
	for _, r := range e.replicas[1:] {
		copy(r.Flat(), src)
	}
}

// AverageBuffers replaces each buffer set with the mean over all replicas and all
// processes: bufs[r] lists replica r's non-learnable buffers (BatchNorm running
// statistics) in the same order. Every process must call it at the same time.
func (e *Engine) AverageBuffers(bufs [][][]float32) error {
	if len(bufs) != len(e.replicas) {
		return fmt.Errorf("dist: %d buffer sets for %d replicas", len(bufs), len(e.replicas))
	}
	var total int
	for _, b := range bufs[0] {
		total += len(b)
	}
	if total == 0 {
		return nil
	}
	// Each local worker contributes its replica's buffers, so the all-reduce over
	// all workers weights every replica by the workers it served.
	sums := make([][]float32, len(e.members))
	for w := range sums {
		sums[w] = make([]float32, 0, total)
		for _, b := range bufs[w%len(e.replicas)] {
			sums[w] = append(sums[w], b...)
		}
	}
	if err := e.onEveryWorker(func(w int) error { return e.members[w].AllReduce(sums[w]) }); err != nil {
		return err
	}
	inv := 1 / float32(e.Workers())
	for _, set := range bufs {
		off := 0
		for _, b := range set {
			for i := range b {
				b[i] = sums[0][off+i] * inv
			}
			off += len(b)
		}
	}
	return nil
}

// CheckAgreement verifies that every replica of every process holds the same
// parameters: replicas are compared within the process, and a checksum of
// replica 0 across processes. Disagreement is an error naming the worker.
func (e *Engine) CheckAgreement(step int) error {
	ref := e.replicas[0].Flat()
	for i, r := range e.replicas[1:] {
		for k, v := range r.Flat() {
			if math.Float32bits(v) != math.Float32bits(ref[k]) {
				return fmt.Errorf("dist: step %d: replica %d disagrees with replica 0 at parameter %d (%v != %v)", step, i+1, k, v, ref[k])
			}
		}
	}
	sum := binary.LittleEndian.AppendUint64(nil, checksum(ref))
	all, err := e.GatherAll(func(int) []byte { return sum })
	if err != nil {
		return err
	}
	for rank, p := range all {
		if string(p) != string(all[0]) {
			return fmt.Errorf("dist: step %d: parameters of worker %d differ from worker 0 (checksums %x, %x): replicas drifted apart", step, rank, p, all[0])
		}
	}
	return nil
}

// checksum is a CRC-64 of the parameter bits.
func checksum(v []float32) uint64 {
	if len(v) == 0 {
		return 0
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	return crc64.Checksum(b, crcTable)
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// onEveryWorker runs f for every local worker concurrently (each worker drives
// its own collective member) and joins their errors.
func (e *Engine) onEveryWorker(f func(w int) error) error {
	errs := make([]error, len(e.members))
	var wg sync.WaitGroup
	for w := range e.members {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs[w] = f(w)
		}(w)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// GatherAll collects one payload per logical worker of the run (payload(w) for
// local worker w) on every process, in global rank order. Every process must
// call it at the same time.
func (e *Engine) GatherAll(payload func(w int) []byte) ([][]byte, error) {
	all := make([][][]byte, len(e.members))
	err := e.onEveryWorker(func(w int) (err error) {
		all[w], err = e.members[w].AllGather(payload(w))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(all[0]))
	for i, p := range all[0] {
		out[i] = append([]byte(nil), p...) // the collective's buffers are reused
	}
	return out, nil
}

// ComputeSeconds is the mean gradient computation time of a local worker in the
// last step run worker by worker (with Fuse, fused steps leave it as the last
// sampled step set it).
func (e *Engine) ComputeSeconds() float64 {
	var s time.Duration
	for _, d := range e.compute {
		s += d
	}
	return s.Seconds() / float64(len(e.compute))
}
