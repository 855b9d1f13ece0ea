package straggler

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The doc's worked expected maxima for K = 2, 4, 8, 16, 64 (exponential rate
// 1: H_K; standard Gaussian by integration; Pareto x_m = 1, a = 3).
var (
	ks          = []int{2, 4, 8, 16, 64}
	wantExp     = []float64{1.5, 2.0833, 2.7179, 3.3807, 4.7439}
	wantGauss   = []float64{0.5642, 1.0294, 1.4236, 1.7660, 2.3437}
	wantPareto  = []float64{1.8, 2.2091, 2.7458, 3.4359, 5.4259}
	unclipped   = gauss{mu: 0, sigma: 1, floor: math.Inf(-1)}
	paretoDelay = pareto{xm: 1, a: 3}
)

func TestClosedForms(t *testing.T) {
	for i, k := range ks {
		if got := ExpOrderStat(1, 0, k, k); math.Abs(got-wantExp[i]) > 1e-4 {
			t.Errorf("H_%d = %v, want %v", k, got, wantExp[i])
		}
		if got := ParetoMax(1, 3, k); math.Abs(got-wantPareto[i]) > 1e-4 {
			t.Errorf("Pareto max of %d = %v, want %v", k, got, wantPareto[i])
		}
		// The integral of the order statistic agrees with each closed form
		// and gives the Gaussian's.
		if got := OrderStat(exponential{mean: 1}, k, k); math.Abs(got-wantExp[i]) > 1e-4 {
			t.Errorf("integrated exponential max of %d = %v, want %v", k, got, wantExp[i])
		}
		if got := OrderStat(unclipped, k, k); math.Abs(got-wantGauss[i]) > 1e-4 {
			t.Errorf("integrated Gaussian max of %d = %v, want %v", k, got, wantGauss[i])
		}
		if got := OrderStat(paretoDelay, k, k); math.Abs(got-wantPareto[i]) > 1e-3 {
			t.Errorf("integrated Pareto max of %d = %v, want %v", k, got, wantPareto[i])
		}
	}
	// Backups, N = 8: waiting for the (8-b)-th arrival, b = 0, 1, 2.
	for b, want := range []float64{2.7179, 1.7179, 1.2179} {
		if got := ExpOrderStat(1, 0, 8-b, 8); math.Abs(got-want) > 1e-4 {
			t.Errorf("exponential, 8 workers, %d backups: %v, want %v", b, got, want)
		}
		if got := OrderStat(exponential{mean: 1}, 8-b, 8); math.Abs(got-want) > 1e-4 {
			t.Errorf("integrated exponential, %d backups: %v, want %v", b, got, want)
		}
	}
	for b, want := range []float64{1.4236, 0.8522, 0.4728} {
		if got := OrderStat(unclipped, 8-b, 8); math.Abs(got-want) > 1e-4 {
			t.Errorf("Gaussian, 8 workers, %d backups: %v, want %v", b, got, want)
		}
	}
}

// TestDelaysConformance: every registered delay samples reproducibly and with
// its stated mean and variance (within 5 standard errors over 200,000 draws),
// and its CDF is the empirical one at the mean.
func TestDelaysConformance(t *testing.T) {
	params := Params{Mean: 0.5, Shift: 0.2, Sigma: 0.8, Scale: 1, Shape: 4.5}
	for _, name := range Names() {
		d, err := New(name, params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		const n = 200000
		r := rand.New(rand.NewPCG(1, 2))
		var sum, sq float64
		below := 0
		m := d.Mean()
		for range n {
			x := d.Sample(r)
			sum += x
			sq += x * x
			if x <= m {
				below++
			}
		}
		mean := sum / n
		variance := sq/n - mean*mean
		if se := math.Sqrt(d.Variance() / n); math.Abs(mean-m) > 5*se+1e-12 {
			t.Errorf("%s: sample mean %v, stated %v (standard error %v)", name, mean, m, se)
		}
		if v := d.Variance(); math.Abs(variance-v) > 0.05*v+1e-12 {
			t.Errorf("%s: sample variance %v, stated %v", name, variance, v)
		}
		if f := float64(below) / n; math.Abs(f-d.CDF(m)) > 0.005 {
			t.Errorf("%s: %v of draws at most the mean, CDF says %v", name, f, d.CDF(m))
		}
		r1, r2 := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
		if d.Sample(r1) != d.Sample(r2) {
			t.Errorf("%s: the same stream gave different draws", name)
		}
	}
	if _, err := New("weibull", params); err == nil {
		t.Error("an unknown delay gave no error")
	}
	if _, err := New("pareto", Params{Scale: 1, Shape: 1}); err == nil {
		t.Error("pareto with shape 1 (no mean) gave no error")
	}
}

// TestSimulateAgainstIntegral: the simulated mean of the (n-b)-th arrival is
// within 4 standard errors of the integral, for every delay and a few n, b.
func TestSimulateAgainstIntegral(t *testing.T) {
	params := Params{Mean: 0.5, Shift: 0.2, Sigma: 0.8, Scale: 1, Shape: 4.5}
	for _, name := range Names() {
		d, _ := New(name, params)
		for _, c := range [][2]int{{2, 0}, {8, 0}, {8, 2}, {32, 0}} {
			sim, err := Simulate(d, c[0], c[1], 40000, 3)
			if err != nil {
				t.Fatal(err)
			}
			want := OrderStat(d, c[0]-c[1], c[0])
			if math.Abs(sim.Mean-want) > 4*sim.StdErr+1e-9 {
				t.Errorf("%s, %d workers, %d backups: simulated %v ± %v, integral %v", name, c[0], c[1], sim.Mean, sim.StdErr, want)
			}
		}
	}
	if _, err := Simulate(none{}, 4, 4, 10, 1); err == nil {
		t.Error("4 backups of 4 workers gave no error")
	}
}

// TestSlowWorker: without delays a worker twice as slow makes every step take
// 2C (extra 1); with exponential delays of mean 0.5 and one worker alone, the
// extra time is factor*(1 + 0.5) - 1; simulation agrees with the integral.
func TestSlowWorker(t *testing.T) {
	if got := SlowWorker(none{}, 8, 2); math.Abs(got-1) > 1e-9 {
		t.Errorf("no delays, factor 2: %v, want 1", got)
	}
	e := exponential{mean: 0.5}
	if got := SlowWorker(e, 1, 2); math.Abs(got-2) > 1e-4 {
		t.Errorf("one worker, factor 2, exp 0.5: %v, want 2*(1.5)-1 = 2", got)
	}
	for _, n := range []int{2, 8, 32} {
		sim, err := SimulateSlow(e, n, 1.5, 40000, 5)
		if err != nil {
			t.Fatal(err)
		}
		if want := SlowWorker(e, n, 1.5); math.Abs(sim.Mean-want) > 4*sim.StdErr {
			t.Errorf("%d workers, factor 1.5: simulated %v ± %v, integral %v", n, sim.Mean, sim.StdErr, want)
		}
	}
}
