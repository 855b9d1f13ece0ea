package train

import (
	"math/rand/v2"
	"slices"
)

// backupSalt separates the backup workers' delay streams from the parameter
// server's, which draw from the same seed.
const backupSalt = 0x6261636b7570 // "backup"

// markBackups tells the engine which workers' gradients step globalStep
// leaves out (dist.backups b > 0): every worker's step time is 1 + X, X from
// dist.delay, drawn from a stream of the seed, the step and the worker, so
// every process marks the same workers and a resumed run the same ones; the
// b slowest (ties: higher ids) are left out.
func (j *job) markBackups(globalStep int) error {
	b := j.cfg.Dist.Backups
	if b == 0 {
		return nil
	}
	n := j.cfg.Dist.Workers
	type arrival struct {
		t float64
		w int
	}
	arr := make([]arrival, n)
	var pcg rand.PCG
	r := rand.New(&pcg)
	for w := range n {
		pcg.Seed(uint64(j.cfg.Seed)^backupSalt, uint64(globalStep)<<20|uint64(w))
		arr[w] = arrival{1 + r.ExpFloat64()*j.cfg.Dist.DelayMean, w}
	}
	slices.SortFunc(arr, func(a, c arrival) int {
		switch {
		case a.t < c.t:
			return -1
		case a.t > c.t:
			return 1
		}
		return a.w - c.w
	})
	first := j.engine.FirstWorker()
	dropped := make([]bool, j.engine.LocalWorkers())
	for _, a := range arr[n-b:] {
		if l := a.w - first; l >= 0 && l < len(dropped) {
			dropped[l] = true
		}
	}
	return j.engine.SetDropped(dropped, b)
}
