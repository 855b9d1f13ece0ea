// Package straggler models the compute delays of data-parallel workers and
// what they cost a synchronous step: with K workers whose step times are
// i.i.d., the step waits for the slowest (or, with b backup workers, for the
// (K-b)-th to finish). It samples step times from named delay distributions
// (Delays), simulates the expected step time, and gives it in closed form or
// by numerical integration of the order statistic, to check one against the
// other.
package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Delay is a distribution of a worker's extra time X: its step lasts
// C*(1 + X) for compute time C.
type Delay interface {
	// Sample draws X.
	Sample(r *rand.Rand) float64
	// Mean and Variance of X (Variance +Inf where it does not exist).
	Mean() float64
	Variance() float64
	// CDF and PDF of X, for the order statistics.
	CDF(x float64) float64
	PDF(x float64) float64
	// Support is an interval that holds all but a negligible tail of X's
	// mass, for the numerical integration.
	Support() (lo, hi float64)
}

// Params are the parameters a delay distribution reads: Mean for exp and
// shifted-exp (of the exponential part), Shift for shifted-exp, Mean and Sigma
// for gauss, Scale (x_m) and Shape (a) for pareto.
type Params struct {
	Mean, Shift, Sigma, Scale, Shape float64
}

// Delays maps a distribution's name to its constructor.
var Delays = map[string]func(Params) (Delay, error){
	"none":        func(Params) (Delay, error) { return none{}, nil },
	"exp":         newExp,
	"shifted-exp": newShiftedExp,
	"gauss":       newGauss,
	"pareto":      newPareto,
}

// Names lists Delays' keys, sorted.
func Names() []string {
	out := make([]string, 0, len(Delays))
	for n := range Delays {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// New is the named distribution with p.
func New(name string, p Params) (Delay, error) {
	c, ok := Delays[name]
	if !ok {
		return nil, fmt.Errorf("straggler: unknown delay %q (valid: %v)", name, Names())
	}
	return c(p)
}

// Harmonic is H_k = 1 + 1/2 + ... + 1/k (0 for k <= 0), smallest terms first.
func Harmonic(k int) float64 {
	var h float64
	for i := k; i >= 1; i-- {
		h += 1 / float64(i)
	}
	return h
}

// OrderStat is E[X_(k:n)], the expected k-th smallest of n i.i.d. draws of d
// (k = n: the expected maximum), by numerical integration of the survival
// function: E[Y] = lo + int_lo^hi (1 - P(Y <= y)) dy for Y >= lo, with
// P(X_(k:n) <= y) = sum_{j=k..n} C(n,j) F(y)^j (1-F(y))^(n-j). Working from
// the CDF alone handles point masses (a clipped Gaussian) as well as
// densities.
func OrderStat(d Delay, k, n int) float64 {
	if k < 1 || k > n {
		return math.NaN()
	}
	lo, hi := d.Support()
	survival := func(y float64) float64 {
		F := d.CDF(y)
		var p float64 // P(X_(k:n) <= y)
		for j := k; j <= n; j++ {
			p += math.Exp(logBinom(n, j) + xlogy(float64(j), F) + xlogy(float64(n-j), 1-F))
		}
		return 1 - min(p, 1)
	}
	return lo + integrate(lo, hi, survival)
}

// integrate is the integral of f over [lo, hi] by composite Simpson's rule,
// 40,000 intervals of t in y = lo + c(e^t - 1): fine steps near lo, where a
// survival function falls fastest, and geometric ones along a heavy tail.
func integrate(lo, hi float64, f func(float64) float64) float64 {
	if hi <= lo {
		return 0
	}
	c := (hi - lo) / 1e6
	T := math.Log1p((hi - lo) / c)
	g := func(t float64) float64 { return f(lo+c*math.Expm1(t)) * c * math.Exp(t) }
	const m = 40000
	h := T / m
	s := g(0) + g(T)
	for i := 1; i < m; i++ {
		if i%2 == 1 {
			s += 4 * g(float64(i)*h)
		} else {
			s += 2 * g(float64(i)*h)
		}
	}
	return s * h / 3
}

// logBinom is log C(n, j).
func logBinom(n, j int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(j + 1))
	c, _ := math.Lgamma(float64(n - j + 1))
	return a - b - c
}

// xlogy is x*log(y), 0 when x is 0 (0^0 = 1 in the binomial terms).
func xlogy(x, y float64) float64 {
	if x == 0 {
		return 0
	}
	return x * math.Log(y)
}

// Simulation is the measured mean of a synchronous step's extra time.
type Simulation struct {
	Mean, StdErr float64
	Trials       int
}

// Simulate draws trials steps of n workers from d and returns the mean and
// standard error of the (n-backups)-th smallest delay: the time a step that
// keeps the first n-backups gradients waits beyond the compute time (in units
// of C). The draws come from a PCG stream of seed.
func Simulate(d Delay, n, backups, trials int, seed uint64) (Simulation, error) {
	if n < 1 || backups < 0 || backups >= n || trials < 2 {
		return Simulation{}, fmt.Errorf("straggler: %d workers, %d backups, %d trials: expected workers >= 1, 0 <= backups < workers, trials >= 2", n, backups, trials)
	}
	r := rand.New(rand.NewPCG(seed, uint64(n)<<16|uint64(backups)))
	xs := make([]float64, n)
	var sum, sq float64
	for range trials {
		for i := range xs {
			xs[i] = d.Sample(r)
		}
		var v float64
		if backups == 0 {
			v = slices.Max(xs)
		} else {
			sort.Float64s(xs)
			v = xs[n-backups-1]
		}
		sum += v
		sq += v * v
	}
	mean := sum / float64(trials)
	variance := (sq - float64(trials)*mean*mean) / float64(trials-1)
	return Simulation{Mean: mean, StdErr: math.Sqrt(max(variance, 0) / float64(trials)), Trials: trials}, nil
}

// SlowWorker is the expected extra time of a step in which worker 0 is a
// fixed factor slower than the others: it takes factor*C*(1+X_0), the others
// C*(1+X_i), and the step waits for the last, so the extra time in units of
// C is E[max(factor (1+X_0), max_i (1+X_i))] - 1, integrated from the CDFs.
func SlowWorker(d Delay, n int, factor float64) float64 {
	lo, hi := d.Support()
	// Step times T = 1 + X, and the slow one's factor (1 + X).
	tlo, thi := 1+lo, factor*(1+hi)
	if n > 1 {
		tlo = min(tlo, factor*(1+lo))
	}
	cdf := func(y float64) float64 {
		p := d.CDF(y/factor - 1)
		if n > 1 {
			p *= math.Pow(d.CDF(y-1), float64(n-1))
		}
		return p
	}
	return tlo + integrate(tlo, thi, func(y float64) float64 { return 1 - cdf(y) }) - 1
}

// SimulateSlow is Simulate for a step whose worker 0 is factor times slower.
func SimulateSlow(d Delay, n int, factor float64, trials int, seed uint64) (Simulation, error) {
	if n < 1 || !(factor >= 1) || trials < 2 {
		return Simulation{}, fmt.Errorf("straggler: %d workers, slow factor %v, %d trials: expected workers >= 1, factor >= 1, trials >= 2", n, factor, trials)
	}
	r := rand.New(rand.NewPCG(seed, uint64(n)<<16|0xffff))
	var sum, sq float64
	for range trials {
		v := factor * (1 + d.Sample(r))
		for range n - 1 {
			v = max(v, 1+d.Sample(r))
		}
		v--
		sum += v
		sq += v * v
	}
	mean := sum / float64(trials)
	variance := (sq - float64(trials)*mean*mean) / float64(trials-1)
	return Simulation{Mean: mean, StdErr: math.Sqrt(max(variance, 0) / float64(trials)), Trials: trials}, nil
}
