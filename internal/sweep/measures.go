package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// measure is one column of the measures section: its name and its value for
// a run's measures (false when the run lacks it).
type measure struct {
	name string
	v    func(*train.Measures) (float64, bool)
}

// always is a measure every measures.json holds.
func always(f func(*train.Measures) float64) func(*train.Measures) (float64, bool) {
	return func(m *train.Measures) (float64, bool) { return f(m), true }
}

// optional is a measure newer measures.json files hold (nil when absent),
// through f when given.
func optional(get func(*train.Measures) *float64, f func(float64) float64) func(*train.Measures) (float64, bool) {
	return func(m *train.Measures) (float64, bool) {
		p := get(m)
		if p == nil {
			return 0, false
		}
		if f != nil {
			return f(*p), true
		}
		return *p, true
	}
}

// measureColumns are the measures of the section, in Jiang et al.'s order of
// families: norms, distances to the initialisation, spectral, path,
// Fisher-Rao, flatness (PAC-Bayes, then worst-case sharpness), Hessian.
var measureColumns = []measure{
	{"parameter norm", always(func(m *train.Measures) float64 { return m.ParamNorm })},
	{"distance to init (Frobenius)", optional(func(m *train.Measures) *float64 { return m.DistFro }, nil)},
	{"distance to init (spectral)", optional(func(m *train.Measures) *float64 { return m.DistSpec }, nil)},
	{"log spectral product", always(func(m *train.Measures) float64 { return m.LogSpectralProduct })},
	{"path norm", always(func(m *train.Measures) float64 { return m.PathNorm })},
	{"Fisher-Rao norm", optional(func(m *train.Measures) *float64 { return m.FisherRao }, nil)},
	{"1/sigma^2 (PAC-Bayes flatness)", always(func(m *train.Measures) float64 { return inverseSquare(m.PACBayesSigma) })},
	{"1/sigma'^2 (magnitude-aware)", always(func(m *train.Measures) float64 { return inverseSquare(m.PACBayesMagSigma) })},
	{"1/alpha^2 (sharpness)", optional(func(m *train.Measures) *float64 { return m.SharpnessAlpha }, inverseSquare)},
	{"1/alpha'^2 (magnitude-aware sharpness)", optional(func(m *train.Measures) *float64 { return m.SharpnessMagAlpha }, inverseSquare)},
	{"top Hessian eigenvalue", always(func(m *train.Measures) float64 { return m.HessianTop })},
}

// measuredRun is one run of the measures section.
type measuredRun struct {
	variation string
	seed      int64
	m         *train.Measures
	gap       float64  // training accuracy on the measured subset minus test accuracy, in points
	hp        []string // its value of each hyper-parameter; nil when its variation is not in sweep.yaml
}

// hyperParams derives the sweep's hyper-parameters from sweep.yaml's set:
// overrides: a key is one when the measured runs of the listed variations
// do not all give it the same value (a run whose overrides lack the key has
// the base config's value, written "base"). It returns the keys, sorted, and
// sets each listed run's values in that order.
func hyperParams(rows []measuredRun, sets map[string][]string) []string {
	values := make([]map[string]string, len(rows))
	keys := map[string]bool{}
	for i, r := range rows {
		set, ok := sets[r.variation]
		if !ok {
			continue
		}
		values[i] = setValues(set)
		for k := range values[i] {
			keys[k] = true
		}
	}
	var names []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		first, varies := "", false
		seen := false
		for i := range rows {
			if values[i] == nil {
				continue
			}
			v, ok := values[i][k]
			if !ok {
				v = "base"
			}
			if !seen {
				first, seen = v, true
			} else if v != first {
				varies = true
			}
		}
		if varies {
			names = append(names, k)
		}
	}
	for i := range rows {
		if values[i] == nil {
			continue
		}
		rows[i].hp = make([]string, len(names))
		for j, k := range names {
			v, ok := values[i][k]
			if !ok {
				v = "base"
			}
			rows[i].hp[j] = v
		}
	}
	return names
}

// granulated is Jiang et al.'s granulated Kendall coefficient for
// hyper-parameter k: the runs (those with a value of the measure and known
// hyper-parameters) are grouped by their seed and their values of every other
// hyper-parameter, so that the runs of a group differ in k alone; psi_k is
// the mean over the groups of two or more runs of the Kendall tau within the
// group (the paper's grid is complete, so every group there has |Theta_k|
// runs; here a group has the runs the sweep has). groups is how many groups
// that mean is over; psi is NaN when there is none.
func granulated(rows []measuredRun, mu []float64, has []bool, k int) (psi float64, groups int) {
	byKey := map[string][]int{}
	var order []string
	for i, r := range rows {
		if r.hp == nil || !has[i] {
			continue
		}
		parts := []string{fmt.Sprint(r.seed)}
		for j, v := range r.hp {
			if j != k {
				parts = append(parts, v)
			}
		}
		key := strings.Join(parts, "\x00")
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], i)
	}
	var sum float64
	for _, key := range order {
		idx := byKey[key]
		if len(idx) < 2 {
			continue
		}
		var m, g []float64
		for _, i := range idx {
			m, g = append(m, mu[i]), append(g, rows[i].gap)
		}
		sum += kendall(m, g)
		groups++
	}
	if groups == 0 {
		return math.NaN(), 0
	}
	return sum / float64(groups), groups
}

// measuresTable is table.md's section on the runs that gradwire measure has
// measured: each run's measures and generalization gap, then each measure's
// Kendall coefficient with the gap over those runs, its granulated
// coefficient psi_k for each hyper-parameter the sweep varies, and their mean
// Psi (Jiang et al. 2020). Empty when no run was measured.
func measuresTable(groups []group) string {
	var rows []measuredRun
	sets := map[string][]string{}
	unlisted := 0
	for _, g := range groups {
		if g.listed {
			sets[g.name] = g.sets
		}
		for _, r := range g.runs {
			if r.measures != nil && r.sum.TestAccuracy != nil {
				rows = append(rows, measuredRun{variation: g.name, seed: r.seed, m: r.measures, gap: 100 * (r.measures.TrainAccuracy - *r.sum.TestAccuracy)})
				if !g.listed {
					unlisted++
				}
			}
		}
	}
	if len(rows) == 0 {
		return ""
	}
	hps := hyperParams(rows, sets)
	var b strings.Builder
	b.WriteString("\n## Measures (gradwire measure)\n\n| variation | seed | train accuracy (%) | test accuracy (%) | gap (pp) |")
	for _, ms := range measureColumns {
		b.WriteString(" " + ms.name + " |")
	}
	b.WriteString("\n|---|--:|--:|--:|--:|" + strings.Repeat("--:|", len(measureColumns)) + "\n")
	noInit := 0
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %+.2f |", r.variation, r.seed, 100*r.m.TrainAccuracy, 100*r.m.TrainAccuracy-r.gap, r.gap)
		for _, ms := range measureColumns {
			if v, ok := ms.v(r.m); ok {
				fmt.Fprintf(&b, " %.4g |", v)
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
		if r.m.DistFro == nil {
			noInit++
		}
	}
	fmt.Fprintf(&b, "\nRank correlation of each measure with the gap: Kendall's tau over the measured runs that have the measure, and the granulated psi_k for each hyper-parameter k the sweep varies (its groups: runs of one seed that differ in k alone), with Psi their mean.\n\n| measure | runs | tau |")
	for _, k := range hps {
		fmt.Fprintf(&b, " psi %s |", k)
	}
	b.WriteString(" Psi |\n|---|--:|--:|" + strings.Repeat("--:|", len(hps)+1) + "\n")
	groupsUsed := make([]int, len(hps))
	for _, ms := range measureColumns {
		var mu, gap []float64
		all := make([]float64, len(rows))
		has := make([]bool, len(rows))
		for i, r := range rows {
			if v, ok := ms.v(r.m); ok {
				mu, gap = append(mu, v), append(gap, r.gap)
				all[i], has[i] = v, true
			}
		}
		if len(mu) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | - |%s - |\n", ms.name, strings.Repeat(" - |", len(hps)))
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s |", ms.name, len(mu), orDash(kendall(mu, gap)))
		var sum float64
		n := 0
		for k := range hps {
			psi, g := granulated(rows, all, has, k)
			groupsUsed[k] = max(groupsUsed[k], g)
			fmt.Fprintf(&b, " %s |", orDash(psi))
			if !math.IsNaN(psi) {
				sum += psi
				n++
			}
		}
		psiAll := math.NaN()
		if n > 0 {
			psiAll = sum / float64(n)
		}
		fmt.Fprintf(&b, " %s |\n", orDash(psiAll))
	}
	b.WriteString("\nGap: training accuracy on the measured subset minus test accuracy, in points. tau = (1/(n(n-1))) sum_{i!=j} sign(mu_i - mu_j) sign(g_i - g_j), ties 0; psi_k = the mean over groups of tau within the group; Psi = the mean of psi_k over the hyper-parameters (Jiang et al. 2020).")
	if len(hps) > 0 {
		b.WriteString(" Hyper-parameters: the keys of sweep.yaml's set: overrides whose value differs between the measured runs (\"base\": the base config's value); groups of two or more runs:")
		for k, name := range hps {
			fmt.Fprintf(&b, " %s %d", name, groupsUsed[k])
			if k < len(hps)-1 {
				b.WriteString(",")
			}
		}
		b.WriteString(".")
	}
	switch {
	case unlisted == len(rows):
		b.WriteString(" No measured run's variation is listed in sweep.yaml: no hyper-parameters, no psi.")
	case unlisted > 0:
		fmt.Fprintf(&b, " %d measured runs of variations sweep.yaml does not list are left out of psi.", unlisted)
	}
	if noInit > 0 {
		fmt.Fprintf(&b, " %d of the %d measured runs have no saved initial parameters (%s: runs trained before gradwire wrote it), so no distance to init.", noInit, len(rows), train.InitFile)
	}
	b.WriteString("\n")
	return b.String()
}

// orDash formats a coefficient with three decimals, "-" for NaN.
func orDash(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fixed(x, 3)
}
