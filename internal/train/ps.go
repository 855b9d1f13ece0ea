package train

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gradwire/gradwire/dist"
)

// The asynchronous parameter server (dist.mode ps, dist.staleness != 0): each
// worker pulls the weights, computes a gradient on the next slice of the
// epoch's batches, and pushes it; the server applies every push at once with
// lr/N (N pushes make one step's worth of data). The order of pulls and
// pushes comes from dist.PSClock, fed with step durations 1 + X per worker
// (X from dist.delay, seeded), so a run is reproducible. A gradient is
// computed when its worker pulls, on the weights of that moment, which is
// what an asynchronous worker computes on.

// psState is one epoch's server and the run's counts.
type psState struct {
	clock   *dist.PSClock
	pending [][]float32 // per worker: the gradient of its running step
	loss    []float64   // per worker: that step's loss
	pulls   int         // slices handed out this epoch
	rng     []*rand.Rand

	// The epoch's pushes and their staleness, for its record.
	pushes, stalenessSum, maxStaleness int
}

// psAsync reports whether the run uses the asynchronous server.
func (j *job) psAsync() bool { return j.cfg.Dist.Mode == "ps" && j.cfg.Dist.Staleness != 0 }

// psDuration is worker w's k-th step time in units of the compute time.
func (j *job) psDuration(w, _ int) float64 {
	if j.cfg.Dist.Delay == "none" {
		return 1
	}
	return 1 + j.ps.rng[w].ExpFloat64()*j.cfg.Dist.DelayMean
}

// psStep processes the server's events until N gradients have arrived (one
// global step's worth of data), starting the epoch's clock on its first step,
// and returns their mean loss.
func (j *job) psStep(perm []int, epoch, step, globalStep int, lr float64) (float64, error) {
	n := j.cfg.Dist.Workers
	if j.ps == nil {
		j.ps = &psState{}
		for range n {
			j.ps.pending = append(j.ps.pending, make([]float32, len(j.net.Grad())))
		}
		j.ps.loss = make([]float64, n)
	}
	s := j.ps
	if step == 0 || s.clock == nil {
		// Each epoch's durations come from its own streams, so that a run
		// resumed at an epoch end replays the same schedule.
		s.rng = s.rng[:0]
		for w := range n {
			s.rng = append(s.rng, rand.New(rand.NewPCG(uint64(j.cfg.Seed), uint64(epoch)<<32|uint64(w))))
		}
		var err error
		if s.clock, err = dist.NewPSClock(n, j.cfg.Dist.Staleness, j.stepsPerEpoch*n, j.psDuration); err != nil {
			return 0, err
		}
		s.pulls, s.pushes, s.stalenessSum, s.maxStaleness = 0, 0, 0, 0
	}
	b := j.cfg.WorkerBatch()
	var lossSum float64
	for pushed := 0; pushed < n; {
		e, ok, err := s.clock.Next()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("parameter server: the epoch's schedule ended after %d of %d gradients of step %d", pushed, n, step+1)
		}
		switch e.Kind {
		case dist.PSPull:
			// The pull-th worker slice of the epoch's batches.
			idx := j.sampler.Batch(perm, s.pulls/n, j.globalBatch)
			k := s.pulls % n
			idx = idx[k*b : (k+1)*b]
			s.pulls++
			x, y := j.batch.worker(0)
			j.train.Fill(idx, x, y)
			if j.aug != nil {
				j.aug.Apply(x, idx, epoch)
			}
			t0 := time.Now()
			loss, err := j.net.Step(x, y)
			if err != nil {
				return 0, fmt.Errorf("worker %d: %w", e.Worker, err)
			}
			j.computeS += time.Since(t0).Seconds()
			j.computeN++
			copy(s.pending[e.Worker], j.net.Grad())
			s.loss[e.Worker] = loss
		case dist.PSPush:
			copy(j.net.Grad(), s.pending[e.Worker])
			if err := j.update(lr / float64(n)); err != nil {
				return 0, err
			}
			lossSum += s.loss[e.Worker]
			pushed++
			s.pushes++
			s.stalenessSum += e.Staleness
			s.maxStaleness = max(s.maxStaleness, e.Staleness)
		}
	}
	if step == j.stepsPerEpoch-1 {
		if _, more, _ := s.clock.Next(); more {
			return 0, fmt.Errorf("parameter server: events left after the epoch's %d gradients", j.stepsPerEpoch*n)
		}
		s.clock = nil
	}
	return lossSum / float64(n), nil
}

// psRecord adds the epoch's server figures to its record.
func (j *job) psRecord(res *EpochResult) {
	if !j.psAsync() || j.ps == nil || j.ps.pushes == 0 {
		return
	}
	s := j.ps
	mean, worst := float64(s.stalenessSum)/float64(s.pushes), s.maxStaleness
	res.PSPushes, res.PSMeanStaleness, res.PSMaxStaleness = s.pushes, &mean, &worst
}
