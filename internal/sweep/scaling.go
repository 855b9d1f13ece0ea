package sweep

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"gonum.org/v1/plot/plotter"

	"github.com/gradwire/gradwire/internal/train"
)

// Scaling plots, drawn when a sweep trains the same method at several worker
// counts (variations named METHOD-wN, or any variations sharing a compressor
// and differing in workers).
const (
	ScalingSpeedUpPNG = "scaling_speedup_%ggbps.png" // one per bandwidth of the table
	ScalingLinkPNG    = "scaling_link_bytes.png"
)

// workerSuffix is a variation name's worker-count suffix ("dgc-w16").
var workerSuffix = regexp.MustCompile(`-w[0-9]+$`)

// method is one line of a scaling plot: a method's groups at their worker counts.
type method struct {
	name   string
	points []group // sorted by workers
}

// scalingMethods groups the variations by name without the "-wN" suffix, the
// groups of each in order of workers; only methods trained at two or more
// worker counts above one are kept (one worker has no communication to plot).
func scalingMethods(groups []group) []method {
	var out []method
	index := map[string]int{}
	for _, g := range groups {
		if workersOf(g) <= 1 {
			continue
		}
		name := workerSuffix.ReplaceAllString(g.name, "")
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, method{name: name})
		}
		out[i].points = append(out[i].points, g)
	}
	var kept []method
	for _, m := range out {
		slices.SortStableFunc(m.points, func(a, b group) int { return workersOf(a) - workersOf(b) })
		ws := map[int]bool{}
		for _, g := range m.points {
			ws[workersOf(g)] = true
		}
		if len(ws) >= 2 {
			kept = append(kept, m)
		}
	}
	return kept
}

// workersOf is the group's worker count (its first run's).
func workersOf(g group) int {
	if len(g.runs) == 0 {
		return 0
	}
	return g.runs[0].sum.Workers
}

// plotScaling draws, per method, the mean over seeds of y (where present)
// against the worker count, both axes log-scaled when logY.
func plotScaling(title, ylabel string, methods []method, y func(*train.Summary) (float64, bool), logY bool) (*figure, error) {
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = "workers (log scale)"
	p.Y.Label.Text = ylabel
	leg := newLegend()
	minX, maxX := math.Inf(1), math.Inf(-1)
	for i, m := range methods {
		var xy plotter.XYs
		for _, g := range m.points {
			v := values(g, y)
			if len(v) == 0 {
				continue
			}
			pt := plotter.XY{X: math.Log10(float64(workersOf(g))), Y: mean(v)}
			if logY {
				if pt.Y <= 0 {
					continue
				}
				pt.Y = math.Log10(pt.Y)
			}
			xy = append(xy, pt)
			minX, maxX = math.Min(minX, pt.X), math.Max(maxX, pt.X)
		}
		if len(xy) == 0 {
			continue
		}
		if err := addLinePoints(p, leg, i, m.name, xy); err != nil {
			return nil, err
		}
	}
	if maxX > minX {
		pad := (maxX - minX) * 0.05
		p.X.Min, p.X.Max = minX-pad, maxX+pad
	}
	p.X.Tick.Marker = log10Ticks{}
	if logY {
		p.Y.Tick.Marker = log10Ticks{}
	}
	return render(p, leg)
}

// scalingPlots returns the scaling plots by file name, none when no method was
// trained at several worker counts.
func scalingPlots(name string, groups []group) (map[string]*figure, error) {
	methods := scalingMethods(groups)
	if len(methods) == 0 {
		return nil, nil
	}
	out := map[string]*figure{}
	for _, gbps := range speedUpGbps {
		png, err := plotScaling(fmt.Sprintf("%s: predicted speed-up at %g Gbit/s (time model)", name, gbps),
			"speed-up over one machine", methods, speedUpAt(gbps), false)
		if err != nil {
			return nil, err
		}
		out[fmt.Sprintf(ScalingSpeedUpPNG, gbps)] = png
	}
	png, err := plotScaling(name+": bytes through the busiest link per step (log-log)", "kB per steady step (log scale)",
		methods, linkKB, true)
	if err != nil {
		return nil, err
	}
	out[ScalingLinkPNG] = png
	return out, nil
}
