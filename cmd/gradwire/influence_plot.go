package main

import (
	"cmp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradwire/gradwire/internal/train"
)

// detectionCurve ranks the scored examples by key, highest first (ties in
// the given order), and returns the percentage of the mislabelled ones found
// against the percentage of examples inspected, at the start, at most about
// 200 evenly spaced points and the end.
func detectionCurve(s []train.ScoredExample, key func(train.ScoredExample) float64) plotter.XYs {
	ranked := slices.Clone(s)
	slices.SortStableFunc(ranked, func(a, b train.ScoredExample) int { return cmp.Compare(key(b), key(a)) })
	flipped := 0
	for _, e := range ranked {
		if e.Mislabeled {
			flipped++
		}
	}
	n := len(ranked)
	if n == 0 || flipped == 0 {
		return nil
	}
	every := max(1, n/200)
	xy := plotter.XYs{{X: 0, Y: 0}}
	hits := 0
	for i, e := range ranked {
		if e.Mislabeled {
			hits++
		}
		if (i+1)%every == 0 || i == n-1 {
			xy = append(xy, plotter.XY{X: 100 * float64(i+1) / float64(n), Y: 100 * float64(hits) / float64(flipped)})
		}
	}
	return xy
}

// plotDetection draws, for a run with flipped labels, the share of the
// mislabelled examples found against the share of examples inspected in the
// order of self-influence, of the final loss and at random (the diagonal),
// over the first half of the ranking, next to the JSON result out (out's name
// with .png and .svg).
func plotDetection(res *train.InfluenceResult, out string) error {
	p := plot.New()
	p.Title.Text = "mislabelled training examples found, by ranking"
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "scored training examples inspected, highest ranked first (%; the first half)"
	p.Y.Label.Text = "mislabelled examples found (%)"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(10)
	layer := map[bool]string{true: "last layer", false: "every parameter"}[res.LastLayer]
	series := []struct {
		name string
		xy   plotter.XYs
	}{
		{"self-influence (TracInCP, " + layer + ")", detectionCurve(res.Self, func(e train.ScoredExample) float64 { return e.Score })},
		{"loss at the final checkpoint", detectionCurve(res.Self, func(e train.ScoredExample) float64 { return e.Loss })},
		{"random order (expected)", plotter.XYs{{X: 0, Y: 0}, {X: 50, Y: 50}}},
	}
	dashes := [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}
	for i, s := range series {
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: plotColours[i%len(plotColours)], Width: vg.Points(1.5), Dashes: dashes[i]}
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	// The first half (set after adding, which widens the axes to the data):
	// with 10% of the labels flipped the informative part lies below 30%.
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 50, 0, 100
	return savePlot(p, "", strings.TrimSuffix(out, ".json"))
}
