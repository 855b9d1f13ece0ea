package sweep

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/train"
	"gonum.org/v1/plot/plotter"
)

// A learning-rate grid is the variations of one optimizer and global batch
// that differ in optim.lr alone (as sweep.yaml sets them). Its pick is the
// rate best on validation (of rates that tie as printed, the lowest); a pick
// at the grid's lowest or highest rate, or tied with the highest, is not
// bracketed, and a probe that ends there has not found the best rate.
type lrGrid struct {
	optimizer string
	batch     int
	settings  string // the sweep.yaml settings the grid's variations share, less those of every variation
	rates     []lrPoint
}

type lrPoint struct {
	rate  float64
	group *group // nil for a rate whose runs all failed
}

// setValues is the value each key of sweep.yaml's settings ends with (a
// later setting of a key wins, as in the sweep; keys in lower case, as the
// config's keys are matched).
func setValues(sets []string) map[string]string {
	last := map[string]string{}
	for _, kv := range sets {
		k, v, _ := configs.SplitSet(kv)
		last[k] = strings.TrimSpace(v)
	}
	return last
}

// variationRate is a variation's learning rate: its runs' own (config.yaml,
// runRate > 0), else the optim.lr its settings end with; and its other
// settings as "key=value" in order of their keys. A variation that leaves the
// rate to the base config has it only from config.yaml.
func variationRate(sets []string, runRate float64) (rate float64, ok bool, others []string) {
	last := setValues(sets)
	if v, found := last["optim.lr"]; found {
		r, err := strconv.ParseFloat(v, 64)
		ok, rate = err == nil, r
	}
	if runRate > 0 {
		ok, rate = true, runRate
	}
	for k, v := range last {
		if k != "optim.lr" && k != "optim.name" {
			others = append(others, k+"="+v)
		}
	}
	slices.Sort(others)
	return rate, ok, others
}

// configRate is optim.lr in the config.yaml of the run in dir, or 0.
func configRate(dir string) float64 {
	if dir == "" {
		return 0
	}
	c, err := configs.Load(filepath.Join(dir, "config.yaml"), nil)
	if err != nil {
		return 0
	}
	return c.Optim.LR
}

// learningRateGrids finds the grids of groups (and of the failed runs) with
// at least two rates, and beside them the trials: variations at a single rate
// of an optimizer and batch that has a grid, with other settings (a longer
// warm-up, another weight decay at the grid's pick), since a trial may beat the
// grid it starts from. Trials have one rate; a sweep without a grid has none.
func learningRateGrids(groups []group, failed []failedRun) []lrGrid {
	type member struct {
		optimizer string
		batch     int
		others    []string
		point     lrPoint
	}
	var members []member
	for i := range groups {
		g := &groups[i]
		rate, ok, others := variationRate(g.sets, configRate(g.runs[0].dir))
		opt := field(*g, func(s *train.Summary) string { return s.Optimizer })
		batch, err := strconv.Atoi(field(*g, func(s *train.Summary) string { return strconv.Itoa(s.GlobalBatch) }))
		if !ok || err != nil || strings.Contains(opt, "/") {
			continue
		}
		members = append(members, member{opt, batch, others, lrPoint{rate: rate, group: g}})
	}
	for _, f := range failed {
		rate, ok, others := variationRate(f.sets, f.rate)
		if !ok || f.optimizer == "" || slices.ContainsFunc(members, func(m member) bool {
			return m.point.rate == rate && m.optimizer == f.optimizer && m.batch == f.globalBatch && slices.Equal(m.others, others)
		}) {
			continue // unknown, or one seed failed where another finished
		}
		members = append(members, member{f.optimizer, f.globalBatch, others, lrPoint{rate: rate}})
	}
	// Settings every variation shares (the sweep's own set:) say nothing about a grid.
	var common []string
	for i, m := range members {
		if i == 0 {
			common = slices.Clone(m.others)
			continue
		}
		common = slices.DeleteFunc(common, func(s string) bool { return !slices.Contains(m.others, s) })
	}
	var grids []lrGrid
	for _, m := range members {
		settings := strings.Join(slices.DeleteFunc(slices.Clone(m.others), func(s string) bool { return slices.Contains(common, s) }), ", ")
		i := slices.IndexFunc(grids, func(g lrGrid) bool {
			return g.optimizer == m.optimizer && g.batch == m.batch && g.settings == settings
		})
		if i < 0 {
			grids = append(grids, lrGrid{optimizer: m.optimizer, batch: m.batch, settings: settings})
			i = len(grids) - 1
		}
		if !slices.ContainsFunc(grids[i].rates, func(p lrPoint) bool { return p.rate == m.point.rate }) {
			grids[i].rates = append(grids[i].rates, m.point)
		}
	}
	grids = slices.DeleteFunc(grids, func(g lrGrid) bool {
		return len(g.rates) < 2 && !slices.ContainsFunc(grids, func(o lrGrid) bool {
			return len(o.rates) >= 2 && o.optimizer == g.optimizer && o.batch == g.batch
		})
	})
	if !slices.ContainsFunc(grids, func(g lrGrid) bool { return len(g.rates) >= 2 }) {
		return nil
	}
	// Each optimizer and batch together, in order of first appearance, grids before their trials.
	type key struct {
		optimizer string
		batch     int
	}
	first := map[key]int{}
	for i, g := range grids {
		if _, ok := first[key{g.optimizer, g.batch}]; !ok {
			first[key{g.optimizer, g.batch}] = i
		}
	}
	trial := func(g lrGrid) int {
		if len(g.rates) == 1 {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(grids, func(a, b lrGrid) int {
		return cmp.Or(cmp.Compare(first[key{a.optimizer, a.batch}], first[key{b.optimizer, b.batch}]), cmp.Compare(trial(a), trial(b)))
	})
	for i := range grids {
		slices.SortFunc(grids[i].rates, func(a, b lrPoint) int { return cmp.Compare(a.rate, b.rate) })
	}
	return grids
}

// learningRateTable is table.md's section on the sweep's learning-rate
// grids: each grid's rates with their validation figure, the pick, its test
// figure, and whether the pick lies inside the grid. Empty without grids or
// without validation figures (a rate is never picked on the test split).
func learningRateTable(groups []group, failed []failedRun, metrics []metric) string {
	val, hasVal := validationMetric(groups)
	grids := learningRateGrids(groups, failed)
	if !hasVal || len(grids) == 0 || len(metrics) == 0 {
		return ""
	}
	test := metrics[0]
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Learning rates, picked on validation\n\n")
	fmt.Fprintf(&b, "| optimizer | global batch | settings | %s by optim.lr | pick | %s of the pick | inside the grid |\n", val.header, test.header)
	b.WriteString("|---|--:|---|---|--:|--:|---|\n")
	for _, g := range grids {
		var cells []string
		shown := make([]string, len(g.rates)) // each rate's figure as printed; "" without one
		best, bestV := -1, 0.0
		for i, p := range g.rates {
			rate := strconv.FormatFloat(p.rate, 'g', -1, 64)
			if p.group == nil {
				cells = append(cells, rate+": failed")
				continue
			}
			v := values(*p.group, val.value)
			if len(v) == 0 {
				cells = append(cells, rate+": —")
				continue
			}
			shown[i] = fixed(mean(v), val.decimals)
			cells = append(cells, rate+": "+shown[i])
			if best < 0 || val.better(mean(v), bestV) {
				best, bestV = i, mean(v)
			}
		}
		if best < 0 {
			// No pick, but the row stays: where a rule breaks (every rate
			// failed) is a result.
			why := "no: every rate failed"
			if slices.ContainsFunc(g.rates, func(p lrPoint) bool { return p.group != nil }) {
				why = "no: no rate has a validation figure"
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | none | — | %s |\n", g.optimizer, g.batch, g.settings, strings.Join(cells, ", "), why)
			continue
		}
		// Rates that print the same figure tie, and a tie goes to the lower
		// rate; a pick tied with the highest rate has not been bracketed.
		pick := slices.Index(shown, shown[best])
		top := len(g.rates) - 1
		inside := "yes"
		switch {
		case len(g.rates) == 1:
			inside = "one rate: a trial beside the grid"
		case pick == 0:
			inside = "no: the lowest rate is best"
		case pick == top:
			inside = "no: the highest rate is best"
		case shown[top] == shown[pick]:
			inside = "no: the highest rate ties the best"
		}
		p := g.rates[pick]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s (%s) | %s | %s |\n", g.optimizer, g.batch, g.settings, strings.Join(cells, ", "),
			strconv.FormatFloat(p.rate, 'g', -1, 64), p.group.name, meanStd(values(*p.group, test.value), test.decimals), inside)
	}
	b.WriteString("\nA grid: the variations of one optimizer and global batch whose sweep.yaml settings differ in optim.lr alone " +
		"(settings: those they share beyond what every variation sets). Each rate's figure is the mean over its seeds; " +
		"the pick is the rate best on validation, and its test figure is the one to report. " +
		"Rates whose figures print the same tie, and a tie goes to the lower rate. " +
		"A pick at the lowest or highest rate tried, or tied with the highest, is not bracketed: a further rate beyond it is needed before the pick stands. " +
		"A trial is a variation at one rate beside a grid of the same optimizer and batch, with other settings.\n")
	return b.String()
}

// trialDodge is how far each further trial at a rate is drawn to the right of
// it, as a fraction of the rate axis: about two markers' width.
const trialDodge = 0.015

// plotValidationVsRate draws each learning-rate grid's validation figure
// against the rate (log scale), one line per grid and a lone marker per
// trial (drawn a little right of its rate), ± std over seeds: the
// picture of a probe, where a curve still rising at its last rate shows an
// unbracketed pick. Rates far from the best (a diverged or dead network) sit
// at the axis edge and say so in the legend; failed rates are named there.
// nil without grids or validation figures.
func plotValidationVsRate(name string, groups []group, failed []failedRun) (*figure, error) {
	val, hasVal := validationMetric(groups)
	grids := learningRateGrids(groups, failed)
	if !hasVal || len(grids) == 0 {
		return nil, nil
	}
	acc := val.better(1, 0) // higher is better: the band and the edge are an accuracy's
	p := newPlot()
	p.Title.Text = name + ": " + val.header + " against the learning rate"
	p.X.Label.Text = "optim.lr (log scale)"
	p.Y.Label.Text = val.header + ", mean ± std over seeds"
	type curve struct {
		label    string
		xy       plotter.XYs
		rates    []string // each point's rate as the table writes it
		std      []float64
		failures []string
		failX    []float64 // where each failure is marked: x, and y once the strip is laid out
		failY    []float64
		dodge    int // the how-manieth trial at its rate, 0 for a grid
	}
	var curves []curve
	var ys []float64
	minX, maxX := math.Inf(1), math.Inf(-1)
	trialsAt := map[float64]int{} // trials drawn so far at each rate
	for _, g := range grids {
		c := curve{label: g.optimizer + " @ " + strconv.Itoa(g.batch)}
		if g.settings != "" {
			c.label += " (" + g.settings + ")"
		}
		// A trial sits at a rate of its grid, often the pick: each is moved a
		// little to the right so that it does not hide under the grid's marker.
		if len(g.rates) == 1 {
			trialsAt[g.rates[0].rate]++
			c.dodge = trialsAt[g.rates[0].rate]
			c.label += " at " + strconv.FormatFloat(g.rates[0].rate, 'g', -1, 64)
		}
		for _, pt := range g.rates {
			rate := strconv.FormatFloat(pt.rate, 'g', -1, 64)
			minX, maxX = min(minX, math.Log10(pt.rate)), max(maxX, math.Log10(pt.rate))
			if pt.group == nil {
				c.failures, c.failX = append(c.failures, rate), append(c.failX, math.Log10(pt.rate))
				continue
			}
			v := values(*pt.group, val.value)
			if len(v) == 0 {
				continue
			}
			c.xy = append(c.xy, plotter.XY{X: math.Log10(pt.rate), Y: mean(v)})
			c.rates = append(c.rates, rate)
			c.std = append(c.std, sampleStd(v))
			ys = append(ys, mean(v))
		}
		curves = append(curves, c)
	}
	if len(ys) == 0 {
		return nil, nil
	}
	p.X.Min, p.X.Max = minX-math.Log10(1.5), maxX+math.Log10(1.5)
	for _, c := range curves {
		for j := range c.xy {
			c.xy[j].X += float64(c.dodge) * trialDodge * (p.X.Max - p.X.Min)
		}
		for j := range c.failX {
			c.failX[j] += float64(c.dodge) * trialDodge * (p.X.Max - p.X.Min)
		}
	}
	limit, inside := bandLimit(ys, acc)
	lo, hi := math.Inf(1), math.Inf(-1)
	anyOff := false
	for _, c := range curves {
		for j, q := range c.xy {
			if inside(q.Y) {
				lo, hi = min(lo, q.Y-c.std[j]), max(hi, q.Y+c.std[j])
			} else {
				anyOff = true
			}
		}
	}
	// Failed rates are the word "failed" in a strip beyond the band (a slot
	// per mark at a rate), whose first slot then holds the values off it;
	// without failures the values off the band sit at the axis's edge.
	anyFailed := slices.ContainsFunc(curves, func(c curve) bool { return len(c.failX) > 0 })
	setBand(p, lo, hi, limit, acc, anyOff && !anyFailed)
	edgeY := func() float64 { return axisEdge(p, acc) }
	if anyFailed {
		first := 0
		if anyOff {
			first = 1
		}
		slotAt := map[float64]int{} // marks so far at an x
		n := 0
		for i := range curves {
			for _, x := range curves[i].failX {
				curves[i].failY = append(curves[i].failY, float64(first+slotAt[x]))
				slotAt[x]++
				n = max(n, first+slotAt[x])
			}
		}
		slotY := addStrip(p, acc, n)
		edgeY = func() float64 { return slotY(0) }
		for i := range curves {
			for j, k := range curves[i].failY {
				curves[i].failY[j] = slotY(int(k))
			}
		}
	}
	leg := newLegend()
	for i, c := range curves {
		xy := make(plotter.XYs, len(c.xy))
		copy(xy, c.xy)
		var off []string // rates off the axis, with their figures
		for j, q := range c.xy {
			if !inside(q.Y) {
				xy[j].Y = edgeY()
				off = append(off, c.rates[j]+": "+fixed(q.Y, val.decimals))
			}
		}
		label := c.label
		if len(off) > 0 {
			label += "; off the axis " + strings.Join(off, ", ")
		}
		if len(c.failures) > 0 {
			label += "; failed at " + strings.Join(c.failures, ", ")
			lineStyle, _ := style(i)
			at := make(plotter.XYs, len(c.failX))
			for j, x := range c.failX {
				at[j] = plotter.XY{X: x, Y: c.failY[j]}
			}
			if err := addFailedWords(p, at, lineStyle.Color); err != nil {
				return nil, err
			}
		}
		if len(xy) == 0 {
			leg.Add(label)
			continue
		}
		if err := addLinePoints(p, leg, i, label, xy); err != nil {
			return nil, err
		}
		std := make([]float64, len(c.std))
		for j := range std {
			if inside(c.xy[j].Y) {
				std[j] = c.std[j]
			}
		}
		if err := addErrorBars(p, i, xy, std); err != nil {
			return nil, err
		}
	}
	if anyFailed {
		leg.Add(beyondNote(acc))
	}
	p.X.Tick.Marker = log10Ticks{}
	return render(p, leg)
}
