package sweep

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/gradwire/gradwire/internal/train"
)

// Plot geometry. The legend gets its own column right of the plot, so that it
// never hides a curve however many variations there are.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 5 * vg.Inch
	plotDPI    = 96
)

// palette is the ten-colour categorical palette of d3/matplotlib: distinct on
// screen and in print. Beyond ten variations the dash pattern changes too.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// style is variation i's line and glyph style, the same in every plot.
func style(i int) (draw.LineStyle, draw.GlyphStyle) {
	c := palette[i%len(palette)]
	line := draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: plotutil.Dashes(i / len(palette))}
	glyph := draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: plotutil.Shape(i)}
	return line, glyph
}

// classifiers reports whether any run has a test accuracy: the plots then show
// accuracy (of the classifier runs); otherwise validation loss.
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
// (epoch or step), and returns them sorted by x.
func meanCurve(g group, points func(*runData) map[float64]float64) plotter.XYs {
	sum, n := map[float64]float64{}, map[float64]int{}
	for _, r := range g.runs {
		for x, y := range points(r) {
			sum[x] += y
			n[x]++
		}
	}
	var xy plotter.XYs
	for x := range sum {
		xy = append(xy, plotter.XY{X: x, Y: sum[x] / float64(n[x])})
	}
	slices.SortFunc(xy, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
	return xy
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// plotTestMetric draws the test metric after every epoch, one line per
// variation (the mean over its seeds).
func plotTestMetric(name string, groups []group) ([]byte, error) {
	acc := classifiers(groups)
	p := newPlot()
	if acc {
		p.Title.Text = name + ": test accuracy per epoch (mean over seeds)"
		p.Y.Label.Text = "test accuracy (%)"
	} else {
		p.Title.Text = name + ": validation loss per epoch (mean over seeds)"
		p.Y.Label.Text = "validation loss (nats/char)"
	}
	p.X.Label.Text = "epoch"
	leg := newLegend()
	maxX := 0.0
	for i, g := range groups {
		xy := meanCurve(g, func(r *runData) map[float64]float64 {
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
		if err := addLinePoints(p, leg, i, g.name, xy); err != nil {
			return nil, err
		}
	}
	if maxX <= 30 {
		p.X.Tick.Marker = integerTicks{}
	}
	return render(p, leg)
}

// plotTrainLoss draws the logged training loss (metrics.jsonl step records),
// one line per variation (the mean over its seeds).
func plotTrainLoss(name string, groups []group) ([]byte, error) {
	p := newPlot()
	p.Title.Text = name + ": training loss (mean over seeds)"
	p.X.Label.Text = "training step"
	p.Y.Label.Text = "training loss (nats)"
	leg := newLegend()
	for i, g := range groups {
		xy := meanCurve(g, func(r *runData) map[float64]float64 {
			m := map[float64]float64{}
			for _, s := range r.steps {
				m[float64(s.Step)] = s.Loss
			}
			return m
		})
		if len(xy) == 0 {
			continue
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("variation %s: %w", g.name, err)
		}
		line.LineStyle, _ = style(i)
		p.Add(line)
		leg.Add(g.name, line)
	}
	return render(p, leg)
}

// plotMetricVsCompression draws each variation's final test accuracy (or
// validation loss) against its steady-state compression ratio on a log axis,
// means over seeds, one labelled point per variation.
func plotMetricVsCompression(name string, groups []group) ([]byte, error) {
	acc := classifiers(groups)
	p := newPlot()
	m := lossMetric
	if acc {
		m = accuracyMetric
		p.Title.Text = name + ": final test accuracy vs compression (mean over seeds)"
		p.Y.Label.Text = "final test accuracy (%)"
	} else {
		p.Title.Text = name + ": final validation loss vs compression (mean over seeds)"
		p.Y.Label.Text = "final validation loss (nats/char)"
	}
	p.X.Label.Text = "steady-state compression ratio (dense bytes / bytes sent, log scale)"
	leg := newLegend()
	var labels plotter.XYLabels
	minX, maxX := math.Inf(1), math.Inf(-1)
	for i, g := range groups {
		y := values(g, m.value)
		x := values(g, func(s *train.Summary) (float64, bool) { return s.CompressionRatioSteady, s.CompressionRatioSteady > 0 })
		if len(y) == 0 || len(x) == 0 {
			continue
		}
		// The x axis is linear in log10(ratio) with ticks labelled as ratios:
		// plot.LogScale would do the same, but gonum/plot v0.11 then places the
		// axis label as if the axis were linear and shrinks the plot to fit it.
		pt := plotter.XY{X: math.Log10(mean(x)), Y: mean(y)}
		sc, err := plotter.NewScatter(plotter.XYs{pt})
		if err != nil {
			return nil, fmt.Errorf("variation %s: %w", g.name, err)
		}
		_, sc.GlyphStyle = style(i)
		sc.GlyphStyle.Radius = vg.Points(4)
		p.Add(sc)
		leg.Add(g.name, sc)
		labels.XYs = append(labels.XYs, pt)
		labels.Labels = append(labels.Labels, g.name)
		minX, maxX = math.Min(minX, pt.X), math.Max(maxX, pt.X)
	}
	if len(labels.XYs) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font.Size = vg.Points(9)
		}
		l.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
		p.Add(l)
		// Room for the glyphs and the labels right of them, and a range even
		// when every point sits at ratio 1.
		p.X.Min, p.X.Max = minX-math.Log10(1.5), maxX+math.Log10(3)
		// Keep the glyphs at the extremes off the frame.
		pad := max((p.Y.Max-p.Y.Min)*0.08, 0.5)
		p.Y.Min, p.Y.Max = p.Y.Min-pad, p.Y.Max+pad
		p.X.Tick.Marker = log10Ticks{}
	}
	return render(p, leg)
}

func newPlot() *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
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
		return niceTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// niceTicks puts about six labelled ticks at multiples of 1, 2, 2.5 or 5 times
// a power of ten, labelled with as few decimals as that step needs, and a minor
// tick between them. (plot.DefaultTicks gives as few as three labels, and
// labels like 250.00.)
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
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
	var ticks []plot.Tick
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			t := plot.Tick{Value: math.Log10(v)}
			if t.Value < lo || t.Value > hi {
				continue
			}
			if m == 1 || few && (m == 2 || m == 5) {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// render draws the plot and, right of it, the legend, and encodes a PNG.
func render(p *plot.Plot, leg *legend) ([]byte, error) {
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
	c := vgimg.NewWith(vgimg.UseWH(plotWidth+legendW, h), vgimg.UseDPI(plotDPI))
	dc := draw.New(c)
	area := dc
	area.Max.X = area.Min.X + plotWidth
	// A margin, so that the title and the last tick labels are not cut at the
	// picture's edges.
	p.Draw(draw.Crop(area, vg.Points(6), -vg.Points(12), vg.Points(4), -vg.Points(8)))
	if legendW > 0 {
		la := dc
		la.Min.X = area.Max.X
		la.Max.Y -= vg.Points(30) // level with the top of the data area, below the title
		leg.Legend.Draw(la)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
