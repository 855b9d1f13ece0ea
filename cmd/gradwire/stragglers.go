package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradwire/gradwire/dist/straggler"
	"github.com/gradwire/gradwire/internal/sweep"
)

func newStragglersCmd() *cobra.Command {
	var (
		workers []int
		backups []int
		trials  int
		seed    uint64
		slow    float64
		p       straggler.Params
		names   []string
		out     string
	)
	cmd := &cobra.Command{
		Use:   "stragglers [--delays LIST] [--workers LIST] [--backups LIST] [--trials N] [--out DIR]",
		Short: "Simulate the step time of K synchronous workers with random delays and check it against closed forms",
		Long: `Each worker's step takes C(1 + X), X drawn from a delay distribution; a
synchronous step waits for the slowest worker, or with b backup workers for the
(K-b)-th to finish. For every delay in --delays, K in --workers and b in
--backups this simulates --trials steps (a seeded stream per case) and reports
the mean extra time E[X_(K-b:K)] in units of C with its standard error, against
the closed form where one exists (exponential: mean (H_K - H_b), shifted:
shift + that; Pareto: x_m Gamma(K+1) Gamma(1-1/a) / Gamma(K+1-1/a) for b = 0)
and the numerical integral of the order statistic otherwise (the Gaussian, and
Pareto with backups), with sigma sqrt(2 ln K) beside the Gaussian's for
comparison. A fixed slow worker (--slow factor, 0 = off) adds rows where worker
0 takes factor x C(1 + X) under the first delay.

Delays: none; exp (--mean); shifted-exp (--shift, --mean); gauss (--mean,
--sigma; clipped at -1 so a step never takes negative time); pareto (--scale
x_m, --shape a > 1).

Writes to --out: table.md, stragglers.csv and stragglers.png/.svg (expected
step time against K at the fewest backups in --backups, simulated points with
error bars and the closed forms as lines, one colour per delay).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if trials < 2 {
				return fmt.Errorf("--trials %d: expected >= 2", trials)
			}
			for _, k := range workers {
				// Each simulated step draws K delays into one slice.
				if k < 1 || k > maxStragglerWorkers {
					return fmt.Errorf("--workers %d: expected 1 to %d", k, maxStragglerWorkers)
				}
			}
			for _, b := range backups {
				if b < 0 {
					return fmt.Errorf("--backups %d: expected >= 0", b)
				}
			}
			if slow != 0 && !(slow >= 1) {
				return fmt.Errorf("--slow %v: expected a factor >= 1 (0 = off)", slow)
			}
			if len(names) == 0 || len(workers) == 0 || len(backups) == 0 {
				return fmt.Errorf("--delays, --workers and --backups: expected at least one value each (got %d, %d and %d)", len(names), len(workers), len(backups))
			}
			for _, err := range []error{listOnce("--delays", names), listOnce("--workers", workers), listOnce("--backups", backups)} {
				if err != nil {
					return err
				}
			}
			if slices.Min(backups) >= slices.Max(workers) {
				return fmt.Errorf("--backups %v with --workers %v: no case to simulate, expected a number of backups below a number of workers", backups, workers)
			}
			var rows []stragglerRow
			for _, name := range names {
				d, err := straggler.New(name, p)
				if err != nil {
					return fmt.Errorf("--delays %s: %w", name, err)
				}
				for _, b := range backups {
					for _, k := range workers {
						if b >= k {
							continue
						}
						sim, err := straggler.Simulate(d, k, b, trials, seed)
						if err != nil {
							return err
						}
						row := stragglerRow{delay: name, workers: k, backups: b, sim: sim, exact: straggler.OrderStat(d, k-b, k), how: "integral"}
						switch {
						case name == "exp" || name == "shifted-exp":
							row.exact, row.how = straggler.ExpOrderStat(p.Mean, shiftOf(name, p), k-b, k), "mean (H_K - H_b)"
						case name == "pareto" && b == 0:
							row.exact, row.how = straggler.ParetoMax(p.Scale, p.Shape, k), "Gamma formula"
						case name == "none":
							row.exact, row.how = 0, "exact"
						}
						if name == "gauss" && b == 0 {
							row.asymptote = p.Mean + p.Sigma*math.Sqrt(2*math.Log(float64(k)))
						}
						rows = append(rows, row)
					}
				}
			}
			if slow > 0 && len(names) > 0 {
				d, _ := straggler.New(names[0], p)
				for _, k := range workers {
					sim, err := straggler.SimulateSlow(d, k, slow, trials, seed)
					if err != nil {
						return err
					}
					rows = append(rows, stragglerRow{delay: fmt.Sprintf("%s, worker 0 x%g", names[0], slow), workers: k, sim: sim,
						exact: straggler.SlowWorker(d, k, slow), how: "integral", slow: true})
				}
			}
			res := stragglerResult{rows: rows, delays: names, params: p, trials: trials, seed: seed}
			if err := res.write(out); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.table())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&names, "delays", []string{"exp", "shifted-exp", "gauss", "pareto"}, "delay distributions ("+strings.Join(straggler.Names(), ", ")+")")
	f.IntSliceVar(&workers, "workers", []int{2, 4, 8, 16, 32, 64}, "numbers of workers K (1 to 1048576)")
	f.IntSliceVar(&backups, "backups", []int{0, 1, 2}, "numbers of backup workers b (cases with b >= K are skipped)")
	f.IntVar(&trials, "trials", 20000, "simulated steps per case")
	f.Uint64Var(&seed, "seed", 1, "seed of the simulation's streams")
	f.Float64Var(&slow, "slow", 2, "a fixed slow worker's factor under the first delay (0 = no such rows)")
	f.Float64Var(&p.Mean, "mean", 0.1, "exp, shifted-exp: mean of the exponential part; gauss: mean")
	f.Float64Var(&p.Shift, "shift", 0.05, "shifted-exp: shift")
	f.Float64Var(&p.Sigma, "sigma", 0.1, "gauss: standard deviation")
	f.Float64Var(&p.Scale, "scale", 0.05, "pareto: scale x_m")
	f.Float64Var(&p.Shape, "shape", 3, "pareto: shape a (> 1)")
	f.StringVar(&out, "out", "experiments/results/stragglers", "output directory")
	return cmd
}

// maxStragglerWorkers bounds --workers: 2^20 workers make a step of 8 MiB of
// draws (a trillion would not fit in memory).
const maxStragglerWorkers = 1 << 20

func shiftOf(name string, p straggler.Params) float64 {
	if name == "shifted-exp" {
		return p.Shift
	}
	return 0
}

type stragglerRow struct {
	delay            string
	workers, backups int
	sim              straggler.Simulation
	exact, asymptote float64
	how              string
	slow             bool
}

type stragglerResult struct {
	rows   []stragglerRow
	delays []string
	params straggler.Params
	trials int
	seed   uint64
}

func (r *stragglerResult) table() string {
	var b strings.Builder
	p := r.params
	var delays []string
	for _, name := range r.delays {
		switch name {
		case "none":
			delays = append(delays, "none (X = 0)")
		case "exp":
			delays = append(delays, fmt.Sprintf("exp mean %g", p.Mean))
		case "shifted-exp":
			delays = append(delays, fmt.Sprintf("shifted-exp shift %g + exp mean %g", p.Shift, p.Mean))
		case "gauss":
			delays = append(delays, fmt.Sprintf("gauss mean %g sigma %g (clipped at -1)", p.Mean, p.Sigma))
		case "pareto":
			delays = append(delays, fmt.Sprintf("pareto x_m %g, a %g", p.Scale, p.Shape))
		default:
			delays = append(delays, name)
		}
	}
	fmt.Fprintf(&b, "# Step time of synchronous workers with random delays\n\nA worker's step takes C(1 + X); a step waits for the slowest worker, or the (K-b)-th with b backups. Extra time E[X_(K-b:K)] in units of C: simulated (%d steps a case, seed %d; mean ± standard error) against the closed form or the integral of the order statistic. Delays: %s.\n\n",
		r.trials, r.seed, strings.Join(delays, "; "))
	b.WriteString("| delay | K | b | simulated | closed form | how | relative difference | within 4 SE | sigma sqrt(2 ln K) |\n|---|--:|--:|--:|--:|---|--:|---|--:|\n")
	for _, row := range r.rows {
		rel := ""
		if row.exact != 0 {
			rel = fmt.Sprintf("%+.2f%%", 100*(row.sim.Mean-row.exact)/row.exact)
		}
		ok := "yes"
		if math.Abs(row.sim.Mean-row.exact) > 4*row.sim.StdErr+1e-12 {
			ok = "no"
		}
		asym := ""
		if row.asymptote != 0 {
			asym = fmt.Sprintf("%.4f", row.asymptote)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.4f ± %.4f | %.4f | %s | %s | %s | %s |\n", row.delay, row.workers, row.backups, row.sim.Mean, row.sim.StdErr, row.exact, row.how, rel, ok, asym)
	}
	b.WriteString("\nThe Gaussian's sqrt(2 ln K) is the large-K asymptote (mean + sigma sqrt(2 ln K)): it overestimates at small K. Rows 'worker 0 xF': one worker F times slower, E[max(F(1+X_0), max_i (1+X_i))] - 1.\n")
	return b.String()
}

func (r *stragglerResult) write(dir string) error {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	rows := [][]string{{"delay", "workers", "backups", "simulated", "stderr", "closed_form", "how", "gauss_asymptote"}}
	for _, row := range r.rows {
		rows = append(rows, []string{row.delay, strconv.Itoa(row.workers), strconv.Itoa(row.backups), f(row.sim.Mean), f(row.sim.StdErr), f(row.exact), row.how, f(row.asymptote)})
	}
	return writeOutputs(dir, "stragglers", rows, r.table(), r.plot)
}

// plot draws the expected step time 1 + E[X_(K-b:K)] against K for the
// fewest backups b run (the slow-worker rows, which have none, with b = 0).
func (r *stragglerResult) plot(dir string) error {
	fewest := math.MaxInt
	for _, row := range r.rows {
		if !row.slow {
			fewest = min(fewest, row.backups)
		}
	}
	pl := plot.New()
	pl.Title.Text = "expected synchronous step time against workers (no backups)"
	if fewest > 0 {
		pl.Title.Text = fmt.Sprintf("expected synchronous step time against workers (%d backup%s)", fewest, map[bool]string{true: "", false: "s"}[fewest == 1])
	}
	pl.X.Label.Text = "workers K (log2 scale)"
	pl.Y.Label.Text = "step time / compute time C"
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	colours := plotColours
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}}
	var order []string
	series := map[string][]stragglerRow{}
	for _, row := range r.rows {
		if row.backups != fewest { // slow-worker rows have b = 0
			continue
		}
		if _, ok := series[row.delay]; !ok {
			order = append(order, row.delay)
		}
		series[row.delay] = append(series[row.delay], row)
	}
	for i, name := range order {
		rows := series[name]
		pts := make(plotter.XYs, len(rows))
		line := make(plotter.XYs, len(rows))
		errs := make(plotter.YErrors, len(rows))
		for j, row := range rows {
			pts[j] = plotter.XY{X: float64(row.workers), Y: 1 + row.sim.Mean}
			line[j] = plotter.XY{X: float64(row.workers), Y: 1 + row.exact}
			errs[j].Low, errs[j].High = 2*row.sim.StdErr, 2*row.sim.StdErr
		}
		c := colours[i%len(colours)]
		l, err := plotter.NewLine(line)
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.2)}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: shapes[i%len(shapes)]}
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{pts, errs})
		if err != nil {
			return err
		}
		eb.LineStyle.Color = c
		pl.Add(l, s, eb)
		pl.Legend.Add(name+": simulated (±2 SE) and closed form", l, s)
	}
	// Room above the data for the legend.
	pl.Y.Max += 0.35 * (pl.Y.Max - pl.Y.Min)
	log2Axis(&pl.X)
	pl.Y.Tick.Marker = sweep.NiceTicks{}
	return savePlot(pl, dir, "stragglers")
}
