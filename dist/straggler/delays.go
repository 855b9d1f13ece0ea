package straggler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// none: every worker takes exactly C.
type none struct{}

func (none) Sample(*rand.Rand) float64 { return 0 }
func (none) Mean() float64             { return 0 }
func (none) Variance() float64         { return 0 }
func (none) CDF(x float64) float64 {
	if x < 0 {
		return 0
	}
	return 1
}
func (none) PDF(float64) float64         { return 0 }
func (none) Support() (float64, float64) { return 0, 0 }

// exponential: X = Shift + Exp(mean Mean); the memoryless tail of the
// straggler literature (Lee et al. 2018 model task times as shifted
// exponentials).
type exponential struct{ mean, shift float64 }

func newExp(p Params) (Delay, error) {
	if !(p.Mean > 0) || math.IsInf(p.Mean, 1) {
		return nil, fmt.Errorf("straggler: exp mean %v, expected a finite mean > 0", p.Mean)
	}
	return exponential{mean: p.Mean}, nil
}

func newShiftedExp(p Params) (Delay, error) {
	d, err := newExp(p)
	if err != nil {
		return nil, err
	}
	if !(p.Shift >= 0) || math.IsInf(p.Shift, 1) {
		return nil, fmt.Errorf("straggler: shifted-exp shift %v, expected a finite shift >= 0", p.Shift)
	}
	e := d.(exponential)
	e.shift = p.Shift
	return e, nil
}

func (e exponential) Sample(r *rand.Rand) float64 { return e.shift + e.mean*r.ExpFloat64() }
func (e exponential) Mean() float64               { return e.shift + e.mean }
func (e exponential) Variance() float64           { return e.mean * e.mean }
func (e exponential) CDF(x float64) float64 {
	if x < e.shift {
		return 0
	}
	return -math.Expm1(-(x - e.shift) / e.mean)
}
func (e exponential) PDF(x float64) float64 {
	if x < e.shift {
		return 0
	}
	return math.Exp(-(x-e.shift)/e.mean) / e.mean
}
func (e exponential) Support() (float64, float64) { return e.shift, e.shift + 60*e.mean }

// gauss: X = max(N(Mean, Sigma^2), floor), floor -1 so that a step never
// takes negative time; the clipped mass sits at the floor.
type gauss struct{ mu, sigma, floor float64 }

func newGauss(p Params) (Delay, error) {
	if !(p.Sigma > 0) || math.IsInf(p.Sigma, 1) || math.IsNaN(p.Mean) || math.IsInf(p.Mean, 0) {
		return nil, fmt.Errorf("straggler: gauss mean %v and sigma %v, expected a finite mean and a finite sigma > 0", p.Mean, p.Sigma)
	}
	return gauss{mu: p.Mean, sigma: p.Sigma, floor: -1}, nil
}

func (g gauss) Sample(r *rand.Rand) float64 { return max(g.mu+g.sigma*r.NormFloat64(), g.floor) }
func (g gauss) phi(x float64) float64       { return 0.5 * math.Erfc(-(x-g.mu)/(g.sigma*math.Sqrt2)) }

// Mean and Variance of the clipped normal (Johnson et al.'s censored-normal
// moments): with a = (floor - mu)/sigma, E = floor*Phi(a) + mu*(1-Phi(a)) +
// sigma*phi(a), and E[X^2] from the same pieces.
func (g gauss) Mean() float64 {
	if math.IsInf(g.floor, -1) {
		return g.mu
	}
	a := (g.floor - g.mu) / g.sigma
	return g.floor*stdCDF(a) + g.mu*(1-stdCDF(a)) + g.sigma*stdPDF(a)
}
func (g gauss) Variance() float64 {
	if math.IsInf(g.floor, -1) {
		return g.sigma * g.sigma
	}
	a := (g.floor - g.mu) / g.sigma
	tail := 1 - stdCDF(a)
	// E[X^2 ; X > floor] for X ~ N(mu, sigma^2).
	second := (g.mu*g.mu+g.sigma*g.sigma)*tail + g.sigma*(g.mu+g.floor)*stdPDF(a)
	m := g.Mean()
	return g.floor*g.floor*stdCDF(a) + second - m*m
}
func (g gauss) CDF(x float64) float64 {
	if x < g.floor {
		return 0
	}
	return g.phi(x)
}
func (g gauss) PDF(x float64) float64 {
	if x < g.floor {
		return 0
	}
	return stdPDF((x-g.mu)/g.sigma) / g.sigma
}
func (g gauss) Support() (float64, float64) {
	return max(g.floor, g.mu-12*g.sigma), g.mu + 12*g.sigma
}

func stdCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
func stdPDF(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }

// pareto: X ~ Pareto(x_m = Scale, a = Shape), P(X > x) = (x_m/x)^a: a heavy
// tail, the maximum growing like K^(1/a).
type pareto struct{ xm, a float64 }

func newPareto(p Params) (Delay, error) {
	if !(p.Scale > 0) || !(p.Shape > 1) || math.IsInf(p.Scale, 1) || math.IsInf(p.Shape, 1) {
		return nil, errors.New("straggler: pareto needs a finite scale x_m > 0 and a finite shape a > 1 (a finite mean)")
	}
	return pareto{xm: p.Scale, a: p.Shape}, nil
}

func (p pareto) Sample(r *rand.Rand) float64 { return p.xm * math.Pow(1-r.Float64(), -1/p.a) }
func (p pareto) Mean() float64               { return p.a * p.xm / (p.a - 1) }
func (p pareto) Variance() float64 {
	if p.a <= 2 {
		return math.Inf(1)
	}
	return p.xm * p.xm * p.a / ((p.a - 1) * (p.a - 1) * (p.a - 2))
}
func (p pareto) CDF(x float64) float64 {
	if x < p.xm {
		return 0
	}
	return 1 - math.Pow(p.xm/x, p.a)
}
func (p pareto) PDF(x float64) float64 {
	if x < p.xm {
		return 0
	}
	return p.a * math.Pow(p.xm, p.a) / math.Pow(x, p.a+1)
}

// Support ends where the survival of the maximum of 1,000 draws is below
// 1e-12 at the shape's tail: (x_m/x)^a * 1000 < 1e-12.
func (p pareto) Support() (float64, float64) { return p.xm, p.xm * math.Pow(1e15, 1/p.a) }

// ParetoMax is E[max of n draws] = x_m Gamma(n+1) Gamma(1-1/a) / Gamma(n+1-1/a).
func ParetoMax(xm, a float64, n int) float64 {
	l1, _ := math.Lgamma(float64(n) + 1)
	l2, _ := math.Lgamma(1 - 1/a)
	l3, _ := math.Lgamma(float64(n) + 1 - 1/a)
	return xm * math.Exp(l1+l2-l3)
}

// ExpOrderStat is E[X_(k:n)] of shift + Exp(mean): shift + mean (H_n - H_(n-k)).
func ExpOrderStat(mean, shift float64, k, n int) float64 {
	return shift + mean*(Harmonic(n)-Harmonic(n-k))
}
