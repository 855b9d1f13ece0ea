package dist

import (
	"errors"
	"fmt"
	"sync"
)

// Width-2 pipelining (dist.pipeline 2): the gradients of step t are exchanged
// while the replicas compute step t+1, and their mean is applied one step
// late. With C the compute time and X the exchange time of a step, a step
// takes max(C, X) instead of C + X. The weights follow
//
//	w_{t+1} = w_t - lr * g(w_{t-1}),   w_{-1} = w_0,
//
// because step t+1 starts from weights that do not contain the update of step
// t yet (the first two steps of a pipeline both compute at w_0). The pipeline
// fills again after every Drain, which applies the gradient still in flight.

// pipeline is the engine's state for StepPipelined and Drain.
type pipeline struct {
	// next holds each local worker's gradient of the step being computed; the
	// buffers swap with the engine's grads, which the exchange of the step in
	// flight reads, once both are done.
	next     [][]float32
	inflight bool // grads hold a computed, not yet exchanged gradient of step
	step     int
}

// EnablePipeline prepares the engine for StepPipelined: one more gradient
// buffer per local worker. Engines with float64 gradients are refused.
func (e *Engine) EnablePipeline() error {
	if e.grads64 != nil {
		return errors.New("dist: pipelining needs float32 gradients (model.precision float32)")
	}
	if e.pipe != nil {
		return nil
	}
	e.fused = nil // each worker's gradient is exchanged on its own
	p := &pipeline{next: make([][]float32, len(e.members))}
	for w := range p.next {
		p.next[w] = make([]float32, len(e.grads[w]))
	}
	e.pipe = p
	return nil
}

// InFlight reports whether a computed gradient waits for its exchange (the
// next StepPipelined or Drain applies it).
func (e *Engine) InFlight() bool { return e.pipe != nil && e.pipe.inflight }

// StepPipelined computes every local worker's gradient on its batch (batch(w)
// as in Step) while the gradients of the previous call are exchanged, then
// writes their mean into replica 0's Grad: applied is true when there was a
// gradient in flight, false on the first call of a pipeline (after
// EnablePipeline or Drain), when replica 0's Grad is left as it is. The
// returned loss is the mean over all workers of this step's losses. The step
// numbers given to the exchange are those of the step each gradient was
// computed in. Every process must call it at the same time.
func (e *Engine) StepPipelined(step int, batch func(w int) ([]float32, []int32)) (loss float64, applied bool, err error) {
	p := e.pipe
	if p == nil {
		return 0, false, errors.New("dist: StepPipelined without EnablePipeline")
	}
	nw, nr := len(e.members), len(e.replicas)
	causes, errs := e.causes, e.errs
	clear(causes)
	clear(errs)
	var wg sync.WaitGroup
	for r := 0; r < nr; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rep := e.replicas[r]
			for w := r; w < nw; w += nr {
				if err := e.computeWorker(rep, w, batch); err != nil {
					causes[w] = fmt.Errorf("worker %d: %w", e.members[w].Rank(), err)
					return
				}
				// The replica computes the next worker into the same Grad.
				copy(p.next[w], rep.Grad())
			}
		}(r)
	}
	if p.inflight {
		for w := 0; w < nw; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				if err := e.exchangeW(w, p.step); err != nil {
					errs[w] = err
					e.abort(w, err)
				}
			}(w)
		}
	}
	wg.Wait()
	if err := errors.Join(causes...); err != nil {
		// The other workers' exchanges and loss sums must not wait for this
		// process: fail the group.
		for w := range e.members {
			e.abort(w, err)
		}
		return 0, false, err
	}
	if err := errors.Join(errs...); err != nil {
		return 0, false, err
	}
	if err := e.onEveryWorker(func(w int) error { return e.members[w].AllReduce(e.losses[w]) }); err != nil {
		return 0, false, err
	}
	applied = p.inflight
	if applied {
		e.publish()
	}
	e.grads, p.next = p.next, e.grads
	p.inflight, p.step = true, step
	return float64(e.losses[0][0] / float32(e.Workers())), applied, nil
}

// Drain exchanges the gradient in flight, if any, and writes its mean into
// replica 0's Grad (applied true); the next StepPipelined starts a new
// pipeline. Every process must call it at the same time.
func (e *Engine) Drain() (applied bool, err error) {
	p := e.pipe
	if p == nil || !p.inflight {
		return false, nil
	}
	if err := e.onEveryWorker(func(w int) error {
		err := e.exchangeW(w, p.step)
		if err != nil {
			e.abort(w, err)
		}
		return err
	}); err != nil {
		return false, err
	}
	e.publish()
	p.inflight = false
	return true, nil
}
