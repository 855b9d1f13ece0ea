package dist

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var (
	groupSizes = []int{1, 2, 3, 4, 8, 64}
	lengths    = []int{0, 1, 7, 1000, 100003}
)

// each runs f for every member in the member's own goroutine, as logical
// workers do, and returns their errors by rank. A hang fails the test (after
// 60 s: under mpirun -np 4 on a loaded 2-core machine a healthy run has taken
// more than 10).
func each(t *testing.T, members []Collective, f func(m Collective) error) []error {
	t.Helper()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { errs[i] = f(m) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("collective did not return within 60 s")
	}
	return errs
}

// noErrors fails the test on any member's error.
func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func newLocal(t *testing.T, n int) []Collective {
	t.Helper()
	members, err := NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	return members
}

// inputs returns each rank's AllReduce input: random values of mixed signs
// and magnitudes, so that the summation order shows in the low bits.
func inputs(n, l int) [][]float32 {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(l)))
	in := make([][]float32, n)
	for r := range in {
		in[r] = make([]float32, l)
		for k := range in[r] {
			in[r][k] = float32((rng.Float64()*2 - 1) * math.Exp2(float64(rng.IntN(8))))
		}
	}
	return in
}

// checkSum checks every member's result against the float64 sum within
// float32 rounding (n additions, each off by at most half an ulp of a partial
// sum bounded by the sum of magnitudes), that all members agree to the bit,
// and, when exact is given, against it to the bit.
func checkSum(t *testing.T, in, out [][]float32, exact []float32) {
	t.Helper()
	n := len(in)
	for k := range out[0] {
		var ref, mag float64
		for r := range in {
			ref += float64(in[r][k])
			mag += math.Abs(float64(in[r][k]))
		}
		if got, tol := float64(out[0][k]), float64(n)*0x1p-24*mag; math.Abs(got-ref) > tol {
			t.Fatalf("element %d: sum %v, float64 reference %v (tolerance %g)", k, got, ref, tol)
		}
		if exact != nil && math.Float32bits(out[0][k]) != math.Float32bits(exact[k]) {
			t.Fatalf("element %d: sum %v, summing in rank order gives %v", k, out[0][k], exact[k])
		}
	}
	for r := range out[1:] {
		if !bytes.Equal(bits(out[0]), bits(out[r+1])) {
			t.Fatalf("rank %d's sum differs from rank 0's", r+1)
		}
	}
}

// bits views a float32 slice as its bytes, for fast exact comparisons.
func bits(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// inOrder sums in[0] + in[1] + ... in float32, element by element.
func inOrder(in [][]float32) []float32 {
	s := append([]float32(nil), in[0]...)
	for _, x := range in[1:] {
		for k := range s {
			s[k] += x[k]
		}
	}
	return s
}

// allReduce runs one AllReduce of in over members and returns the results.
func allReduce(t *testing.T, members []Collective, in [][]float32) [][]float32 {
	t.Helper()
	out := make([][]float32, len(in))
	for r := range in {
		out[r] = append(make([]float32, 0, len(in[r])), in[r]...)
	}
	noErrors(t, each(t, members, func(m Collective) error { return m.AllReduce(out[m.Rank()]) }))
	return out
}

func TestLocalAllReduce(t *testing.T) {
	for _, n := range groupSizes {
		for _, l := range lengths {
			in := inputs(n, l)
			checkSum(t, in, allReduce(t, newLocal(t, n), in), inOrder(in))
		}
	}
}

// payload is rank r's AllGather payload in round i: lengths vary with the
// rank, rank 1's is always empty, and the bytes name rank and round.
func payload(r, i, l int) []byte {
	if r == 1 {
		return nil
	}
	p := make([]byte, (l+r*7919+i)%(l+1))
	for k := range p {
		p[k] = byte(r*31 + i*7 + k)
	}
	return p
}

func checkGathered(r int, all, want [][]byte, round int) error {
	if len(all) != len(want) {
		return fmt.Errorf("rank %d: %d payloads, want %d", r, len(all), len(want))
	}
	for q, p := range all {
		if !bytes.Equal(p, want[q]) {
			return fmt.Errorf("rank %d, round %d: payload of rank %d has %d bytes, not the %d sent", r, round, q, len(p), len(want[q]))
		}
	}
	return nil
}

// testAllGather runs several AllGathers back to back, each rank at its own
// pace, so that fast ranks register their next call while slow ones still
// read the previous result.
func testAllGather(t *testing.T, members []Collective) {
	t.Helper()
	const rounds = 3
	for _, l := range lengths {
		var want [rounds][][]byte
		for i := range want {
			for r := range members {
				want[i] = append(want[i], payload(r, i, l))
			}
		}
		noErrors(t, each(t, members, func(m Collective) error {
			for i := range rounds {
				all, err := m.AllGather(want[i][m.Rank()])
				if err != nil {
					return err
				}
				if err := checkGathered(m.Rank(), all, want[i], i); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

func TestLocalAllGather(t *testing.T) {
	for _, n := range groupSizes {
		testAllGather(t, newLocal(t, n))
	}
}

// testBroadcast broadcasts from every root (from a few when that would move
// gigabytes); the others start with junk.
func testBroadcast(t *testing.T, members []Collective) {
	t.Helper()
	n := len(members)
	for _, l := range lengths {
		roots := make([]int, n)
		for i := range roots {
			roots[i] = i
		}
		if n*n*l > 1e8 {
			roots = []int{0, 1, n / 2, n - 1}
		}
		want := inputs(1, l)[0]
		junk := make([]float32, l)
		for k := range junk {
			junk[k] = float32(math.NaN())
		}
		bufs := make([][]float32, n)
		for r := range bufs {
			bufs[r] = make([]float32, l)
		}
		noErrors(t, each(t, members, func(m Collective) error {
			buf := bufs[m.Rank()]
			for _, root := range roots {
				if m.Rank() == root {
					copy(buf, want)
				} else {
					copy(buf, junk)
				}
				if err := m.Broadcast(buf, root); err != nil {
					return err
				}
				if !bytes.Equal(bits(buf), bits(want)) {
					return fmt.Errorf("rank %d: broadcast of %d floats from root %d not received", m.Rank(), l, root)
				}
			}
			return nil
		}))
	}
}

func TestLocalBroadcast(t *testing.T) {
	for _, n := range groupSizes {
		testBroadcast(t, newLocal(t, n))
	}
}

// testBarrier checks that nobody leaves a barrier before everybody arrived.
func testBarrier(t *testing.T, members []Collective) {
	t.Helper()
	const rounds = 5
	var arrived [rounds]atomic.Int32
	noErrors(t, each(t, members, func(m Collective) error {
		for i := range rounds {
			arrived[i].Add(1)
			if err := m.Barrier(); err != nil {
				return err
			}
			if got := arrived[i].Load(); int(got) != len(members) {
				return fmt.Errorf("rank %d left barrier %d after %d of %d arrivals", m.Rank(), i, got, len(members))
			}
		}
		return nil
	}))
}

func TestLocalBarrier(t *testing.T) {
	for _, n := range groupSizes {
		testBarrier(t, newLocal(t, n))
	}
}

// testMixed interleaves all operations so that registrations of different
// operations follow each other without a pause.
func testMixed(t *testing.T, members []Collective) {
	t.Helper()
	n := len(members)
	want := make([][][]byte, 4)
	for i := range want {
		for r := range n {
			want[i] = append(want[i], payload(r, i, 5))
		}
	}
	noErrors(t, each(t, members, func(m Collective) error {
		r := m.Rank()
		for round := range want {
			buf := []float32{float32(r), 1, float32(round)}
			if err := m.AllReduce(buf); err != nil {
				return err
			}
			if want := []float32{float32(n * (n - 1) / 2), float32(n), float32(n * round)}; !bytes.Equal(bits(buf), bits(want)) {
				return fmt.Errorf("rank %d round %d: AllReduce %v, want %v", r, round, buf, want)
			}
			all, err := m.AllGather(want[round][r])
			if err != nil {
				return err
			}
			if err := checkGathered(r, all, want[round], round); err != nil {
				return err
			}
			root := round % n
			buf = []float32{float32(r)}
			if err := m.Broadcast(buf, root); err != nil {
				return err
			}
			if buf[0] != float32(root) {
				return fmt.Errorf("rank %d round %d: Broadcast gave %v, want %d", r, round, buf[0], root)
			}
			if err := m.Barrier(); err != nil {
				return err
			}
		}
		return nil
	}))
}

func TestLocalMixed(t *testing.T) {
	for _, n := range groupSizes {
		testMixed(t, newLocal(t, n))
	}
}

// TestLocalAllReduceScaled checks AllReduceScaled against AllReduce
// followed by one float32 multiplication per element, to the bit, for the
// members that keep the result; the others' buffers are not written except
// rank 0's (the accumulator). A plain AllReduce between scaled ones is
// unaffected.
func TestLocalAllReduceScaled(t *testing.T) {
	for _, n := range groupSizes {
		for _, l := range lengths {
			in := inputs(n, l)
			scale := 1 / float32(n)
			want := inOrder(in)
			for k := range want {
				want[k] *= scale
			}
			members := newLocal(t, n)
			out := make([][]float32, n)
			for r := range in {
				out[r] = append([]float32(nil), in[r]...)
			}
			keep := func(r int) bool { return r%3 != 1 } // ranks 1, 4, 7, ... only contribute
			noErrors(t, each(t, members, func(m Collective) error {
				return m.(Averager).AllReduceScaled(out[m.Rank()], scale, keep(m.Rank()))
			}))
			for r := range out {
				switch {
				case keep(r):
					if !bytes.Equal(bits(out[r]), bits(want)) {
						t.Fatalf("n=%d l=%d: rank %d's result differs from the rank-order sum times %v", n, l, r, scale)
					}
				case r != 0:
					if !bytes.Equal(bits(out[r]), bits(in[r])) {
						t.Fatalf("n=%d l=%d: rank %d does not keep the result, but its buffer was written", n, l, r)
					}
				}
			}
			if l == 1000 {
				checkSum(t, in, allReduce(t, members, in), inOrder(in))
			}
		}
	}
	members := newLocal(t, 3)
	wantAll(t, each(t, members, func(m Collective) error {
		if m.Rank() == 2 {
			return m.AllReduce(make([]float32, 4))
		}
		return m.(Averager).AllReduceScaled(make([]float32, 4), 0.5, true)
	}), "AllReduce scale mismatch", "rank 0 scaled by 0.5, rank 2 did not scale")
	wantAll(t, each(t, members, func(m Collective) error {
		return m.(Averager).AllReduceScaled(make([]float32, 4), float32(m.Rank()+1), true)
	}), "AllReduce scale mismatch", "rank 0 scaled by 1, rank 1 scaled by 2")
	testMixed(t, members)
}

// wantAll checks that every member got an error containing all of parts.
func wantAll(t *testing.T, errs []error, parts ...string) {
	t.Helper()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error, want one mentioning %q", r, parts)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("rank %d: error %q does not mention %q", r, err, p)
			}
		}
	}
}

func TestLocalMismatch(t *testing.T) {
	members := newLocal(t, 3)
	wantAll(t, each(t, members, func(m Collective) error {
		return m.AllReduce(make([]float32, 4+m.Rank()/2))
	}), "AllReduce length mismatch", "rank 0 passed 4 floats, rank 2 passed 5")
	wantAll(t, each(t, members, func(m Collective) error {
		return m.Broadcast(make([]float32, 3-m.Rank()), 0)
	}), "Broadcast length mismatch", "rank 0 passed 3 floats, rank 1 passed 2")
	wantAll(t, each(t, members, func(m Collective) error {
		return m.Broadcast(make([]float32, 2), m.Rank()%2)
	}), "root mismatch", "rank 0 named root 0, rank 1 named root 1")
	wantAll(t, each(t, members, func(m Collective) error {
		return m.Broadcast(make([]float32, 2), 3)
	}), "root 3 out of range")
	wantAll(t, each(t, members, func(m Collective) error {
		if m.Rank() == 1 {
			return m.Barrier()
		}
		return m.AllReduce(nil)
	}), "different collectives", "rank 0 AllReduce, rank 1 Barrier")
	// The group is still usable.
	testMixed(t, members)
}

// testAbort makes member failed fail (by Abort, or by Close when close is
// set) while the others wait in op, and checks that all of them return an
// error naming it within a second, and that later calls fail too.
func testAbort(t *testing.T, members []Collective, failed int, close bool, op func(Collective) error) {
	t.Helper()
	cause := errors.New("out of memory")
	if close {
		cause = ErrClosed
	}
	var start time.Time
	errs := each(t, members, func(m Collective) error {
		if m.Rank() == failed {
			time.Sleep(20 * time.Millisecond) // let the others block first
			start = time.Now()
			if close {
				return m.Close()
			}
			m.(Aborter).Abort(cause)
			return nil
		}
		return op(m)
	})
	if returned := time.Since(start); returned > time.Second {
		t.Fatalf("members returned %v after the failure", returned)
	}
	errs = append(errs[:failed], errs[failed+1:]...)
	wantAll(t, errs, fmt.Sprintf("rank %d failed", failed), cause.Error())
	for _, err := range errs {
		var re *RankError
		if !errors.As(err, &re) || re.Rank != failed || !errors.Is(err, cause) {
			t.Fatalf("error %v is not a RankError for rank %d with its cause", err, failed)
		}
	}
	// The group stays failed.
	for _, m := range members {
		if m.Rank() != failed && m.Barrier() == nil {
			t.Fatalf("rank %d: Barrier succeeded on a failed group", m.Rank())
		}
	}
}

func TestLocalAbort(t *testing.T) {
	ops := map[string]func(Collective) error{
		"AllReduce": func(m Collective) error { return m.AllReduce(make([]float32, 1000)) },
		"AllGather": func(m Collective) error { _, err := m.AllGather([]byte("x")); return err },
		"Broadcast": func(m Collective) error { return m.Broadcast(make([]float32, 10), 0) },
		"Barrier":   func(m Collective) error { return m.Barrier() },
	}
	for name, op := range ops {
		for _, n := range []int{2, 4, 64} {
			for _, close := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/n=%d/close=%v", name, n, close), func(t *testing.T) {
					testAbort(t, newLocal(t, n), n/2, close, op)
				})
			}
		}
	}
}

func TestLocalClosedMember(t *testing.T) {
	members := newLocal(t, 2)
	if err := members[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := members[0].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := members[0].AllReduce(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllReduce on a closed member: %v, want ErrClosed", err)
	}
	if _, err := NewLocal(0); err == nil {
		t.Fatal("NewLocal(0) succeeded")
	}
}

// TestLocalNoAllocs checks that steady-state calls do not allocate.
func TestLocalNoAllocs(t *testing.T) {
	const rounds = 200
	members := newLocal(t, 4)
	bufs := make([][]float32, 4)
	for r := range bufs {
		bufs[r] = make([]float32, 1000)
	}
	step := func() {
		noErrors(t, each(t, members, func(m Collective) error {
			for range rounds {
				if err := m.AllReduce(bufs[m.Rank()]); err != nil {
					return err
				}
				if _, err := m.AllGather(nil); err != nil {
					return err
				}
				if err := m.Broadcast(bufs[m.Rank()], 1); err != nil {
					return err
				}
				if err := m.Barrier(); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	step() // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	step()
	runtime.ReadMemStats(&after)
	// each's goroutines and channel cost a few dozen allocations.
	if allocs := after.Mallocs - before.Mallocs; allocs > 100 {
		t.Fatalf("%d allocations for %d calls of each operation on 4 members", allocs, rounds)
	}
}

func BenchmarkAllReduce(b *testing.B) {
	const l = 1 << 20
	for _, n := range []int{2, 4, 64} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			members, err := NewLocal(n)
			if err != nil {
				b.Fatal(err)
			}
			bufs := inputs(n, l)
			b.SetBytes(4 * l) // algorithm bandwidth: bytes all-reduced per member per second
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, m := range members {
				wg.Go(func() {
					for range b.N {
						if err := m.AllReduce(bufs[m.Rank()]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
