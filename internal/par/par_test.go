package par

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cover runs one call and checks that every index of [0, n) was handled
// exactly once, by the worker whose range holds it.
func cover(t *testing.T, p *Pool, n, w int) {
	t.Helper()
	hits := make([]int32, n)
	owner := make([]int32, n)
	p.Run(n, w, func(wk, lo, hi int) {
		for i := lo; i < hi; i++ {
			atomic.AddInt32(&hits[i], 1)
			owner[i] = int32(wk)
		}
	})
	ws := max(1, w)
	if n <= 1 {
		ws = 1
	}
	for i := range n {
		if hits[i] != 1 {
			t.Fatalf("n=%d w=%d: index %d handled %d times", n, w, i, hits[i])
		}
		if want := i * ws / n; ws > 1 && int(owner[i]) != ownerOf(i, n, ws) {
			t.Fatalf("n=%d w=%d: index %d handled by worker %d, want %d (%d)", n, w, i, owner[i], ownerOf(i, n, ws), want)
		}
	}
}

// ownerOf is the worker whose range [k*n/w, (k+1)*n/w) holds i.
func ownerOf(i, n, w int) int {
	for k := range w {
		if i >= k*n/w && i < (k+1)*n/w {
			return k
		}
	}
	return -1
}

func TestRunCoversEveryIndexOnce(t *testing.T) {
	p := New(3)
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000} {
		for _, w := range []int{0, 1, 2, 3, 4, 6} { // 6 > helpers+1: fresh goroutines
			cover(t, p, n, w)
		}
	}
}

// TestRunAfterParking: calls separated by more than the spin time find the
// helpers parked and wake them.
func TestRunAfterParking(t *testing.T) {
	p := New(1)
	for range 5 {
		cover(t, p, 100, 2)
		time.Sleep(3 * LingerOps)
	}
}

// TestRunManyCalls: back-to-back calls with changing worker counts (a helper
// that misses a call must not take part in the next one with the old count).
// Three helpers may outnumber the processors: calls then wait for a spin to
// end, so there are fewer of them.
func TestRunManyCalls(t *testing.T) {
	p := New(3)
	for i := range 2000 {
		cover(t, p, 50+i%7, 1+i%4)
	}
}

// TestRunConcurrentCallers: callers that find the pool busy run on fresh
// goroutines; every call still covers its range once.
func TestRunConcurrentCallers(t *testing.T) {
	p := New(1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				n := 10 + (g*31+i)%90
				var sum atomic.Int64
				p.Run(n, 2, func(_, lo, hi int) {
					for j := lo; j < hi; j++ {
						sum.Add(int64(j))
					}
				})
				if got, want := sum.Load(), int64(n*(n-1)/2); got != want {
					t.Errorf("caller %d call %d: sum %d, want %d", g, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkHandOff: one call of two tiny ranges, on the pool and on fresh
// goroutines (the cost the pool removes).
func BenchmarkHandOff(b *testing.B) {
	var sink [2][64]float32
	f := func(wk, lo, hi int) {
		for i := lo; i < hi; i++ {
			sink[wk][i&63] += 1
		}
	}
	b.Run("pool", func(b *testing.B) {
		p := New(1)
		for b.Loop() {
			p.Run(128, 2, f)
		}
	})
	b.Run("spawn", func(b *testing.B) {
		for b.Loop() {
			spawn(128, 2, f)
		}
	})
}

// BenchmarkHandOffAfterGap: as BenchmarkHandOff, with serial work between
// calls (about 20 µs, as a step's serial ops and Gorgonia's VM leave between
// two parallel ops), during which idle threads go to sleep.
func BenchmarkHandOffAfterGap(b *testing.B) {
	var sink [2][64]float32
	f := func(wk, lo, hi int) {
		for i := lo; i < hi; i++ {
			sink[wk][i&63] += 1
		}
	}
	gap := func() {
		t0 := time.Now()
		for time.Since(t0) < 20*time.Microsecond {
		}
	}
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			gap()
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := New(1)
		for b.Loop() {
			gap()
			p.Run(128, 2, f)
		}
	})
	b.Run("spawn", func(b *testing.B) {
		for b.Loop() {
			gap()
			spawn(128, 2, f)
		}
	})
}

// TestRunIfIdle: an idle pool splits the call as Run does; a busy one runs
// it whole on the caller (worker 0).
func TestRunIfIdle(t *testing.T) {
	p := New(1)
	var workers [2]atomic.Int32
	p.RunIfIdle(100, 2, func(wk, lo, hi int) { workers[wk].Add(int32(hi - lo)) })
	if workers[0].Load() != 50 || workers[1].Load() != 50 {
		t.Fatalf("idle pool: worker shares %d and %d, want 50 and 50", workers[0].Load(), workers[1].Load())
	}
	p.Run(2, 2, func(wk, _, _ int) {
		if wk != 0 {
			return
		}
		var got [2]int
		p.RunIfIdle(100, 2, func(wk, lo, hi int) { got[wk] += hi - lo }) // the pool is busy: inline
		if got != [2]int{100, 0} {
			t.Errorf("busy pool: worker shares %v, want [100 0]", got)
		}
	})
}

// TestClaim: a range is taken once, and only within its own call.
func TestClaim(t *testing.T) {
	p := New(0)
	p.claims.Store(5 << 32)
	if !p.claim(5, 1) || p.claim(5, 1) {
		t.Fatal("range 1 of call 5: want taken exactly once")
	}
	if p.claim(4, 2) || p.claim(6, 2) {
		t.Fatal("a claim for another call succeeded")
	}
	if !p.claim(5, 2) {
		t.Fatal("range 2 of call 5 not taken")
	}
	gen := uint64(1<<32 + 7)
	p.claims.Store(gen << 32) // the word keeps the generation's low 32 bits
	if !p.claim(gen, 3) {
		t.Fatal("range 3 of a call past 2^32 not taken")
	}
}
