package sweep

import (
	"bytes"
	"fmt"
	"image/color"
	"maps"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gradwire/gradwire/internal/train"
)

// Plot geometry. The legend gets its own column right of the plot, so that it
// never hides a curve however many variations there are.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 5 * vg.Inch
	plotDPI    = 96
)

// palette is the ten-colour categorical palette of d3/matplotlib (distinct on
// screen and in print), then ten more of other hues or clearly other
// lightness, so that up to twenty variations (a learning-rate probe's grids and
// trials) each get a colour of their own. Beyond twenty the dash pattern
// changes too.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff}, color.RGBA{0x00, 0x00, 0x8b, 0xff}, // black, dark blue
	color.RGBA{0xa6, 0xce, 0xe3, 0xff}, color.RGBA{0x00, 0x80, 0x80, 0xff}, // light blue, teal
	color.RGBA{0xff, 0x00, 0xff, 0xff}, color.RGBA{0x80, 0x00, 0x00, 0xff}, // magenta, maroon
	color.RGBA{0x55, 0x6b, 0x2f, 0xff}, color.RGBA{0xfa, 0x80, 0x72, 0xff}, // dark olive, salmon
	color.RGBA{0x4b, 0x00, 0x82, 0xff}, color.RGBA{0x00, 0xe0, 0x70, 0xff}, // indigo, spring green
}

// style is variation i's line and glyph style, the same in every plot.
func style(i int) (draw.LineStyle, draw.GlyphStyle) {
	c := palette[i%len(palette)]
	line := draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: plotutil.Dashes(i / len(palette))}
	glyph := draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: plotutil.Shape(i)}
	return line, glyph
}

// classifiers reports whether any run has a test accuracy: the plots then show
// accuracy (of the classifier runs); otherwise the test loss.
func classifiers(groups []group) bool {
	for _, g := range groups {
		for _, r := range g.runs {
			if r.sum.TestAccuracy != nil {
				return true
			}
		}
	}
	return false
}

// meanCurve averages, over a group's runs, the values each run has at an x
// (epoch or step), and returns them sorted by x, with the sample standard
// deviation at each x (0 where one run has it). Non-finite values (a diverged
// run's loss) are left out.
func meanCurve(g group, points func(*runData) map[float64]float64) (xy plotter.XYs, std []float64) {
	vals := map[float64][]float64{}
	for _, r := range g.runs {
		for x, y := range points(r) {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				vals[x] = append(vals[x], y)
			}
		}
	}
	for _, x := range slices.Sorted(maps.Keys(vals)) {
		xy = append(xy, plotter.XY{X: x, Y: mean(vals[x])})
		std = append(std, sampleStd(vals[x]))
	}
	return xy, std
}

// The informative band of a metric axis: a variation whose value lies more
// than bandAccuracy points below the best accuracy (a run that collapsed to
// chance, say), or above bandLoss times the best loss, would squash the
// others into a sliver; it is drawn at the axis edge instead and named as
// off the axis in the legend.
const (
	bandAccuracy = 20.0
	bandLoss     = 1.5
)

// bandLimit is where the band ends for final values ys (the worst value still
// plotted inside), and whether a value is inside it.
func bandLimit(ys []float64, acc bool) (limit float64, inside func(float64) bool) {
	if acc {
		limit = slices.Max(ys) - bandAccuracy
		return limit, func(y float64) bool { return y >= limit }
	}
	limit = slices.Min(ys) * bandLoss
	return limit, func(y float64) bool { return y <= limit }
}

// failedNote is the legend's note on a variation's failed runs: "" when none.
func failedNote(name string, g *group, failed []failedRun) string {
	n := 0
	for _, f := range failed {
		if f.variation == name {
			n++
		}
	}
	switch {
	case n == 0:
		return ""
	case g == nil || len(g.runs) == 0:
		return fmt.Sprintf("%s: failed (%d of %d seeds)", name, n, n)
	}
	return fmt.Sprintf(" (%d of %d seeds failed)", n, n+len(g.runs))
}

// addFailed lists, at the end of the legend, the variations all of whose runs
// failed: they have no point or curve, and the legend says so.
func addFailed(leg *legend, groups []group, failed []failedRun) {
	seen := map[string]bool{}
	for _, g := range groups {
		seen[g.name] = true
	}
	for _, f := range failed {
		if seen[f.variation] {
			continue
		}
		seen[f.variation] = true
		leg.Add(failedNote(f.variation, nil, failed))
	}
}

// plotTestMetric draws the test metric after every epoch, one line per
// variation (the mean over its seeds, with error bars of one standard
// deviation where it has several).
func plotTestMetric(name string, groups []group, failed []failedRun) (*figure, error) {
	acc := classifiers(groups)
	p := newPlot()
	if acc {
		p.Title.Text = name + ": test accuracy per epoch (mean ± std over seeds)"
		p.Y.Label.Text = "test accuracy (%)"
	} else {
		p.Title.Text = name + ": test loss per epoch (mean ± std over seeds)"
		p.Y.Label.Text = "test loss (nats/char)"
	}
	p.X.Label.Text = "epoch"
	type curve struct {
		i      int
		g      group
		xy     plotter.XYs
		std    []float64
		finalY float64
	}
	var curves []curve
	var finals []float64
	maxX := 0.0
	for i, g := range groups {
		xy, std := meanCurve(g, func(r *runData) map[float64]float64 {
			m := map[float64]float64{}
			for _, e := range r.epochs {
				switch {
				case acc && e.TestAccuracy != nil:
					m[float64(e.Epoch)] = *e.TestAccuracy * percentPerUnit
				case !acc:
					m[float64(e.Epoch)] = e.TestLoss
				}
			}
			return m
		})
		if len(xy) == 0 {
			continue
		}
		maxX = math.Max(maxX, xy[len(xy)-1].X)
		curves = append(curves, curve{i, g, xy, std, xy[len(xy)-1].Y})
		finals = append(finals, xy[len(xy)-1].Y)
	}
	leg := newLegend()
	if len(curves) > 0 {
		limit, inside := bandLimit(finals, acc)
		var lo, hi float64 = math.Inf(1), math.Inf(-1)
		for _, c := range curves {
			for _, pt := range c.xy {
				if inside(pt.Y) {
					lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
				}
			}
		}
		for _, c := range curves {
			label := c.g.name + failedNote(c.g.name, &c.g, failed)
			if !inside(c.finalY) {
				label += fmt.Sprintf(" (ends off the axis: %.*f)", decimalsOf(acc), c.finalY)
			}
			if err := addLinePoints(p, leg, c.i, label, c.xy); err != nil {
				return nil, err
			}
			if err := addErrorBars(p, c.i, c.xy, c.std); err != nil {
				return nil, err
			}
		}
		setBand(p, lo, hi, limit, acc, slices.ContainsFunc(curves, func(c curve) bool { return !inside(c.finalY) }))
	}
	addFailed(leg, groups, failed)
	if maxX <= 30 {
		p.X.Tick.Marker = integerTicks{}
	}
	return render(p, leg)
}

// decimalsOf is the metric's printed precision: accuracy in % to 2
// decimals, loss to 3.
func decimalsOf(acc bool) int {
	if acc {
		return accuracyMetric.decimals
	}
	return lossMetric.decimals
}

// setBand sets the metric axis to the values inside the band [lo, hi] with a
// margin; with values off it, the axis reaches the band's limit, where
// clamped glyphs sit.
func setBand(p *plot.Plot, lo, hi, limit float64, acc, off bool) {
	if math.IsInf(lo, 0) {
		return
	}
	if off {
		if acc {
			lo = limit
		} else {
			hi = limit
		}
	}
	pad := max((hi-lo)*0.06, 0.01*math.Max(math.Abs(hi), 1))
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
}

// axisEdge is where a value off the band is drawn: just inside the metric
// axis's bad end (the bottom for accuracy, the top for loss).
func axisEdge(p *plot.Plot, acc bool) float64 {
	if acc {
		return p.Y.Min + (p.Y.Max-p.Y.Min)*0.02
	}
	return p.Y.Max - (p.Y.Max-p.Y.Min)*0.02
}

// addErrorBars draws ±std at each point where std > 0, in variation i's colour.
func addErrorBars(p *plot.Plot, i int, xy plotter.XYs, std []float64) error {
	var pts plotter.XYs
	var errs plotter.YErrors
	for j, pt := range xy {
		if std[j] > 0 {
			pts = append(pts, pt)
			errs = append(errs, struct{ Low, High float64 }{std[j], std[j]})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	bars, err := plotter.NewYErrorBars(errorPoints{pts, errs})
	if err != nil {
		return err
	}
	line, _ := style(i)
	bars.LineStyle = draw.LineStyle{Color: line.Color, Width: vg.Points(1)}
	bars.CapWidth = vg.Points(5)
	p.Add(bars)
	return nil
}

// errorPoints is an XYer with YErrors, for plotter.NewYErrorBars.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

// plotTrainLoss draws the training loss, one line per variation (the mean
// over its seeds): against the step from the step records when every run
// takes the same number of steps an epoch, and otherwise (batches that differ)
// against the epoch from the epoch records' mean training loss, so that runs
// compare at the same examples seen instead of batch 8192's few steps sitting
// in the first corner of batch 128's. The axis reaches the highest loss of the
// variations that end within twice the median final loss or half the median
// first one: one that diverged or collapsed leaves the plot at the top (the
// legend says so) instead of squashing the others.
func plotTrainLoss(name string, groups []group, failed []failedRun) (*figure, error) {
	p := newPlot()
	p.Title.Text = name + ": training loss (mean over seeds)"
	p.X.Label.Text = "training step"
	points := func(r *runData) map[float64]float64 {
		m := map[float64]float64{}
		for _, s := range r.steps {
			m[float64(s.Step)] = s.Loss
		}
		return m
	}
	if !sameStepsPerEpoch(groups) {
		p.Title.Text = name + ": training loss per epoch (mean over its steps and the seeds)"
		p.X.Label.Text = "epoch"
		points = func(r *runData) map[float64]float64 {
			m := map[float64]float64{}
			for _, e := range r.epochs {
				m[float64(e.Epoch)] = e.TrainLoss
			}
			return m
		}
	}
	p.Y.Label.Text = "training loss (nats)"
	if !classifiers(groups) {
		p.Y.Label.Text = "training loss (nats/char)"
	}
	type curve struct {
		i  int
		g  group
		xy plotter.XYs
	}
	var curves []curve
	var firsts, finals []float64
	for i, g := range groups {
		xy, _ := meanCurve(g, points)
		if len(xy) == 0 {
			continue
		}
		curves = append(curves, curve{i, g, xy})
		firsts = append(firsts, xy[0].Y)
		finals = append(finals, xy[len(xy)-1].Y)
	}
	leg := newLegend()
	if len(curves) > 0 {
		// Half the typical starting loss too: when the others end near 0, a
		// run that ends at 0.04 has still learned and keeps its place.
		endLimit := math.Max(2*median(finals), median(firsts)/2)
		top := 0.0
		for _, c := range curves {
			if c.xy[len(c.xy)-1].Y <= endLimit {
				for _, pt := range c.xy {
					top = math.Max(top, pt.Y)
				}
			}
		}
		for _, c := range curves {
			label := c.g.name + failedNote(c.g.name, &c.g, failed)
			if slices.ContainsFunc(c.xy, func(pt plotter.XY) bool { return pt.Y > top }) {
				label += " (leaves the axis)"
			}
			if len(c.xy) == 1 {
				// A line of one point draws nothing: a one-epoch run gets its marker.
				dot, err := plotter.NewScatter(c.xy)
				if err != nil {
					return nil, fmt.Errorf("variation %s: %w", c.g.name, err)
				}
				_, dot.GlyphStyle = style(c.i)
				p.Add(dot)
				leg.Add(label, dot)
				continue
			}
			line, err := plotter.NewLine(c.xy)
			if err != nil {
				return nil, fmt.Errorf("variation %s: %w", c.g.name, err)
			}
			line.LineStyle, _ = style(c.i)
			p.Add(line)
			leg.Add(label, line)
		}
		p.Y.Min, p.Y.Max = 0, top*1.04
	}
	addFailed(leg, groups, failed)
	return render(p, leg)
}

// sameStepsPerEpoch reports whether every run takes the same number of
// optimizer steps an epoch: the step count of its first epoch record (not
// summary.json's steps over its epochs, which a run cut short by
// train.max_steps or stopped early would change).
func sameStepsPerEpoch(groups []group) bool {
	first := -1
	for _, g := range groups {
		for _, r := range g.runs {
			if len(r.epochs) == 0 || r.epochs[0].Epoch != 1 {
				continue
			}
			if per := r.epochs[0].Step; first < 0 {
				first = per
			} else if per != first {
				return false
			}
		}
	}
	return true
}

// median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// compressed reports whether any variation compresses: a sweep without one
// (optimizers, batch sizes) has no accuracy-vs-compression plot.
func compressed(groups []group) bool {
	return slices.ContainsFunc(groups, func(g group) bool {
		return slices.ContainsFunc(g.runs, func(r *runData) bool { return r.sum.Compressor != "none" && r.sum.Compressor != "" })
	})
}

// plotMetricVsCompression draws each variation's final test accuracy (or
// test loss) against its steady-state compression ratio on a log axis:
// means over seeds with ±std error bars, the legend a table of the values.
// Nil when no variation compresses.
func plotMetricVsCompression(name string, groups []group, failed []failedRun) (*figure, error) {
	if !compressed(groups) {
		return nil, nil
	}
	return plotMetricVs(name, groups, failed, "compression", "steady-state compression ratio (dense bytes / bytes sent, log scale)", "x",
		func(s *train.Summary) (float64, bool) { return s.CompressionRatioSteady, s.CompressionRatioSteady > 0 })
}

// plotMetricVsLinkBytes is the same against the bytes that cross the busiest
// link in a steady step (time_model.link_bytes_per_step): what the network
// carries, which for an all-gather grows with the workers while the ratio
// does not. Nil when no variation compresses or no run has the figure.
func plotMetricVsLinkBytes(name string, groups []group, failed []failedRun) (*figure, error) {
	if !compressed(groups) || !slices.ContainsFunc(groups, func(g group) bool { return len(values(g, linkKB)) > 0 }) {
		return nil, nil
	}
	return plotMetricVs(name, groups, failed, "bytes through the busiest link", "kB through the busiest link per steady step (log scale)", " kB", linkKB)
}

// plotMetricVs draws the final metric against x(summary) on a log axis.
func plotMetricVs(name string, groups []group, failed []failedRun, what, xLabel, unit string, x func(*train.Summary) (float64, bool)) (*figure, error) {
	p, m, acc := finalMetricPlot(name, groups, what)
	p.X.Label.Text = xLabel
	type point struct {
		i      int
		g      group
		pt     plotter.XY
		std    float64
		text   string // the metric as table.md writes it
		xValue float64
	}
	var pts []point
	var ys []float64
	for i, g := range groups {
		y := values(g, m.value)
		xs := values(g, x)
		if len(y) == 0 || len(xs) == 0 {
			continue
		}
		// The x axis is linear in log10 with ticks labelled as values:
		// plot.LogScale would do the same, but gonum/plot then places the
		// axis label as if the axis were linear and shrinks the plot to fit it.
		pts = append(pts, point{i, g, plotter.XY{X: math.Log10(mean(xs)), Y: mean(y)}, sampleStd(y), meanStd(y, m.decimals), mean(xs)})
		ys = append(ys, mean(y))
	}
	leg := newLegend()
	if len(pts) > 0 {
		limit, inside := bandLimit(ys, acc)
		lo, hi := math.Inf(1), math.Inf(-1)
		minX, maxX := math.Inf(1), math.Inf(-1)
		for _, q := range pts {
			if inside(q.pt.Y) {
				lo, hi = math.Min(lo, q.pt.Y-q.std), math.Max(hi, q.pt.Y+q.std)
			}
			minX, maxX = math.Min(minX, q.pt.X), math.Max(maxX, q.pt.X)
		}
		anyOff := slices.ContainsFunc(pts, func(q point) bool { return !inside(q.pt.Y) })
		setBand(p, lo, hi, limit, acc, anyOff)
		for _, q := range pts {
			at := q.pt
			label := fmt.Sprintf("%s: %s @ %s%s", q.g.name, q.text, strconv.FormatFloat(q.xValue, 'g', 3, 64), unit)
			if !inside(q.pt.Y) {
				at.Y = axisEdge(p, acc)
				label += " (off the axis)"
			}
			label += failedNote(q.g.name, &q.g, failed)
			sc, err := plotter.NewScatter(plotter.XYs{at})
			if err != nil {
				return nil, fmt.Errorf("variation %s: %w", q.g.name, err)
			}
			_, sc.GlyphStyle = style(q.i)
			sc.GlyphStyle.Radius = vg.Points(4)
			p.Add(sc)
			if inside(q.pt.Y) {
				if err := addErrorBars(p, q.i, plotter.XYs{at}, []float64{q.std}); err != nil {
					return nil, err
				}
			}
			leg.Add(label, sc)
		}
		// Room for the glyphs at the extremes, and a range even when every
		// point sits at one x.
		p.X.Min, p.X.Max = minX-math.Log10(1.5), maxX+math.Log10(1.5)
		p.X.Tick.Marker = log10Ticks{}
	}
	addFailed(leg, groups, failed)
	return render(p, leg)
}

// finalMetricPlot is a new plot of the final test metric (accuracy when the
// runs are classifiers, else loss) against what, with that metric.
func finalMetricPlot(name string, groups []group, what string) (p *plot.Plot, m metric, acc bool) {
	acc = classifiers(groups)
	p = newPlot()
	m = lossMetric
	if acc {
		m = accuracyMetric
		p.Title.Text = name + ": final test accuracy vs " + what
		p.Y.Label.Text = "final test accuracy (%, mean ± std over seeds)"
	} else {
		p.Title.Text = name + ": final test loss vs " + what
		p.Y.Label.Text = "final test loss (nats/char, mean ± std)"
	}
	return p, m, acc
}

func newPlot() *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = NiceTicks{}, NiceTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// legend is a plot.Legend that remembers its entries' names, to size its column.
type legend struct {
	plot.Legend
	names []string
}

func newLegend() *legend {
	l := &legend{Legend: plot.NewLegend()}
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = vg.Points(11)
	l.Padding = vg.Points(3)
	return l
}

// Add adds an entry.
func (l *legend) Add(name string, thumbs ...plot.Thumbnailer) {
	l.Legend.Add(name, thumbs...)
	l.names = append(l.names, name)
}

// addLinePoints adds a line with a glyph at every point (curves of a few
// epochs would otherwise be bare segments, and one epoch invisible).
func addLinePoints(p *plot.Plot, leg *legend, i int, name string, xy plotter.XYs) error {
	line, points, err := plotter.NewLinePoints(xy)
	if err != nil {
		return fmt.Errorf("variation %s: %w", name, err)
	}
	line.LineStyle, points.GlyphStyle = style(i)
	if len(xy) == 1 {
		points.GlyphStyle.Radius *= 1.5 // a lone point has no line to find it by
	}
	p.Add(line, points)
	leg.Add(name, line, points)
	return nil
}

// integerTicks labels every integer (epochs) when there are few, instead of
// the default ticks' 0.5 steps.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Ceil(lo); v <= hi; v++ {
		ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprint(v)})
	}
	if len(ticks) > 15 {
		return NiceTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// NiceTicks puts about six labelled ticks at multiples of 1, 2, 2.5 or 5 times
// a power of ten, labelled with as few decimals as that step needs, and a minor
// tick between them. (plot.DefaultTicks gives as few as three labels, and
// labels like 250.00.)
type NiceTicks struct{}

func (NiceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 6
	e := math.Floor(math.Log10(raw))
	mag := math.Pow(10, e)
	step, mant := 10*mag, 10.0
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step, mant = m*mag, m
			break
		}
	}
	decimals := -int(e)
	if mant == 10 {
		decimals--
	}
	if mant == 2.5 {
		decimals++
	}
	decimals = max(decimals, 0)
	var ticks []plot.Tick
	for k := math.Ceil(lo / step * 2); k <= math.Floor(hi/step*2); k++ {
		v := k * step / 2
		t := plot.Tick{Value: v}
		if math.Mod(k, 2) == 0 {
			t.Label = fixed(v, decimals)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// log10Ticks are the ticks of an axis whose values are log10 of the quantity
// shown: labelled at 1, 2 and 5 times the powers of ten when the axis spans up
// to three decades (only at the powers of ten beyond that), unlabelled minor
// ticks at the other integer multiples.
type log10Ticks struct{}

func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
	few := hi-lo <= 3
	// Under one decade every tick is labelled: 1, 2 and 5 alone may leave
	// one or two labels on the axis.
	dense := hi-lo < 1
	var ticks []plot.Tick
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		for m := 1.0; m < 10; m++ {
			// Below 1, m / 10^-e: dividing by the exact power of ten rounds
			// to the decimal's nearest float (0.3), where m x 10^e does not
			// (3 x 0.1 = 0.30000000000000004, printed as such).
			v := m * math.Pow(10, e)
			if e < 0 {
				v = m / math.Pow(10, -e)
			}
			t := plot.Tick{Value: math.Log10(v)}
			if t.Value < lo || t.Value > hi {
				continue
			}
			if m == 1 || few && (m == 2 || m == 5) || dense {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// figure is one plot encoded twice: a PNG and an SVG (vector, for papers).
type figure struct {
	png, svg []byte
}

// render draws the plot and, right of it, the legend, as a PNG and an SVG.
func render(p *plot.Plot, leg *legend) (*figure, error) {
	legendW := vg.Length(0)
	if len(leg.names) > 0 {
		for _, name := range leg.names {
			legendW = max(legendW, leg.TextStyle.Width(name))
		}
		legendW += leg.ThumbnailWidth + 3*leg.TextStyle.Width(" ")
	}
	h := plotHeight
	entryH := leg.TextStyle.Height("Xg") + leg.Padding
	if need := entryH*vg.Length(len(leg.names)) + vg.Inch; need > h {
		h = need // a long legend makes the picture taller rather than clipped
	}
	w := plotWidth + legendW
	drawOn := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		area := dc
		area.Max.X = area.Min.X + plotWidth
		// A margin, so that the title and the last tick labels are not cut at
		// the picture's edges.
		p.Draw(draw.Crop(area, vg.Points(6), -vg.Points(12), vg.Points(4), -vg.Points(8)))
		if legendW > 0 {
			la := dc
			la.Min.X = area.Max.X
			la.Max.Y -= vg.Points(30) // level with the top of the data area, below the title
			leg.Legend.Draw(la)
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI))
	drawOn(img)
	var png bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&png); err != nil {
		return nil, err
	}
	svg := vgsvg.New(w, h)
	drawOn(svg)
	var sb bytes.Buffer
	if _, err := svg.WriteTo(&sb); err != nil {
		return nil, err
	}
	return &figure{png: png.Bytes(), svg: sb.Bytes()}, nil
}
