package sweep

import (
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// AccVsBatchPNG is the large-batch comparison's plot (see plotMetricVsBatch).
const AccVsBatchPNG = "accuracy_vs_batch.png"

// The strip at the metric axis's bad end (the bottom for accuracy) where
// failed batches and values off the band are marked: a slot per mark at a
// batch, so that marks of several rows at one batch do not cover each other.
const (
	edgeSlot    = 0.07 // of the band's height, per slot
	edgeMaxFrac = 0.45 // the most the strip takes, however many slots
)

// batchLine is a row of the comparison as plotMetricVsBatch draws it: its
// values inside the band, its marks in the strip (at a batch's x, in a slot),
// and every cell's figure for the legend.
type batchLine struct {
	xy, off, failed plotter.XYs // off and failed: X and the slot number as Y, until placed
	std             []float64
	cells           []string
}

// plotMetricVsBatch draws the large-batch comparison laid out by newBatchGrid:
// each row's final test metric against the global batch (log axis), the mean
// over seeds with ±std error bars. A batch where every run of a row failed is
// the word "failed" in the row's colour in a strip at the axis's bad end, and
// a value that collapsed far below the others (see bandLimit) the row's glyph
// there, not joined to its line; the legend gives every cell's figure. Nil
// when the sweep is not such a comparison.
func plotMetricVsBatch(name string, groups []group, failed []failedRun) (*figure, error) {
	bg := newBatchGrid(groups, failed)
	if bg == nil {
		return nil, nil
	}
	p, m, acc := finalMetricPlot(name, groups, "global batch")
	p.X.Label.Text = "global batch (log scale)"

	var ys []float64
	for _, g := range bg.cell {
		if v := values(*g, m.value); len(v) > 0 {
			ys = append(ys, mean(v))
		}
	}
	inside := func(float64) bool { return false }
	if len(ys) > 0 {
		_, inside = bandLimit(ys, acc)
	}
	// Each cell once: a value in the band, a mark in the strip (a slot per
	// mark at a batch), or nothing; and its figure for the legend.
	lo, hi := math.Inf(1), math.Inf(-1)
	slots := map[int]int{} // batch -> marks so far
	maxSlots := 0
	mark := func(b int) plotter.XY {
		at := plotter.XY{X: math.Log2(float64(b)), Y: float64(slots[b])}
		slots[b]++
		maxSlots = max(maxSlots, slots[b])
		return at
	}
	lines := make([]batchLine, len(bg.rows))
	for i, row := range bg.rows {
		l := &lines[i]
		for _, b := range bg.batches {
			key := cellKey(row, b)
			g := bg.cell[key]
			if g == nil {
				if bg.failed[key] {
					l.failed = append(l.failed, mark(b))
					l.cells = append(l.cells, strconv.Itoa(b)+": failed")
				}
				continue
			}
			v := values(*g, m.value)
			if len(v) == 0 {
				continue
			}
			text := strconv.Itoa(b) + ": " + meanStd(v, m.decimals)
			if bg.failed[key] {
				text += " (a seed failed)"
			}
			if !inside(mean(v)) {
				l.off = append(l.off, mark(b))
				l.cells = append(l.cells, text+" (off the axis)")
				continue
			}
			l.xy = append(l.xy, plotter.XY{X: math.Log2(float64(b)), Y: mean(v)})
			l.std, l.cells = append(l.std, sampleStd(v)), append(l.cells, text)
			lo, hi = math.Min(lo, mean(v)-sampleStd(v)), math.Max(hi, mean(v)+sampleStd(v))
		}
	}
	if math.IsInf(lo, 0) { // no value inside: every run failed or collapsed
		lo, hi = 0, 1
		if acc {
			hi = 100
		}
	}
	setBand(p, lo, hi, 0, acc, false)
	slotY := func(int) float64 { return 0 }
	if maxSlots > 0 {
		slotY = addStrip(p, acc, maxSlots)
	}
	place := func(marks plotter.XYs) {
		for k := range marks {
			marks[k].Y = slotY(int(marks[k].Y))
		}
	}

	leg := newLegend()
	for i, row := range bg.rows {
		l := lines[i]
		place(l.off)
		place(l.failed)
		label := row + ": " + strings.Join(l.cells, ", ")
		lineStyle, glyph := style(i)
		if len(l.off) > 0 {
			sc, err := plotter.NewScatter(l.off)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = glyph
			p.Add(sc)
		}
		if err := addFailedWords(p, l.failed, lineStyle.Color); err != nil {
			return nil, err
		}
		if len(l.xy) == 0 {
			sc, err := plotter.NewScatter(plotter.XYs{{}}) // the legend's thumbnail only
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = glyph
			leg.Add(label, sc)
			continue
		}
		if err := addLinePoints(p, leg, i, label, l.xy); err != nil {
			return nil, err
		}
		if err := addErrorBars(p, i, l.xy, l.std); err != nil {
			return nil, err
		}
	}
	if maxSlots > 0 {
		leg.Add(beyondNote(acc))
	}
	lo2, hi2 := math.Log2(float64(bg.batches[0])), math.Log2(float64(bg.batches[len(bg.batches)-1]))
	p.X.Min, p.X.Max = lo2-0.5, hi2+0.5
	p.X.Tick.Marker = batchTicks(bg.batches)
	return render(p, leg)
}

// addStrip extends p's metric axis at its bad end (the bottom for accuracy)
// by a strip of n slots for marks that are not values (failed runs, values
// off the band), parted from the band by a dashed line and without ticks, and
// returns where slot k lies.
func addStrip(p *plot.Plot, acc bool, n int) (slotY func(int) float64) {
	span := p.Y.Max - p.Y.Min
	step := math.Min(edgeSlot*span, edgeMaxFrac*span/float64(max(n, 1)))
	strip := step * float64(max(n, 1))
	edge := p.Y.Min // the band's end, where the strip begins
	if acc {
		p.Y.Min -= strip
		slotY = func(k int) float64 { return p.Y.Min + step*(float64(k)+0.5) }
	} else {
		edge = p.Y.Max
		p.Y.Max += strip
		slotY = func(k int) float64 { return p.Y.Max - step*(float64(k)+0.5) }
	}
	p.Y.Tick.Marker = stripTicks{inner: p.Y.Tick.Marker, edge: edge, below: acc}
	p.Add(hLine{y: edge, style: draw.LineStyle{Color: stripEdgeColour, Width: vg.Points(0.75), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}})
	return slotY
}

// stripEdgeColour draws the line between the band and the strip: a light
// grey that no variation has (the palette's own grey is the eighth's).
var stripEdgeColour = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}

// hLine is a horizontal line across the whole data area at y. It has no
// data range, so that it leaves the axes' ranges as they are.
type hLine struct {
	y     float64
	style draw.LineStyle
}

func (h hLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// addFailedWords writes "failed" centred at each point, in colour c.
func addFailedWords(p *plot.Plot, at plotter.XYs, c color.Color) error {
	if len(at) == 0 {
		return nil
	}
	words := make([]string, len(at))
	for k := range words {
		words[k] = "failed"
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: words})
	if err != nil {
		return err
	}
	for k := range lab.TextStyle {
		lab.TextStyle[k].Color = c
		lab.TextStyle[k].XAlign, lab.TextStyle[k].YAlign = text.XCenter, text.YCenter
	}
	p.Add(lab)
	return nil
}

// beyondNote is the legend's line on the strip.
func beyondNote(acc bool) string {
	side := "above"
	if acc {
		side = "below"
	}
	return side + " the dashed line: failed runs and values off the axis, not to scale"
}

// stripTicks are inner's ticks less those in the strip beyond edge (below it
// when below, else above).
type stripTicks struct {
	inner plot.Ticker
	edge  float64
	below bool
}

func (t stripTicks) Ticks(lo, hi float64) []plot.Tick {
	if t.below {
		lo = t.edge
	} else {
		hi = t.edge
	}
	return t.inner.Ticks(lo, hi)
}

// batchTicks labels the global batches of a sweep on a log2 axis.
type batchTicks []int

func (t batchTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, b := range t {
		if x := math.Log2(float64(b)); x >= lo && x <= hi {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(b)})
		}
	}
	return ticks
}
