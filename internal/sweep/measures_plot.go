package sweep

import (
	"fmt"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotSharpnessVsGap draws each measured run's top Hessian eigenvalue (the
// sharpness of its minimum, log scale) against its generalization gap, one
// glyph per variation: the sharp-minima account of the large-batch gap made
// visible. nil when no run has measures.
func plotSharpnessVsGap(name string, groups []group, _ []failedRun) (*figure, error) {
	p := newPlot()
	p.Title.Text = name + ": sharpness against the generalization gap"
	p.X.Label.Text = "top Hessian eigenvalue (log scale)"
	p.Y.Label.Text = "training minus test accuracy (points)"
	leg := newLegend()
	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for i, g := range groups {
		var xy plotter.XYs
		for _, r := range g.runs {
			if r.measures == nil || r.sum.TestAccuracy == nil || !(r.measures.HessianTop > 0) {
				continue
			}
			gap := 100 * (r.measures.TrainAccuracy - *r.sum.TestAccuracy)
			xy = append(xy, plotter.XY{X: math.Log10(r.measures.HessianTop), Y: gap})
			minX, maxX = min(minX, xy[len(xy)-1].X), max(maxX, xy[len(xy)-1].X)
			minY, maxY = min(minY, gap), max(maxY, gap)
		}
		if len(xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, fmt.Errorf("variation %s: %w", g.name, err)
		}
		_, sc.GlyphStyle = style(i)
		sc.GlyphStyle.Radius = vg.Points(4)
		p.Add(sc)
		label := g.name
		if len(xy) == 1 {
			label = fmt.Sprintf("%s: eigenvalue %.3g, gap %+.2f", g.name, math.Pow(10, xy[0].X), xy[0].Y)
		}
		leg.Add(label, sc)
	}
	if len(leg.names) == 0 {
		return nil, nil
	}
	// Room for the glyphs at the extremes, and a range even when every point
	// sits at one value.
	p.X.Min, p.X.Max = minX-math.Log10(1.2), maxX+math.Log10(1.2)
	pad := max(0.1*(maxY-minY), 0.2)
	p.Y.Min, p.Y.Max = minY-pad, maxY+pad
	p.X.Tick.Marker = log10Ticks{}
	return render(p, leg)
}
