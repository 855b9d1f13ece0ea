package sweep

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// AccVsBatchPNG is the large-batch comparison's plot (see plotMetricVsBatch).
const AccVsBatchPNG = "accuracy_vs_batch.png"

// offEdge is the share of the metric axis added at its bad end (the bottom for
// accuracy) where failed runs and values off the band are drawn, so that
// their marks do not sit on the points inside it.
const offEdge = 0.15

// plotMetricVsBatch draws the large-batch comparison laid out by newBatchGrid:
// each row's final test metric against the global batch (log axis), the mean
// over seeds with ±std error bars; a batch where every run of a row failed is
// a cross at the axis's bad end, as is a value that collapsed far below the
// others (see bandLimit), and the legend gives every cell's figure. Nil when
// the sweep is not such a comparison.
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
	lo, hi := math.Inf(1), math.Inf(-1)
	if len(ys) > 0 {
		_, inside = bandLimit(ys, acc)
		for _, g := range bg.cell {
			if v := values(*g, m.value); len(v) > 0 && inside(mean(v)) {
				lo, hi = math.Min(lo, mean(v)-sampleStd(v)), math.Max(hi, mean(v)+sampleStd(v))
			}
		}
	}
	if math.IsInf(lo, 0) { // every run failed
		lo, hi = 0, 1
		if acc {
			hi = 100
		}
	}
	pad := max((hi-lo)*0.06, 0.01*math.Max(math.Abs(hi), 1))
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
	edgeMarks := len(bg.failed) > 0 || len(ys) > 0 && func() bool {
		for _, y := range ys {
			if !inside(y) {
				return true
			}
		}
		return false
	}()
	if edgeMarks {
		if extra := (p.Y.Max - p.Y.Min) * offEdge; acc {
			p.Y.Min -= extra
		} else {
			p.Y.Max += extra
		}
	}
	edge := axisEdge(p, acc)

	leg := newLegend()
	anyFailed := false
	for i, row := range bg.rows {
		var xy, offAt, crossAt plotter.XYs
		var std []float64
		var cells []string
		for _, b := range bg.batches {
			x := math.Log2(float64(b))
			key := cellKey(row, b)
			g := bg.cell[key]
			if g == nil {
				if bg.failed[key] {
					crossAt = append(crossAt, plotter.XY{X: x, Y: edge})
					cells = append(cells, fmt.Sprintf("%d: failed", b))
				}
				continue
			}
			v := values(*g, m.value)
			if len(v) == 0 {
				continue
			}
			text := fmt.Sprintf("%d: %s", b, meanStd(v, m.decimals))
			pt := plotter.XY{X: x, Y: mean(v)}
			sd := sampleStd(v)
			if bg.failed[key] {
				text += " (a seed failed)"
			}
			if !inside(pt.Y) {
				// A glyph at the edge, not joined to the line: a segment down
				// to it would draw a slope that is not the data's.
				offAt, cells = append(offAt, plotter.XY{X: x, Y: edge}), append(cells, text+" (off the axis)")
				continue
			}
			xy, std, cells = append(xy, pt), append(std, sd), append(cells, text)
		}
		label := row + ": " + strings.Join(cells, ", ")
		if len(offAt) > 0 {
			sc, err := plotter.NewScatter(offAt)
			if err != nil {
				return nil, err
			}
			_, sc.GlyphStyle = style(i)
			p.Add(sc)
			if len(xy) == 0 && len(crossAt) == 0 {
				leg.Add(label, sc)
				continue
			}
		}
		if len(crossAt) > 0 {
			anyFailed = true
			sc, err := plotter.NewScatter(crossAt)
			if err != nil {
				return nil, err
			}
			_, sc.GlyphStyle = style(i)
			sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = draw.CrossGlyph{}, vg.Points(6)
			p.Add(sc)
			if len(xy) == 0 { // every run of the row failed: its crosses alone
				leg.Add(label, sc)
				continue
			}
		}
		if len(xy) == 0 {
			continue
		}
		if err := addLinePoints(p, leg, i, label, xy); err != nil {
			return nil, err
		}
		if err := addErrorBars(p, i, xy, std); err != nil {
			return nil, err
		}
	}
	if anyFailed {
		// A legend entry of its own says what a cross means (the scatter is
		// its thumbnail only, not drawn on the plot).
		sc, err := plotter.NewScatter(plotter.XYs{{}})
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: palette[7], Radius: vg.Points(6), Shape: draw.CrossGlyph{}}
		leg.Add("x: every seed at that batch failed (drawn at the axis's end)", sc)
	}
	lo2, hi2 := math.Log2(float64(bg.batches[0])), math.Log2(float64(bg.batches[len(bg.batches)-1]))
	p.X.Min, p.X.Max = lo2-0.5, hi2+0.5
	p.X.Tick.Marker = batchTicks(bg.batches)
	return render(p, leg)
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
