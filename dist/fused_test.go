package dist_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
)

type fuseRun struct {
	engine    *dist.Engine
	nets      []*models.Net
	exchanges []*compress.Exchange
	members   []dist.Collective
	xs        []dist.Exchanger
}

// newFuseRun builds an in-process engine of workers over replicas (LeNet-5
// or ResNet-20 on small inputs, the same seed) with the named compressor.
func newFuseRun(t *testing.T, model string, workers, replicas int, comp string) *fuseRun {
	t.Helper()
	in := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	if model == "resnet20" {
		in.Shape = []int{3, 8, 8}
	}
	members, err := dist.NewLocal(workers)
	if err != nil {
		t.Fatal(err)
	}
	r := &fuseRun{}
	reps := make([]dist.Replica, replicas)
	for i := range reps {
		net, err := models.New(models.Config{Name: model}, in, 3, 3, 7, models.WithOpWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		r.nets, reps[i] = append(r.nets, net), net
	}
	xs := make([]dist.Exchanger, workers)
	cfg := compress.DefaultConfig()
	cfg.Name = comp
	for w, m := range members {
		info := func(step int) compress.StepInfo {
			return compress.StepInfo{Step: step, StepsPerEpoch: 100, Worker: m.Rank(), Workers: m.Size(), Params: r.nets[0].Flat()}
		}
		x, err := compress.NewExchange(cfg, r.nets[0].Params(), m, 1, compress.Hyper{Momentum: 0.9}, info)
		if err != nil {
			t.Fatal(err)
		}
		r.exchanges, xs[w] = append(r.exchanges, x), x
	}
	if r.engine, err = dist.NewEngine(members, reps, xs); err != nil {
		t.Fatal(err)
	}
	r.members, r.xs = members, xs
	return r
}

// ungroupable is a model that cannot split its gradients by batch.
type ungroupable struct{ *models.Net }

func (ungroupable) Groupable() bool { return false }

// batches gives every worker its own deterministic batch of 3 examples.
func batches(step int) func(w int) ([]float32, []int32) {
	return func(w int) ([]float32, []int32) {
		x := make([]float32, 3*28*28)
		y := make([]int32, 3)
		for i := range x {
			x[i] = float32(math.Sin(float64(i*(w+2)+step*31)) * 0.5)
		}
		for i := range y {
			y[i] = int32((w*3 + i + step) % 10)
		}
		return x, y
	}
}

// stepBoth runs step on plain (worker by worker) and on other (fused or
// grouped, how) from the same state and checks that the losses and the
// exchanged mean gradients (not all zero) agree up to float32 rounding;
// then it moves both runs' parameters by the same rule.
func stepBoth(t *testing.T, step int, plain, other *fuseRun, how string) {
	t.Helper()
	lp, err := plain.engine.Step(step, batches(step))
	if err != nil {
		t.Fatal(err)
	}
	lo, err := other.engine.Step(step, batches(step))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lp-lo) > 1e-5*math.Abs(lp) {
		t.Fatalf("step %d: loss %v worker by worker, %v %s", step, lp, lo, how)
	}
	gp, gd := plain.nets[0].Grad(), other.nets[0].Grad()
	var scale float64
	for _, v := range gp {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	if scale == 0 {
		t.Fatalf("step %d: the exchanged gradient is all zeros", step)
	}
	for i := range gp {
		if math.Abs(float64(gp[i]-gd[i])) > 1e-4*scale {
			t.Fatalf("step %d: mean gradient %d is %v worker by worker, %v %s (largest %v)", step, i, gp[i], gd[i], how, scale)
		}
	}
	for _, r := range []*fuseRun{plain, other} {
		for i, g := range r.nets[0].Grad() {
			r.nets[0].Flat()[i] -= 0.05 * g
		}
		r.engine.SyncReplicas()
	}
}

// TestFusedStepMatchesWorkerByWorker trains two engines of 8 workers on 2
// replicas from the same start, one with Fuse: after every step the mean
// gradient and the loss agree up to float32 rounding, the parameters after
// an update agree, and the traffic every worker booked is the same.
func TestFusedStepMatchesWorkerByWorker(t *testing.T) {
	plain := newFuseRun(t, "lenet5", 8, 2, "none")
	fused := newFuseRun(t, "lenet5", 8, 2, "none")
	if err := fused.engine.Fuse(); err != nil {
		t.Fatal(err)
	}
	if !fused.engine.Fused() || plain.engine.Fused() || fused.engine.Passes() != "fused" {
		t.Fatalf("Fused %v and %v, Passes %q: expected fused passes after Fuse", fused.engine.Fused(), plain.engine.Fused(), fused.engine.Passes())
	}
	for step := 24; step <= 27; step++ { // step 25 runs worker by worker, the others fused
		stepBoth(t, step, plain, fused, "fused")
	}
	for w := range plain.exchanges {
		if tp, tf := plain.exchanges[w].Traffic(), fused.exchanges[w].Traffic(); tp.Wire != tf.Wire || tp.Dense != tf.Dense || tp.Steps != tf.Steps ||
			tp.SteadyWire != tf.SteadyWire || tp.WireByKind["conv"] != tf.WireByKind["conv"] || tp.DenseStep != tf.DenseStep {
			t.Fatalf("worker %d: traffic %+v worker by worker, %+v fused", w, tp, tf)
		}
	}
	losses, err := fused.engine.WorkerLosses()
	if err != nil {
		t.Fatal(err)
	}
	if len(losses) != 8 || losses[0] != losses[2] || losses[0] == losses[1] {
		t.Fatalf("worker losses %v: expected each replica's mean for its workers", losses)
	}
}

// TestGroupedStepMatchesWorkerByWorker trains two engines of 8 workers on 2
// replicas with DGC from the same start, one with Fuse (grouped passes: DGC
// needs each worker's own gradient): after every step the exchanged mean
// gradient and the loss agree up to float32 rounding, each worker's loss is
// its own, and the traffic every worker booked is the same.
func TestGroupedStepMatchesWorkerByWorker(t *testing.T) {
	plain := newFuseRun(t, "lenet5", 8, 2, "dgc")
	grouped := newFuseRun(t, "lenet5", 8, 2, "dgc")
	if err := grouped.engine.Fuse(); err != nil {
		t.Fatal(err)
	}
	if !grouped.engine.Fused() || grouped.engine.Passes() != "grouped" || plain.engine.Passes() != "one by one" {
		t.Fatalf("Fused %v, Passes %q and %q: expected grouped passes after Fuse", grouped.engine.Fused(), grouped.engine.Passes(), plain.engine.Passes())
	}
	for step := 24; step <= 27; step++ { // step 25 runs worker by worker, the others grouped
		stepBoth(t, step, plain, grouped, "grouped")
		wp, err := plain.engine.WorkerLosses()
		if err != nil {
			t.Fatal(err)
		}
		wg, err := grouped.engine.WorkerLosses()
		if err != nil {
			t.Fatal(err)
		}
		if wg[0] == wg[2] {
			t.Fatalf("step %d: workers 0 and 2 (one replica) report one loss %v: not their own", step, wg[0])
		}
		for w := range wp {
			if math.Abs(wp[w]-wg[w]) > 1e-5*math.Abs(wp[w]) {
				t.Fatalf("step %d: worker %d's loss %v worker by worker, %v grouped", step, w, wp[w], wg[w])
			}
		}
	}
	for w := range plain.exchanges {
		if tp, tg := plain.exchanges[w].Traffic(), grouped.exchanges[w].Traffic(); tp.Wire != tg.Wire || tp.Dense != tg.Dense || tp.Steps != tg.Steps {
			t.Fatalf("worker %d: traffic %+v worker by worker, %+v grouped", w, tp, tg)
		}
	}
}

// TestGroupedStepFailure: a NaN loss in one worker's batch fails the step,
// naming the workers of the pass that computed it and the batch.
func TestGroupedStepFailure(t *testing.T) {
	r := newFuseRun(t, "lenet5", 4, 2, "dgc")
	if err := r.engine.Fuse(); err != nil {
		t.Fatal(err)
	}
	good := batches(1)
	nan := func(w int) ([]float32, []int32) {
		x, y := good(w)
		if w == 3 {
			x = append([]float32(nil), x...)
			x[0] = float32(math.NaN())
		}
		return x, y
	}
	_, err := r.engine.Step(1, nan)
	if err == nil || !strings.Contains(err.Error(), "workers [1 3] (computed in one pass)") || !strings.Contains(err.Error(), "loss of batch 2 of 2 is NaN") {
		t.Fatalf("a NaN in worker 3's batch: error %v, expected one naming workers [1 3] and batch 2's loss", err)
	}
}

// TestFuseRefuses: BatchNorm, a per-worker compressor on a model whose layers
// cannot split their gradients by batch and uneven replicas keep steps worker
// by worker, and Fuse says why.
func TestFuseRefuses(t *testing.T) {
	for _, c := range []struct {
		model, comp      string
		workers, replica int
		want             string
	}{
		{"resnet20", "none", 4, 2, "interact"},
		{"resnet20", "dgc", 4, 2, "interact"},
		{"lenet5", "none", 3, 2, "evenly"},
		{"lenet5", "none", 2, 2, "nothing to fuse"},
	} {
		r := newFuseRun(t, c.model, c.workers, c.replica, c.comp)
		err := r.engine.Fuse()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %d/%d: Fuse error %v, expected one with %q", c.model, c.comp, c.workers, c.replica, err, c.want)
		}
		if r.engine.Fused() {
			t.Errorf("%s %s: Fused after a refusal", c.model, c.comp)
		}
	}
	r := newFuseRun(t, "lenet5", 4, 2, "dgc")
	e, err := dist.NewEngine(r.members, []dist.Replica{ungroupable{r.nets[0]}, ungroupable{r.nets[1]}}, r.xs)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Fuse(); err == nil || !strings.Contains(err.Error(), "own gradient") || e.Fused() {
		t.Errorf("dgc on a model that cannot group: Fuse error %v, Fused %v; expected a refusal naming the per-worker exchange", err, e.Fused())
	}
}
