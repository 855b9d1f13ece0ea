package dist

import (
	"fmt"
	"math"
	"testing"
)

// shapes are the hierarchies tested: procs simulated processes (members of a
// local world), each hosting local logical workers.
var shapes = func() (s []struct{ procs, local int }) {
	for _, procs := range []int{1, 2, 3} {
		for _, local := range []int{1, 2, 4} {
			s = append(s, struct{ procs, local int }{procs, local})
		}
	}
	return s
}()

// newHier returns the members of procs hierarchical groups over a local world
// of procs members, in global rank order. Each simulated process drives its
// world member from its leader's goroutine, as a process drives MPI.
func newHier(t *testing.T, procs, local int) []Collective {
	t.Helper()
	world := newLocal(t, procs)
	var all []Collective
	for p := range procs {
		members, err := NewHierarchical(world[p], local)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, members...)
	}
	for r, m := range all {
		if m.Rank() != r || m.Size() != procs*local {
			t.Fatalf("member %d has rank %d of %d, want %d of %d", r, m.Rank(), m.Size(), r, procs*local)
		}
	}
	return all
}

// hierOrder is the hierarchical sum: each process's workers in rank order,
// then the processes' sums in rank order.
func hierOrder(in [][]float32, local int) []float32 {
	var procs [][]float32
	for p := 0; p < len(in); p += local {
		procs = append(procs, inOrder(in[p:p+local]))
	}
	return inOrder(procs)
}

func TestHierAllReduce(t *testing.T) {
	for _, s := range shapes {
		n := s.procs * s.local
		for _, l := range lengths {
			in := inputs(n, l)
			hier := allReduce(t, newHier(t, s.procs, s.local), in)
			checkSum(t, in, hier, hierOrder(in, s.local))
			// The flat group adds in another order: equal within rounding.
			flat := allReduce(t, newLocal(t, n), in)
			for k := range flat[0] {
				var mag float64
				for r := range in {
					mag += math.Abs(float64(in[r][k]))
				}
				if d := math.Abs(float64(hier[0][k] - flat[0][k])); d > 2*float64(n)*0x1p-24*mag {
					t.Fatalf("%+v: element %d: hierarchical sum %v, flat %v", s, k, hier[0][k], flat[0][k])
				}
			}
		}
	}
}

func TestHierAllGather(t *testing.T) {
	for _, s := range shapes {
		testAllGather(t, newHier(t, s.procs, s.local))
	}
}

func TestHierBroadcast(t *testing.T) {
	for _, s := range shapes {
		testBroadcast(t, newHier(t, s.procs, s.local))
	}
}

func TestHierBarrier(t *testing.T) {
	for _, s := range shapes {
		testBarrier(t, newHier(t, s.procs, s.local))
	}
}

func TestHierMixed(t *testing.T) {
	for _, s := range shapes {
		testMixed(t, newHier(t, s.procs, s.local))
	}
}

func TestHierMismatch(t *testing.T) {
	// Within a process: fatal to the run, so every process learns of it.
	members := newHier(t, 2, 2)
	wantAll(t, each(t, members, func(m Collective) error {
		return m.AllReduce(make([]float32, 4+m.Rank()/3))
	}), "AllReduce length mismatch", "rank 2 passed 4 floats, rank 3 passed 5")

	// Between processes: the world reports it to every process, and the
	// group stays usable.
	members = newHier(t, 2, 2)
	wantAll(t, each(t, members, func(m Collective) error {
		return m.AllReduce(make([]float32, 4+m.Rank()/2))
	}), "between processes", "AllReduce length mismatch")
	testMixed(t, members)

	members = newHier(t, 2, 2)
	wantAll(t, each(t, members, func(m Collective) error {
		return m.Broadcast(make([]float32, 1), 4)
	}), "root 4 out of range [0, 4)")

	if _, err := NewHierarchical(newLocal(t, 1)[0], 0); err == nil {
		t.Fatal("NewHierarchical with 0 local members succeeded")
	}
}

func TestHierAbort(t *testing.T) {
	ops := map[string]func(Collective) error{
		"AllReduce": func(m Collective) error { return m.AllReduce(make([]float32, 1000)) },
		"AllGather": func(m Collective) error { _, err := m.AllGather([]byte("x")); return err },
		"Broadcast": func(m Collective) error { return m.Broadcast(make([]float32, 10), 0) },
		"Barrier":   func(m Collective) error { return m.Barrier() },
	}
	cases := []struct {
		procs, local, failed int
		close                bool
	}{
		{2, 2, 1, false},   // a follower
		{2, 2, 2, false},   // a leader
		{3, 4, 5, false},   // a follower of the middle process
		{1, 4, 1, true},    // Close fails the local group
		{2, 1, 1, false},   // one worker per process
		{3, 2, 0, false},   // rank 0 itself
		{1, 64, 63, false}, // many waiters
	}
	for name, op := range ops {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%+v", name, c), func(t *testing.T) {
				testAbort(t, newHier(t, c.procs, c.local), c.failed, c.close, op)
			})
		}
	}
}
