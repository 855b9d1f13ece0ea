package dist

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeReplica's gradient is x + params and its loss the sum of x, so the mean
// gradient over workers can be worked out directly.
type fakeReplica struct {
	flat, grad []float32
	fail       int // fail on this call number (1-based); 0 = never
	calls      int
}

func newFake(n int) *fakeReplica {
	return &fakeReplica{flat: make([]float32, n), grad: make([]float32, n)}
}

func (f *fakeReplica) Step(x []float32, _ []int32) (float64, error) {
	f.calls++
	if f.calls == f.fail {
		return 0, errors.New("boom")
	}
	var loss float64
	for i := range f.grad {
		f.grad[i] = x[i] + f.flat[i]
		loss += float64(x[i])
	}
	return loss, nil
}
func (f *fakeReplica) Grad() []float32 { return f.grad }
func (f *fakeReplica) Flat() []float32 { return f.flat }

// meanExchange all-reduces float32 gradients and averages float64 ones: the
// engine needs an exchange, and the real one (compress) imports this package.
type meanExchange struct {
	c     Collective
	sum64 Float64Mean
}

func (m *meanExchange) Exchange(g []float32, _ int) error {
	if err := m.c.AllReduce(g); err != nil {
		return err
	}
	for i := range g {
		g[i] /= float32(m.c.Size())
	}
	return nil
}

func (m *meanExchange) Exchange64(g []float64, _ int) error { return m.sum64.Mean(m.c, g) }

func meanExchanges(members []Collective) []Exchanger {
	ex := make([]Exchanger, len(members))
	for w, m := range members {
		ex[w] = &meanExchange{c: m}
	}
	return ex
}

func newTestEngine(t *testing.T, workers, replicas, params int) (*Engine, []*fakeReplica) {
	t.Helper()
	members, err := NewLocal(workers)
	if err != nil {
		t.Fatal(err)
	}
	fakes := make([]*fakeReplica, replicas)
	reps := make([]Replica, replicas)
	for i := range fakes {
		fakes[i] = newFake(params)
		reps[i] = fakes[i]
	}
	for i := range fakes[0].flat {
		fakes[0].flat[i] = float32(i)
	}
	e, err := NewEngine(members, reps, meanExchanges(members))
	if err != nil {
		t.Fatal(err)
	}
	return e, fakes
}

func TestEngineMeanGradient(t *testing.T) {
	for _, tc := range []struct{ workers, replicas int }{{1, 1}, {4, 1}, {4, 2}, {64, 2}, {3, 8}} {
		e, fakes := newTestEngine(t, tc.workers, tc.replicas, 5)
		// Worker w's data is all w: its gradient is w + i, its loss 5w. The mean
		// gradient is mean(w) + i = (N-1)/2 + i, the mean loss 5(N-1)/2.
		xs := make([][]float32, tc.workers)
		for w := range xs {
			xs[w] = []float32{float32(w), float32(w), float32(w), float32(w), float32(w)}
		}
		loss, err := e.Step(0, func(w int) ([]float32, []int32) { return xs[w], nil })
		if err != nil {
			t.Fatal(err)
		}
		n := float64(tc.workers)
		if want := 5 * (n - 1) / 2; math.Abs(loss-want) > 1e-4 {
			t.Errorf("%+v: loss %v, want %v", tc, loss, want)
		}
		for i, g := range fakes[0].grad {
			if want := (n-1)/2 + float64(i); math.Abs(float64(g)-want) > 1e-4 {
				t.Errorf("%+v: mean gradient[%d] = %v, want %v", tc, i, g, want)
			}
		}
		// Every replica started from replica 0's parameters.
		for r, f := range fakes[:min(tc.replicas, tc.workers)] {
			if f.flat[4] != 4 {
				t.Errorf("%+v: replica %d parameters not synchronised", tc, r)
			}
		}
	}
}

func TestEngineFailureDoesNotHang(t *testing.T) {
	e, fakes := newTestEngine(t, 8, 2, 3)
	fakes[1].fail = 2 // replica 1's second worker (worker 3) fails
	done := make(chan error, 1)
	go func() {
		_, err := e.Step(0, func(int) ([]float32, []int32) { return []float32{1, 2, 3}, nil })
		done <- err
	}()
	select {
	case err := <-done:
		// The cause, and only the cause: not the other workers' aborts.
		if err == nil || err.Error() != "worker 3: boom" {
			t.Fatalf("error %v, expected the failing worker's own error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("engine hung after a worker failed")
	}
}

// preparingExchange is meanExchange with Prepare (it copies the gradient
// into a buffer of its own) and Contribute (the all-reduce, without the
// division), recording what the engine called.
type preparingExchange struct {
	meanExchange
	own         []float32
	prepared    int // step of the last Prepare, -1 when none or declined
	decline     bool
	fail        error
	contributed bool
	calls       int  // Prepare calls
	filled      bool // the engine wrote the gradient into the buffer exchanged
}

func (p *preparingExchange) Prepare(g []float32, step int) (bool, error) {
	p.calls++
	if p.fail != nil {
		return false, p.fail
	}
	if p.decline {
		return false, nil
	}
	p.own = append(p.own[:0], g...)
	p.prepared = step
	return true, nil
}

func (p *preparingExchange) take(g []float32, step int) {
	p.filled = slices.ContainsFunc(g, func(v float32) bool { return v != 0 })
	if p.prepared == step {
		copy(g, p.own) // g is the engine's buffer, which it did not fill
		p.prepared = -1
	}
}

func (p *preparingExchange) Exchange(g []float32, step int) error {
	p.take(g, step)
	return p.meanExchange.Exchange(g, step)
}

func (p *preparingExchange) Contribute(g []float32, step int) error {
	p.take(g, step)
	p.contributed = true
	return p.c.AllReduce(g)
}

// TestEnginePreparerContributor checks that the engine hands each worker's
// gradient to Prepare while its replica holds it (the engine's own copy is
// skipped: the mean is right only if Prepare got the gradient), lets workers
// other than 0 contribute, copies the gradient itself where Prepare declines,
// and reports a Prepare failure as that worker's without hanging.
func TestEnginePreparerContributor(t *testing.T) {
	const workers, replicas, params = 6, 2, 4
	run := func(setup func(w int, p *preparingExchange)) ([]*fakeReplica, []*preparingExchange, float64, error) {
		members, err := NewLocal(workers)
		if err != nil {
			t.Fatal(err)
		}
		reps := make([]Replica, replicas)
		fakes := make([]*fakeReplica, replicas)
		for i := range reps {
			fakes[i] = newFake(params)
			reps[i] = fakes[i]
		}
		for i := range fakes[0].flat {
			fakes[0].flat[i] = float32(i) // the gradient is x + params
		}
		xs := make([]Exchanger, workers)
		ps := make([]*preparingExchange, workers)
		for w, m := range members {
			ps[w] = &preparingExchange{meanExchange: meanExchange{c: m}, prepared: -1}
			setup(w, ps[w])
			xs[w] = ps[w]
		}
		e, err := NewEngine(members, reps, xs)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		var loss float64
		go func() {
			var err error
			// Worker w's data is all w: the mean gradient is (N-1)/2 + i,
			// the mean loss 4(N-1)/2.
			loss, err = e.Step(7, func(w int) ([]float32, []int32) {
				return []float32{float32(w), float32(w), float32(w), float32(w)}, nil
			})
			done <- err
		}()
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("engine hung")
		}
		return fakes, ps, loss, err
	}
	for _, declined := range []int{-1, 0, 3} {
		fakes, ps, loss, err := run(func(w int, p *preparingExchange) { p.decline = w == declined })
		if err != nil {
			t.Fatal(err)
		}
		if want := 4 * 2.5; math.Abs(loss-want) > 1e-6 {
			t.Errorf("declined %d: loss %v, want %v", declined, loss, want)
		}
		for i, g := range fakes[0].grad {
			if want := 2.5 + float64(i); math.Abs(float64(g)-want) > 1e-6 {
				t.Errorf("declined %d: mean gradient[%d] = %v, want %v", declined, i, g, want)
			}
		}
		for w, p := range ps {
			if p.contributed != (w > 0) || p.calls != 1 || p.filled != (w == declined) {
				t.Errorf("declined %d: worker %d contributed %v, prepared %d times, buffer filled by the engine %v",
					declined, w, p.contributed, p.calls, p.filled)
			}
		}
	}
	_, _, _, err := run(func(w int, p *preparingExchange) {
		if w == 3 {
			p.fail = errors.New("no room")
		}
	})
	if err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("Prepare failure: %v", err)
	}
}

func TestEngineAverageBuffers(t *testing.T) {
	e, _ := newTestEngine(t, 4, 2, 1)
	// Replica 0 served workers 0 and 2, replica 1 workers 1 and 3: the mean is
	// (2*a0 + 2*a1)/4.
	bufs := [][][]float32{{{1, 10}, {100}}, {{3, 30}, {300}}}
	if err := e.AverageBuffers(bufs); err != nil {
		t.Fatal(err)
	}
	for r := range bufs {
		if bufs[r][0][0] != 2 || bufs[r][0][1] != 20 || bufs[r][1][0] != 200 {
			t.Fatalf("replica %d buffers %v, want [[2 20] [200]]", r, bufs[r])
		}
	}
}

func TestEngineCheckAgreement(t *testing.T) {
	e, fakes := newTestEngine(t, 4, 2, 3)
	if err := e.CheckAgreement(1); err != nil {
		t.Fatal(err)
	}
	fakes[1].flat[2] += 1e-6
	err := e.CheckAgreement(7)
	if err == nil || !strings.Contains(err.Error(), "replica 1") || !strings.Contains(err.Error(), "step 7") {
		t.Fatalf("error %v, expected replica 1 to disagree at step 7", err)
	}
}

// fake64Replica computes float64 gradients: worker w's gradient is data[w]
// in every element.
type fake64Replica struct {
	*fakeReplica
	grad64 []float64
	data   []float64
}

func (f *fake64Replica) Step(x []float32, _ []int32) (float64, error) {
	for i := range f.grad64 {
		f.grad64[i] = f.data[int(x[0])]
	}
	return 0, nil
}

func (f *fake64Replica) Grad64() []float64 { return f.grad64 }

func TestEngineFloat64Gradients(t *testing.T) {
	// Worker gradients 1e8, 1, -1e8, 1: the float64 mean is 2/4 = 0.5. A
	// float32 sum in rank order loses the first 1 (1e8+1 rounds to 1e8 at a
	// spacing of 8) and gives 0.25.
	data := []float64{1e8, 1, -1e8, 1}
	const n = 3
	members, err := NewLocal(len(data))
	if err != nil {
		t.Fatal(err)
	}
	reps := make([]Replica, 2)
	for i := range reps {
		reps[i] = &fake64Replica{fakeReplica: newFake(n), grad64: make([]float64, n), data: data}
	}
	e, err := NewEngine(members, reps, meanExchanges(members))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Step(0, func(w int) ([]float32, []int32) { return []float32{float32(w)}, nil }); err != nil {
		t.Fatal(err)
	}
	for i, g := range reps[0].Grad() {
		if g != 0.5 {
			t.Fatalf("mean gradient[%d] = %v, want 0.5 (float64 sum)", i, g)
		}
	}

	// Mixing float32 and float64 replicas is an error.
	reps[1] = newFake(n)
	members, _ = NewLocal(len(data))
	if _, err := NewEngine(members, reps, meanExchanges(members)); err == nil || !strings.Contains(err.Error(), "all or none") {
		t.Errorf("mixed replicas: err = %v, want an all-or-none error", err)
	}
}

// TestEngineBackupWorkers: with workers 1 and 3 of 4 left out, the mean is
// that of workers 0 and 2: gradient (0 + 2)/2 + i = 1 + i (params 0..4), not
// the 1.5 + i of all four; nil restores the full mean.
func TestEngineBackupWorkers(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		e, fakes := newTestEngine(t, 4, replicas, 5)
		xs := make([][]float32, 4)
		for w := range xs {
			xs[w] = []float32{float32(w), float32(w), float32(w), float32(w), float32(w)}
		}
		batch := func(w int) ([]float32, []int32) { return xs[w], nil }
		if err := e.SetDropped([]bool{false, true, false, true}, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Step(0, batch); err != nil {
			t.Fatal(err)
		}
		for i, g := range fakes[0].grad {
			if want := 1 + float32(i); math.Abs(float64(g-want)) > 1e-5 {
				t.Fatalf("%d replicas: gradient[%d] = %v with workers 1 and 3 left out, want %v", replicas, i, g, want)
			}
		}
		if err := e.SetDropped(nil, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Step(1, batch); err != nil {
			t.Fatal(err)
		}
		if g := fakes[0].grad[0]; math.Abs(float64(g)-1.5) > 1e-5 {
			t.Fatalf("%d replicas: gradient[0] = %v with every worker, want 1.5", replicas, g)
		}
	}
	e, _ := newTestEngine(t, 2, 1, 3)
	if err := e.SetDropped([]bool{true, true}, 2); err == nil {
		t.Error("leaving every worker out gave no error")
	}
	if err := e.SetDropped([]bool{true}, 1); err == nil {
		t.Error("one mark for two workers gave no error")
	}
}
