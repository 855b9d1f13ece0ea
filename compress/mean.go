package compress

import (
	"fmt"
	"maps"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/par"
)

// meanLinear marks a compressor whose exchanged mean depends on the workers'
// gradients and states only through their means: every payload is an
// all-reduced sum of products linear in the worker's compensated gradient,
// and the residual it keeps is that gradient minus a result shared by all
// workers. PowerSGD is one: with M_i = g_i + e_i, the summed P is (sum M_i) Q,
// the summed Q is (sum M_i)^T P, and the mean residual is mean(M_i) minus the
// shared approximation. Running it once on mean(g_i) with the residual
// mean(e_i) gives the workers' mean update and mean residual, up to float32
// rounding. setMeanRun(ways) starts the run on the mean (ways >= 1), whose
// work the compressor may split over that many cores (it has the process to
// itself), and setMeanRun(0) ends it.
type meanLinear interface{ setMeanRun(ways int) }

func (c *powerSGD) setMeanRun(ways int) { c.spread = ways }

var _ dist.MeanExchanger = (*Exchange)(nil)

// MeanLinear reports whether ExchangeMean may stand in for the workers'
// exchanges: the compressor is meanLinear, keeps its own residual, uses
// all-reduce rounds only, and the dense tensors travel as float32 (float16
// rounding of each worker's values is not linear).
func (x *Exchange) MeanLinear() bool {
	if x.comp == nil || x.denseFP16 || x.send.mem != nil {
		return false
	}
	if _, ok := x.comp.(meanLinear); !ok {
		return false
	}
	for r := 0; r < x.send.needs.Rounds; r++ {
		if x.send.needs.Op(r) != dist.OpAllReduce {
			return false
		}
	}
	return true
}

// ExchangeMean replaces grad, the mean of every worker's gradient, with the
// exchange's mean as Exchange on each worker would have produced it. It runs
// the compressor once on grad without the collective: this exchange's state
// must be the workers' mean state (SetMeanState) and is their mean state
// afterwards. It counts the bytes this worker would have put on the wire, and
// books the same for every exchange in others (the workers it stands for).
// With timed the compressor runs on one core and its time counts as one
// worker's (CodecSeconds, for the time model); otherwise it splits its work
// over the cores and is not timed.
func (x *Exchange) ExchangeMean(grad []float32, step int, others []dist.MeanExchanger, timed bool) error {
	if !x.MeanLinear() {
		return fmt.Errorf("compress %s: ExchangeMean on an exchange whose mean is not a function of the mean gradient", x.send.name)
	}
	x.traffic.copyInto(&x.before)
	ml := x.comp.(meanLinear)
	ways := 1 // timed: one worker's computation, on one core
	if !timed {
		ways = par.Default().Workers()
	}
	ml.setMeanRun(ways)
	x.solo, x.untimed = true, !timed
	err := x.exchange(grad, step, true)
	x.solo, x.untimed = false, false
	ml.setMeanRun(0)
	if err != nil {
		return err
	}
	for _, o := range others {
		ox, ok := o.(*Exchange)
		if !ok {
			return fmt.Errorf("compress: ExchangeMean: worker exchange %T is not a compress.Exchange", o)
		}
		ox.traffic.addSince(&x.traffic, &x.before)
	}
	return nil
}

// SetMeanState sets this exchange's compressor state to the mean over of:
// the residual is averaged (summed in float64, in the order of of), every
// other buffer (PowerSGD's warm-start Q, the same on every worker after an
// exchange) is taken from of[0]. With one exchange it is a copy. On error
// nothing changes.
func (x *Exchange) SetMeanState(of []dist.MeanExchanger) error {
	if len(of) == 0 {
		return fmt.Errorf("compress: SetMeanState of no exchanges")
	}
	states := make([]map[string][]float32, len(of))
	for i, o := range of {
		ox, ok := o.(*Exchange)
		if !ok {
			return fmt.Errorf("compress: SetMeanState: worker exchange %T is not a compress.Exchange", o)
		}
		states[i] = ox.State()
	}
	st := maps.Clone(states[0])
	if r, ok := st["residual"]; ok {
		sum := make([]float64, len(r))
		for i, s := range states {
			ri := s["residual"]
			if len(ri) != len(r) {
				return fmt.Errorf("compress: SetMeanState: exchange %d's residual has %d values, want %d", i, len(ri), len(r))
			}
			for j, v := range ri {
				sum[j] += float64(v)
			}
		}
		mean := make([]float32, len(r))
		inv := 1 / float64(len(states))
		for j, v := range sum {
			mean[j] = float32(v * inv)
		}
		st["residual"] = mean
	}
	for k, v := range st {
		// State may alias the compressor's buffers, of[0]'s among them when
		// x is of[0]: SetState copies from these independent clones.
		if k != "residual" {
			st[k] = append([]float32(nil), v...)
		}
	}
	return x.SetState(st)
}

// copyInto makes dst a deep copy of the accounting, reusing dst's maps and
// slice (ExchangeMean takes one every step).
func (t *Traffic) copyInto(dst *Traffic) {
	wire, dense, rounds := dst.WireByKind, dst.DenseByKind, dst.SteadyRoundWire
	*dst = *t
	if wire == nil {
		wire, dense = map[string]int64{}, map[string]int64{}
	}
	clear(wire)
	clear(dense)
	maps.Copy(wire, t.WireByKind)
	maps.Copy(dense, t.DenseByKind)
	dst.WireByKind, dst.DenseByKind = wire, dense
	dst.SteadyRoundWire = append(rounds[:0], t.SteadyRoundWire...)
}

// addSince adds what now counted since before (now's DenseStep, as Add
// does). SteadyRoundWire stays as it is where nothing was added, as an
// exchange leaves it nil before its first steady step.
func (t *Traffic) addSince(now, before *Traffic) {
	t.Steps += now.Steps - before.Steps
	t.SteadySteps += now.SteadySteps - before.SteadySteps
	t.DenseStep = now.DenseStep
	t.Wire += now.Wire - before.Wire
	t.Dense += now.Dense - before.Dense
	t.SteadyWire += now.SteadyWire - before.SteadyWire
	t.SteadyDense += now.SteadyDense - before.SteadyDense
	if t.WireByKind == nil {
		t.WireByKind, t.DenseByKind = map[string]int64{}, map[string]int64{}
	}
	for k, v := range now.WireByKind {
		t.WireByKind[k] += v - before.WireByKind[k]
	}
	for k, v := range now.DenseByKind {
		t.DenseByKind[k] += v - before.DenseByKind[k]
	}
	for r, v := range now.SteadyRoundWire {
		if r < len(before.SteadyRoundWire) {
			v -= before.SteadyRoundWire[r]
		}
		if v == 0 {
			continue
		}
		if len(t.SteadyRoundWire) < len(now.SteadyRoundWire) {
			t.SteadyRoundWire = append(t.SteadyRoundWire, make([]int64, len(now.SteadyRoundWire)-len(t.SteadyRoundWire))...)
		}
		t.SteadyRoundWire[r] += v
	}
}
