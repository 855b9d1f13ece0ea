package dist

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestPipelineQuadratic is the worked example of width-2 pipelining on
// f(w) = h w^2/2 with h = 1, lr = 0.5, w_0 = 1 (fakeReplica's gradient is x +
// w; x = 0): w_{t+1} = w_t - lr g(w_{t-1}) gives 1, 0.5, 0, -0.25, -0.25 after
// the steps that apply a gradient, against 1, 0.5, 0.25, 0.125, 0.0625
// synchronously; the drain then applies g(w = -0.25).
func TestPipelineQuadratic(t *testing.T) {
	e, fakes := newTestEngine(t, 1, 1, 1)
	fakes[0].flat[0] = 1
	if err := e.EnablePipeline(); err != nil {
		t.Fatal(err)
	}
	zero := []float32{0}
	batch := func(int) ([]float32, []int32) { return zero, nil }
	const lr = 0.5
	want := []float32{1, 0.5, 0, -0.25, -0.25}
	for s, w := range want {
		_, applied, err := e.StepPipelined(s, batch)
		if err != nil {
			t.Fatal(err)
		}
		if applied != (s > 0) {
			t.Fatalf("step %d: applied %v", s, applied)
		}
		if applied {
			fakes[0].flat[0] -= lr * fakes[0].grad[0]
		}
		if got := fakes[0].flat[0]; got != w {
			t.Fatalf("after step %d: w = %v, want %v", s, got, w)
		}
	}
	if !e.InFlight() {
		t.Fatal("no gradient in flight after the last step")
	}
	applied, err := e.Drain()
	if err != nil || !applied {
		t.Fatalf("drain: applied %v, err %v", applied, err)
	}
	fakes[0].flat[0] -= lr * fakes[0].grad[0]
	if got := fakes[0].flat[0]; got != -0.125 {
		t.Fatalf("after the drain w = %v, want -0.125", got)
	}
	if applied, err := e.Drain(); applied || err != nil {
		t.Fatalf("second drain: applied %v, err %v; want nothing in flight", applied, err)
	}
	// A new pipeline starts without applying anything.
	if _, applied, err := e.StepPipelined(5, batch); applied || err != nil {
		t.Fatalf("first step after the drain: applied %v, err %v", applied, err)
	}
}

// TestPipelineRecurrence runs 4 workers on 2 replicas with data that changes
// per worker and step, and compares the weights with the stale-gradient
// recurrence w_{t+1} = w_t - lr (xbar_{t-1} + w_{t-1}) worked in float64, where
// xbar_t is the workers' mean batch of step t. The losses are this step's.
func TestPipelineRecurrence(t *testing.T) {
	const workers, replicas, n, steps, lr = 4, 2, 3, 7, 0.3
	e, fakes := newTestEngine(t, workers, replicas, n)
	if err := e.EnablePipeline(); err != nil {
		t.Fatal(err)
	}
	x := func(step, w, i int) float32 { return float32((step+1)*(w+2)%5) - 2 + 0.25*float32(i) }
	var step int
	bufs := make([][]float32, workers)
	batch := func(w int) ([]float32, []int32) {
		bufs[w] = bufs[w][:0]
		for i := range n {
			bufs[w] = append(bufs[w], x(step, w, i))
		}
		return bufs[w], nil
	}
	ref := make([]float64, n)
	for i := range ref {
		ref[i] = float64(fakes[0].flat[i])
	}
	prev := append([]float64(nil), ref...) // w_{t-1}, with w_{-1} = w_0
	xbar := func(s, i int) float64 {
		var sum float64
		for w := range workers {
			sum += float64(x(s, w, i))
		}
		return sum / workers
	}
	for step = 0; step < steps; step++ {
		loss, applied, err := e.StepPipelined(step, batch)
		if err != nil {
			t.Fatal(err)
		}
		var wantLoss float64
		for w := range workers {
			for i := range n {
				wantLoss += float64(x(step, w, i))
			}
		}
		if math.Abs(loss-wantLoss/workers) > 1e-5 {
			t.Fatalf("step %d: loss %v, want this step's mean %v", step, loss, wantLoss/workers)
		}
		if applied {
			for i := range fakes[0].flat {
				fakes[0].flat[i] -= lr * fakes[0].grad[i]
			}
			e.SyncReplicas()
			next := make([]float64, n)
			for i := range ref {
				next[i] = ref[i] - lr*(xbar(step-1, i)+prev[i])
			}
			prev, ref = ref, next
		}
		if applied != (step > 0) {
			t.Fatalf("step %d: applied %v", step, applied)
		}
		for i, v := range fakes[0].flat {
			if math.Abs(float64(v)-ref[i]) > 1e-5 {
				t.Fatalf("after step %d: w[%d] = %v, recurrence %v", step, i, v, ref[i])
			}
		}
	}
	// A synchronous engine on the same data ends elsewhere: the test can fail.
	s, sf := newTestEngine(t, workers, replicas, n)
	for step = 0; step < steps; step++ {
		if _, err := s.Step(step, batch); err != nil {
			t.Fatal(err)
		}
		for i := range sf[0].flat {
			sf[0].flat[i] -= lr * sf[0].grad[i]
		}
		s.SyncReplicas()
	}
	if math.Abs(float64(sf[0].flat[0])-ref[0]) < 1e-3 {
		t.Fatalf("synchronous and pipelined runs agree (%v): the recurrence does not tell them apart", ref[0])
	}
}

// TestPipelineFailure: a worker that fails while the previous gradients are
// exchanged returns its error, and nothing hangs.
func TestPipelineFailure(t *testing.T) {
	e, fakes := newTestEngine(t, 4, 2, 3)
	if err := e.EnablePipeline(); err != nil {
		t.Fatal(err)
	}
	fakes[1].fail = 3 // replica 1 computes workers 1 and 3: its third call is worker 1 of step 1
	x := []float32{1, 2, 3}
	batch := func(int) ([]float32, []int32) { return x, nil }
	if _, _, err := e.StepPipelined(0, batch); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := e.StepPipelined(1, batch); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("error %v, want the worker's failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StepPipelined hangs after a worker failed")
	}
}
