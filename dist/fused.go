package dist

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gradwire/gradwire/internal/par"
)

// Fuser is a replica that can compute, in one pass, the mean gradient over
// several workers' batches laid end to end (models.Net for a model whose
// examples do not interact within a batch).
type Fuser interface {
	Fusable() bool
	StepFused(x []float32, y []int32, k int) (float64, error)
}

// LinearExchanger is an exchange that is a plain float32 mean of whole
// gradients (compress.Exchange with nothing compressed): the mean may then be
// formed from partial sums, and Book counts the step's traffic as the
// exchange would have.
type LinearExchanger interface {
	Linear() bool
	Book(step int) error
}

// fuseSample: every fuseSample-th step runs worker by worker, so that
// ComputeSeconds stays a measured worker-batch time for the time model rather
// than a share of a fused pass (which it is only until the first such step).
const fuseSample = 25

// fusion is the state of fused steps: each replica computes the workers it
// hosts as one batch, and the mean over workers is the mean over replicas.
type fusion struct {
	fusers  []Fuser
	linear  []LinearExchanger
	x       [][]float32 // per replica: its workers' inputs end to end
	y       [][]int32
	loss    []float64
	err     []error
	sampled bool // a worker-by-worker step has set compute
	took    []time.Duration
}

// Fuse makes the following Steps compute each replica's workers as one batch
// where that gives the same mean gradient: every worker of the run is in this
// process, the replicas host the same number of workers, every replica is a
// Fusable Fuser and every exchange a Linear LinearExchanger (compress.name
// none, float32 on the wire). Each replica then runs one forward and backward
// over its k workers' batches instead of k, the exchange becomes the mean of
// the replicas' gradients, and each worker's exchange books its traffic as
// before. The result differs from worker-by-worker steps by float32 rounding
// only; a worker's loss (WorkerLosses) is its replica's mean. Steps with
// dropped workers, and every fuseSample-th step, still run worker by worker.
// Fuse returns why it cannot fuse, leaving the engine as it was.
func (e *Engine) Fuse() error {
	nw, nr := len(e.members), len(e.replicas)
	switch {
	case e.grads64 != nil:
		return errors.New("dist: fused steps: the replicas compute float64 gradients")
	case e.pipe != nil:
		return errors.New("dist: fused steps: dist.pipeline 2 exchanges each worker's gradient on its own")
	case e.members[0].Size() != nw:
		return fmt.Errorf("dist: fused steps: this process hosts %d of %d workers", nw, e.members[0].Size())
	case nw == nr:
		return errors.New("dist: fused steps: one worker per replica, nothing to fuse")
	case nw%nr != 0:
		return fmt.Errorf("dist: fused steps: %d workers do not divide evenly over %d replicas", nw, nr)
	}
	f := &fusion{x: make([][]float32, nr), y: make([][]int32, nr), loss: make([]float64, nr), err: make([]error, nr), took: make([]time.Duration, nr)}
	for r, rep := range e.replicas {
		fu, ok := rep.(Fuser)
		if !ok || !fu.Fusable() {
			return fmt.Errorf("dist: fused steps: replica %d cannot compute several batches as one (its examples interact, as with BatchNorm)", r)
		}
		f.fusers = append(f.fusers, fu)
	}
	for w, x := range e.exchange {
		l, ok := x.(LinearExchanger)
		if !ok || !l.Linear() {
			return fmt.Errorf("dist: fused steps: worker %d's exchange is not a plain float32 mean", e.members[w].Rank())
		}
		f.linear = append(f.linear, l)
	}
	e.fused = f
	return nil
}

// Fused reports whether Fuse enabled fused steps.
func (e *Engine) Fused() bool { return e.fused != nil }

// stepFused is Step with each replica's workers computed as one batch.
func (e *Engine) stepFused(step int, batch func(w int) ([]float32, []int32)) (float64, error) {
	f := e.fused
	nw, nr := len(e.members), len(e.replicas)
	k := nw / nr
	var wg sync.WaitGroup
	for r := range nr {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			xs, ys := f.x[r][:0], f.y[r][:0]
			for w := r; w < nw; w += nr {
				x, y := batch(w)
				xs, ys = append(xs, x...), append(ys, y...)
			}
			f.x[r], f.y[r] = xs, ys
			t0 := time.Now()
			f.loss[r], f.err[r] = f.fusers[r].StepFused(xs, ys, k)
			f.took[r] = time.Since(t0)
		}(r)
	}
	wg.Wait()
	var errs []error
	for r, err := range f.err {
		if err != nil {
			var ranks []int
			for w := r; w < nw; w += nr {
				ranks = append(ranks, e.members[w].Rank())
			}
			errs = append(errs, fmt.Errorf("workers %v (computed as one batch): %w", ranks, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	// The mean over workers: each replica's gradient is the mean over its k
	// workers, so the mean over the replicas, summed in replica order.
	dst := e.replicas[0].Grad()
	srcs := make([][]float32, 0, nr-1)
	for _, rep := range e.replicas[1:] {
		srcs = append(srcs, rep.Grad())
	}
	inv := 1 / float32(nr)
	n := len(dst)
	par.Default().Run(n, par.Default().Workers(), func(_, lo, hi int) { meanSpan(dst, srcs, inv, lo, hi) })
	var mean float64
	for r := range nr {
		mean += f.loss[r]
	}
	mean /= float64(nr)
	for w := range nw {
		if !f.sampled {
			// Until a step has run worker by worker: a share of the pass.
			e.compute[w] = f.took[w%nr] / time.Duration(k)
		}
		e.own[w] = f.loss[w%nr]
		if err := f.linear[w].Book(step); err != nil {
			return 0, err
		}
	}
	return mean, nil
}

// meanSpan writes (dst + srcs[0] + srcs[1] + ...) * inv over [lo, hi) into dst,
// adding in that order for every element.
func meanSpan(dst []float32, srcs [][]float32, inv float32, lo, hi int) {
	for b := lo; b < hi; b += sumBlock {
		end := min(b+sumBlock, hi)
		d := dst[b:end]
		j := 0
		for ; j+4 <= len(srcs); j += 4 {
			add4(d, srcs[j][b:end], srcs[j+1][b:end], srcs[j+2][b:end], srcs[j+3][b:end])
		}
		switch len(srcs) - j {
		case 3:
			add3(d, srcs[j][b:end], srcs[j+1][b:end], srcs[j+2][b:end])
		case 2:
			add2(d, srcs[j][b:end], srcs[j+1][b:end])
		case 1:
			add1(d, srcs[j][b:end])
		}
		scale(d, inv)
	}
}

// fusedStep reports whether this step runs fused: which steps do depends on
// the step number alone, so that a resumed run repeats an uninterrupted one.
func (e *Engine) fusedStep(step int) bool {
	if e.fused == nil || e.dropped != nil {
		return false
	}
	if step%fuseSample == 0 {
		e.fused.sampled = true
		return false
	}
	return true
}
