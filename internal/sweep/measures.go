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
	b.WriteString("\n## Measures (gradwire measure)\n\n| variation | seed | train accuracy (%) | test accuracy (%) | gap (pp) | parameter norm | top Hessian eigenvalue |\n|---|--:|--:|--:|--:|--:|--:|\n")
	var gap, norm, eig []float64
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %+.2f | %.2f | %.3f |\n", r.g, r.seed, 100*r.m.TrainAccuracy, 100*r.m.TrainAccuracy-r.gap, r.gap, r.m.ParamNorm, r.m.HessianTop)
		gap, norm, eig = append(gap, r.gap), append(norm, r.m.ParamNorm), append(eig, r.m.HessianTop)
	}
	fmt.Fprintf(&b, "\nKendall's tau with the gap over the %d measured runs: parameter norm %s, top Hessian eigenvalue %s. "+
		"Gap: training accuracy on the measured subset minus test accuracy. tau = (1/(n(n-1))) sum_{i!=j} sign(mu_i - mu_j) sign(g_i - g_j), ties 0 (Jiang et al. 2020).\n",
		len(rows), fixed(kendall(norm, gap), 3), fixed(kendall(eig, gap), 3))
	return b.String()
}
