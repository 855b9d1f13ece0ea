package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gradwire/gradwire/internal/train"
)

// measuresFile is what gradwire measure writes into a run directory.
const measuresFile = "measures.json"

// readMeasures reads a run's measures.json, nil when it has none.
func readMeasures(dir string) (*train.Measures, error) {
	raw, err := os.ReadFile(filepath.Join(dir, measuresFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m train.Measures
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, measuresFile), err)
	}
	return &m, nil
}

// kendall is Kendall's rank correlation as Jiang et al. (2020) define it over
// pairs of runs: (1/(n(n-1))) sum over i != j of sign(mu_i - mu_j) sign(g_i -
// g_j), ties counting 0. NaN for fewer than two runs.
func kendall(mu, gap []float64) float64 {
	n := len(mu)
	if n < 2 {
		return math.NaN()
	}
	var s float64
	for i := range n {
		for j := range n {
			if i != j {
				s += sign(mu[i]-mu[j]) * sign(gap[i]-gap[j])
			}
		}
	}
	return s / float64(n*(n-1))
}

// inverseSquare is 1/x^2, +Inf for 0 (a flatness of a sigma of 0).
func inverseSquare(x float64) float64 {
	if x == 0 {
		return math.Inf(1)
	}
	return 1 / (x * x)
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// measuresTable is table.md's section on the runs that gradwire measure has
// measured: each run's measures and generalization gap, then each measure's
// Kendall coefficient with the gap over those runs. Empty when none.
func measuresTable(groups []group) string {
	type row struct {
		g    string
		seed int64
		m    *train.Measures
		gap  float64
	}
	var rows []row
	for _, g := range groups {
		for _, r := range g.runs {
			if r.measures != nil && r.sum.TestAccuracy != nil {
				rows = append(rows, row{g.name, r.seed, r.measures, 100 * (r.measures.TrainAccuracy - *r.sum.TestAccuracy)})
			}
		}
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	measures := []struct {
		name string
		v    func(*train.Measures) float64
	}{
		{"parameter norm", func(m *train.Measures) float64 { return m.ParamNorm }},
		{"log spectral product", func(m *train.Measures) float64 { return m.LogSpectralProduct }},
		{"path norm", func(m *train.Measures) float64 { return m.PathNorm }},
		{"1/sigma^2 (PAC-Bayes flatness)", func(m *train.Measures) float64 { return inverseSquare(m.PACBayesSigma) }},
		{"1/sigma'^2 (magnitude-aware)", func(m *train.Measures) float64 { return inverseSquare(m.PACBayesMagSigma) }},
		{"top Hessian eigenvalue", func(m *train.Measures) float64 { return m.HessianTop }},
	}
	b.WriteString("\n## Measures (gradwire measure)\n\n| variation | seed | train accuracy (%) | test accuracy (%) | gap (pp) |")
	for _, ms := range measures {
		b.WriteString(" " + ms.name + " |")
	}
	b.WriteString("\n|---|--:|--:|--:|--:|" + strings.Repeat("--:|", len(measures)) + "\n")
	var gap []float64
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %+.2f |", r.g, r.seed, 100*r.m.TrainAccuracy, 100*r.m.TrainAccuracy-r.gap, r.gap)
		for _, ms := range measures {
			fmt.Fprintf(&b, " %.4g |", ms.v(r.m))
		}
		b.WriteString("\n")
		gap = append(gap, r.gap)
	}
	fmt.Fprintf(&b, "\nKendall's tau with the gap over the %d measured runs:", len(rows))
	for i, ms := range measures {
		var mu []float64
		for _, r := range rows {
			mu = append(mu, ms.v(r.m))
		}
		sep := ","
		if i == len(measures)-1 {
			sep = "."
		}
		fmt.Fprintf(&b, " %s %s%s", ms.name, fixed(kendall(mu, gap), 3), sep)
	}
	b.WriteString(" Gap: training accuracy on the measured subset minus test accuracy. tau = (1/(n(n-1))) sum_{i!=j} sign(mu_i - mu_j) sign(g_i - g_j), ties 0 (Jiang et al. 2020).\n")
	return b.String()
}
