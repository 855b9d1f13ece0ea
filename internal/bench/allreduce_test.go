package bench

import (
	"math"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
)

func TestFitRelative(t *testing.T) {
	// Exact points of a = 5 us, b = 1 ns/B over 1 KB .. 100 MB come back exactly.
	var S, T []float64
	for s := 1e3; s <= 1e8; s *= 4 {
		S, T = append(S, s), append(T, 5e-6+1e-9*s)
	}
	f, err := FitRelative(S, T)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(f.Intercept-5e-6) > 1e-15 || math.Abs(f.Slope-1e-9) > 1e-19 || f.RMSRelError > 1e-12 || f.Points != len(S) {
		t.Fatalf("fit %+v, want intercept 5e-6, slope 1e-9, no error", f)
	}
	// Times that want a negative intercept get a = 0. Points (1, 1) and
	// (2, 3): unconstrained a = -1, b = 2; with a = 0 the relative-error
	// optimum is b = sum(S/T) / sum((S/T)^2) = (1 + 2/3)/(1 + 4/9) = 15/13.
	f, err = FitRelative([]float64{1, 2}, []float64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if f.Intercept != 0 || math.Abs(f.Slope-15.0/13) > 1e-15 {
		t.Fatalf("fit %+v, want intercept 0 and slope 15/13", f)
	}
	// Relative errors: (15/13 - 1)/1 = 2/13 and (30/13 - 3)/3 = -3/13.
	if math.Abs(f.MaxRelError-3.0/13) > 1e-15 || math.Abs(f.RMSRelError-math.Sqrt((4.0+9)/169/2)) > 1e-15 {
		t.Fatalf("fit errors %+v, want max 3/13 and rms sqrt(13/338)", f)
	}
	for _, bad := range [][2][]float64{{{1}, {1}}, {{1, 2}, {1, 0}}, {{1, 2}, {1}}} {
		if _, err := FitRelative(bad[0], bad[1]); err == nil {
			t.Errorf("fit of %v: no error", bad)
		}
	}
}

func TestAlphaBeta(t *testing.T) {
	f := LinearFit{Intercept: 12e-6, Slope: 3e-9}
	for _, c := range []struct {
		algo        string
		members     int
		alpha, beta float64
	}{
		{"ring", 2, 6e-6, 3e-9},       // 2(N-1) = 2 latencies, 2(N-1)/N = 1 byte a byte
		{"ring", 4, 2e-6, 2e-9},       // 6 latencies, 1.5 bytes a byte
		{"rd", 4, 6e-6, 1.5e-9},       // lg 4 = 2 latencies and 2 bytes a byte
		{"rhd", 4, 3e-6, 2e-9},        // 2 lg 4 = 4 latencies, 1.5 bytes a byte
		{"ps", 4, 6e-6, 3e-9 / 8.0},   // 2 latencies, 2N = 8 bytes a byte
		{"tree", 8, 2e-6, 3e-9 / 6.0}, // 2 lg 8 = 6 latencies and 6 bytes a byte
	} {
		a, b, err := AlphaBeta(f, c.algo, c.members)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(a-c.alpha) > 1e-18 || math.Abs(b-c.beta) > 1e-21 {
			t.Errorf("%s on %d: alpha %v, beta %v; want %v, %v", c.algo, c.members, a, b, c.alpha, c.beta)
		}
	}
	if _, _, err := AlphaBeta(f, "mesh", 4); err == nil {
		t.Error("an unknown algorithm gave no error")
	}
}

func TestMeasureAllReduce(t *testing.T) {
	members, err := dist.NewLocal(3)
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]AllReduceTiming, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = MeasureAllReduce(m, []int64{10, 4096}, 3)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	if len(res[0]) != 2 || res[0][0].Bytes != 8 || res[0][1].Bytes != 4096 || res[0][1].Reps != 3 {
		t.Fatalf("timings %+v, want sizes 8 (10 rounded down to whole float32 values) and 4096, 3 repetitions", res[0])
	}
	for i := range res {
		for k, r := range res[i] {
			if !(r.Best > 0) || r.Best > r.Median || r != res[0][k] {
				t.Fatalf("member %d size %d: %+v (member 0: %+v); want 0 < best <= median, the same on every member", i, k, r, res[0][k])
			}
		}
	}
}
