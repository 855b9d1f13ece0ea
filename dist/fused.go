package dist

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gradwire/gradwire/internal/par"
	"github.com/gradwire/gradwire/internal/vec"
)

// Fuser is a replica that can compute, in one pass, the mean gradient over
// several workers' batches laid end to end (models.Net for a model whose
// examples do not interact within a batch).
type Fuser interface {
	Fusable() bool
	StepFused(x []float32, y []int32, k int) (float64, error)
}

// Grouper is a replica that can compute, in one pass, each of several
// workers' gradients on their batches laid end to end (models.Net for a model
// whose examples do not interact within a batch and whose layers split their
// parameter gradients by batch).
type Grouper interface {
	Groupable() bool
	// StepGrouped computes batch i's gradient into GroupGrad(i) and its
	// mean loss into losses[i], for k batches in x and y.
	StepGrouped(x []float32, y []int32, k int, losses []float64) (float64, error)
	GroupGrad(i int) []float32
}

// LinearExchanger is an exchange that is a plain float32 mean of whole
// gradients (compress.Exchange with nothing compressed): the mean may then be
// formed from partial sums, and Book counts the step's traffic as the
// exchange would have.
type LinearExchanger interface {
	Linear() bool
	Book(step int) error
}

// MeanExchanger is an exchange whose mean over the workers depends on their
// gradients and states only through the mean gradient and the mean state
// (compress.Exchange with PowerSGD: every product is linear in the
// gradient). One exchange then stands for all, run once on the mean.
type MeanExchanger interface {
	MeanLinear() bool
	// ExchangeMean replaces grad, the mean of every worker's gradient, with
	// the exchange's mean; the exchange must hold the workers' mean state
	// and holds it afterwards. It books its own traffic and the same for
	// others. timed: its computation counts as one worker's for the time
	// model (on one core), on the steps that time each worker.
	ExchangeMean(grad []float32, step int, others []MeanExchanger, timed bool) error
	// SetMeanState sets the exchange's state to the mean of of's states.
	SetMeanState(of []MeanExchanger) error
}

// fuseSample: every fuseSample-th step runs worker by worker, so that
// ComputeSeconds stays a measured worker-batch time for the time model rather
// than a share of a fused pass (which it is only until the first such step).
const fuseSample = 25

// fusion is the state of fused steps: each replica computes the workers it
// hosts as one batch, and the mean over workers is the mean over replicas.
type fusion struct {
	fusers []Fuser
	linear []LinearExchanger // dense exchanges; nil with mean
	// With mean exchanges (each worker's is MeanExchanger) worker 0's
	// exchange runs once on the mean gradient. leaderMean: its state is the
	// workers' mean state; stale: the other workers' states lag behind it
	// (SyncState brings them level).
	mean       []MeanExchanger
	leaderMean bool
	stale      bool
	// With per-worker exchanges (neither of the above: DGC, top-k, ...)
	// each replica computes its workers' gradients in one grouped pass.
	groupers  []Grouper
	groupLoss [][]float64 // per replica: its workers' losses
	acc       [][]float32 // per replica: its workers' gradient sum (sampled steps)
	x         [][]float32 // per replica: its workers' inputs end to end
	y         [][]int32
	loss      []float64
	err       []error
	sampled   bool // a worker-by-worker step has set compute
	took      []time.Duration
}

// Fuse makes the following Steps compute each replica's workers as one batch
// where that gives the same mean gradient: every worker of the run is in this
// process, the replicas host the same number of workers, every replica is a
// Fusable Fuser, and either every exchange is a Linear LinearExchanger
// (compress.name none, float32 on the wire) or every exchange is a
// MeanLinear MeanExchanger (PowerSGD). Each replica then runs one forward and
// backward over its k workers' batches instead of k. With linear exchanges
// the exchange becomes the mean of the replicas' gradients, and each
// worker's exchange books its traffic as before; every fuseSample-th step
// still runs worker by worker. With mean exchanges worker 0's exchange runs
// once on that mean, holding the workers' mean state, and books every
// worker's traffic; every fuseSample-th step computes the workers one by one
// (for their compute times) and exchanges their mean the same way. The
// result differs from worker-by-worker steps by float32 rounding only; a
// worker's loss (WorkerLosses) is its replica's mean. With any other
// exchanges (each needs its worker's own gradient: DGC, top-k, ...) every
// replica must be a Groupable Grouper: it then computes each of its workers'
// gradients in one pass over their batches (each its own gradient and loss,
// as worker by worker, up to float32 rounding), and hands them to the
// workers' exchanges as before; every fuseSample-th step runs worker by
// worker. Steps with dropped workers run worker by worker. Fuse returns why
// it cannot fuse, leaving the engine as it was.
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
	var fusers []Fuser
	for r, rep := range e.replicas {
		fu, ok := rep.(Fuser)
		if !ok || !fu.Fusable() {
			return fmt.Errorf("dist: fused steps: replica %d cannot compute several batches as one (its examples interact, as with BatchNorm)", r)
		}
		fusers = append(fusers, fu)
	}
	var linear []LinearExchanger
	var mean []MeanExchanger
	for w, x := range e.exchange {
		if l, ok := x.(LinearExchanger); ok && l.Linear() {
			linear = append(linear, l)
			continue
		}
		if m, ok := x.(MeanExchanger); ok && m.MeanLinear() {
			mean = append(mean, m)
			continue
		}
		// This worker's exchange needs its own gradient: grouped passes.
		for r, rep := range e.replicas {
			g, ok := rep.(Grouper)
			if !ok || !g.Groupable() {
				return fmt.Errorf("dist: fused steps: worker %d's exchange needs its own gradient (neither a plain float32 mean nor a function of the mean gradient), and replica %d cannot compute several batches' gradients in one pass", e.members[w].Rank(), r)
			}
			f.groupers = append(f.groupers, g)
			f.groupLoss = append(f.groupLoss, make([]float64, nw/nr))
		}
		e.fused = f
		return nil
	}
	f.fusers, f.linear, f.mean = fusers, linear, mean
	if len(f.linear) != 0 && len(f.mean) != 0 {
		return errors.New("dist: fused steps: the workers' exchanges differ in kind")
	}
	if f.mean != nil {
		n := len(e.replicas[0].Grad())
		for range nr {
			f.acc = append(f.acc, make([]float32, n))
		}
	}
	e.fused = f
	return nil
}

// SyncState brings every worker's exchange state level with what worker-by-
// worker steps would have left, up to float32 rounding, after fused steps
// that ran one exchange on the mean (MeanExchanger): each worker takes the
// mean state. Call it before reading the exchanges' states (checkpoints); it
// is a no-op otherwise.
func (e *Engine) SyncState() error {
	f := e.fused
	if f == nil || !f.stale {
		return nil
	}
	for w, m := range f.mean[1:] {
		if err := m.SetMeanState(f.mean[:1]); err != nil {
			return fmt.Errorf("dist: worker %d: %w", e.members[w+1].Rank(), err)
		}
	}
	f.stale = false
	return nil
}

// StateRestored tells the engine that the exchanges' states were set from
// outside (a checkpoint): the next fused step takes their mean afresh.
func (e *Engine) StateRestored() {
	if e.fused != nil {
		e.fused.leaderMean, e.fused.stale = false, false
	}
}

// Unfuse undoes Fuse before the first Step: the following Steps run worker
// by worker.
func (e *Engine) Unfuse() { e.fused = nil }

// Fused reports whether Fuse enabled fused steps.
func (e *Engine) Fused() bool { return e.fused != nil }

// Passes says how each replica computes the workers it hosts: "one by one",
// "fused" (one batch, one mean gradient) or "grouped" (one pass, each
// worker's own gradient); the last two still run every fuseSample-th step
// one by one.
func (e *Engine) Passes() string {
	switch {
	case e.fused == nil:
		return "one by one"
	case e.fused.groupers != nil:
		return "grouped"
	}
	return "fused"
}

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
			xs, ys := e.gather(r, batch)
			if f.mean != nil && step%fuseSample == 0 {
				f.loss[r], f.err[r] = e.stepSampled(r, xs, ys, k)
				return
			}
			t0 := time.Now()
			f.loss[r], f.err[r] = f.fusers[r].StepFused(xs, ys, k)
			f.took[r] = time.Since(t0)
		}(r)
	}
	wg.Wait()
	var errs []error
	for r, err := range f.err {
		if err != nil {
			errs = append(errs, fmt.Errorf("workers %v (computed as one batch): %w", e.replicaRanks(r), err))
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
	sampled := f.mean != nil && step%fuseSample == 0
	if sampled {
		f.sampled = true
	}
	for w := range nw {
		if !f.sampled {
			// Until a step has run worker by worker: a share of the pass.
			e.compute[w] = f.took[w%nr] / time.Duration(k)
		}
		if !sampled {
			e.own[w] = f.loss[w%nr]
		}
		if f.linear != nil {
			if err := f.linear[w].Book(step); err != nil {
				return 0, err
			}
		}
	}
	if f.mean != nil {
		if !f.leaderMean {
			if err := f.mean[0].SetMeanState(f.mean); err != nil {
				return 0, fmt.Errorf("dist: worker %d: %w", e.members[0].Rank(), err)
			}
			f.leaderMean = true
		}
		f.stale = true
		if err := f.mean[0].ExchangeMean(dst, step, f.mean[1:], sampled); err != nil {
			return 0, fmt.Errorf("dist: worker %d (for all %d workers, on their mean gradient): %w", e.members[0].Rank(), nw, err)
		}
	}
	return mean, nil
}

// gather lays the batches of replica r's workers end to end in its reused
// buffers.
func (e *Engine) gather(r int, batch func(w int) ([]float32, []int32)) ([]float32, []int32) {
	f := e.fused
	xs, ys := f.x[r][:0], f.y[r][:0]
	for w := r; w < len(e.members); w += len(e.replicas) {
		x, y := batch(w)
		xs, ys = append(xs, x...), append(ys, y...)
	}
	f.x[r], f.y[r] = xs, ys
	return xs, ys
}

// replicaRanks are the ranks of the workers replica r computes.
func (e *Engine) replicaRanks(r int) []int {
	var ranks []int
	for w := r; w < len(e.members); w += len(e.replicas) {
		ranks = append(ranks, e.members[w].Rank())
	}
	return ranks
}

// computeGrouped computes replica r's workers' gradients in one grouped pass
// and hands each to its worker's exchange (for exchangeStep).
func (e *Engine) computeGrouped(r, step int, batch func(w int) ([]float32, []int32)) {
	f := e.fused
	nw, nr := len(e.members), len(e.replicas)
	k := nw / nr
	xs, ys := e.gather(r, batch)
	losses := f.groupLoss[r]
	t0 := time.Now()
	_, err := f.groupers[r].StepGrouped(xs, ys, k, losses)
	took := time.Since(t0)
	if err != nil {
		e.causes[r] = fmt.Errorf("workers %v (computed in one pass): %w", e.replicaRanks(r), err)
		for w := r; w < nw; w += nr {
			e.ready[w] <- fmt.Errorf("worker %d: not computed: its replica's pass failed", e.members[w].Rank())
		}
		return
	}
	for i, w := 0, r; w < nw; i, w = i+1, w+nr {
		if !f.sampled {
			// Until a step has run worker by worker: a share of the pass.
			e.compute[w] = took / time.Duration(k)
		}
		e.losses[w][0] = float32(losses[i])
		e.own[w] = losses[i]
		e.prepErrs[w] = e.collect32(w, f.groupers[r].GroupGrad(i), step)
		e.ready[w] <- nil
	}
}

// stepSampled computes replica r's workers one by one (timing each, for the
// time model), leaving the mean of their gradients in the replica's Grad, as
// StepFused would; it returns their mean loss. Only with mean exchanges,
// which need no worker's own gradient.
func (e *Engine) stepSampled(r int, xs []float32, ys []int32, k int) (float64, error) {
	f := e.fused
	rep := e.replicas[r]
	nw, nr := len(e.members), len(e.replicas)
	acc := f.acc[r]
	nx, ny := len(xs)/k, len(ys)/k
	var loss float64
	for i, w := 0, r; w < nw; i, w = i+1, w+nr {
		t0 := time.Now()
		l, err := rep.Step(xs[i*nx:(i+1)*nx], ys[i*ny:(i+1)*ny])
		e.compute[w] = time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("worker %d: %w", e.members[w].Rank(), err)
		}
		e.own[w] = l
		loss += l
		if i == 0 {
			copy(acc, rep.Grad())
		} else {
			vec.Add1(acc, rep.Grad())
		}
	}
	inv := 1 / float32(k)
	g := rep.Grad()
	for i, v := range acc {
		g[i] = v * inv
	}
	return loss / float64(k), nil
}

// meanSpan writes (dst + srcs[0] + srcs[1] + ...) * inv over [lo, hi) into dst,
// adding in that order for every element.
func meanSpan(dst []float32, srcs [][]float32, inv float32, lo, hi int) {
	for b := lo; b < hi; b += sumBlock {
		end := min(b+sumBlock, hi)
		d := dst[b:end]
		if len(srcs) == 1 { // two replicas: one pass
			vec.AddScale(d, d, srcs[0][b:end], inv)
			continue
		}
		j := 0
		for ; j+4 <= len(srcs); j += 4 {
			vec.Add4(d, srcs[j][b:end], srcs[j+1][b:end], srcs[j+2][b:end], srcs[j+3][b:end])
		}
		switch len(srcs) - j {
		case 3:
			vec.Add3(d, srcs[j][b:end], srcs[j+1][b:end], srcs[j+2][b:end])
		case 2:
			vec.Add2(d, srcs[j][b:end], srcs[j+1][b:end])
		case 1:
			vec.Add1(d, srcs[j][b:end])
		}
		vec.Scale(d, inv)
	}
}

// fusedStep reports whether this step runs fused: which steps do depends on
// the step number alone, so that a resumed run repeats an uninterrupted one.
func (e *Engine) fusedStep(step int) bool {
	if e.fused == nil || e.dropped != nil {
		return false
	}
	// Linear and grouped steps: every fuseSample-th step worker by worker.
	if e.fused.mean != nil {
		return true // sampled steps time each worker inside stepFused
	}
	if step%fuseSample == 0 {
		e.fused.sampled = true
		return false
	}
	return true
}
