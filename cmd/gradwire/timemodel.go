package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/internal/bench"
	"github.com/gradwire/gradwire/internal/sweep"
	"github.com/gradwire/gradwire/internal/train"
	"github.com/gradwire/gradwire/internal/version"
)

func newTimeModelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "timemodel",
		Short: "Fit and use the cluster time model (alpha-beta costs of the collectives)",
		Long: `The time model predicts a training step's wall time on N machines from the
compute time of one worker's step and the bytes of each collective, in the
alpha-beta model: a call costs alphas*alpha + bytes*beta for the algorithm set
by network.topology (` + strings.Join(dist.AlgorithmNames(), ", ") + `).

  fit      measure all-reduce times over message sizes on this machine (under
           mpirun, or in-process with --local N) and fit alpha and beta
  predict  a finished run's step time and speed-up on clusters of other sizes,
           bandwidths, latencies, algorithms and pipeline widths
  layerpar layer-parallel training's round time and speed-up over serial
           training for K stages of a CIFAR ResNet`,
	}
	cmd.AddCommand(newTimeModelFitCmd(), newTimeModelPredictCmd(), newTimeModelLayerParCmd())
	return cmd
}

// defaultFitSizes are log-spaced from 1 KB to 100 MB.
const defaultFitSizes = "1KB,4KB,16KB,64KB,256KB,1MB,4MB,16MB,64MB,100MB"

func newTimeModelFitCmd() *cobra.Command {
	var (
		sizesFlag string
		reps      int
		local     int
		algorithm string
		splits    string
		out       string
	)
	cmd := &cobra.Command{
		Use:   "fit [--sizes LIST] [--reps N] [--local N] [--algorithm NAME] [--split SIZE] [--out DIR]",
		Short: "Measure all-reduce times from 1 KB to 100 MB and fit the time model's alpha and beta",
		Long: `Time float32 sum all-reduces of each size in --sizes: one untimed call per
size, then --reps calls, each after a barrier, each taking the slowest member's
time. Run it under mpirun with a gradwire built with -tags mpi, e.g.

  mpirun -np 2 gradwire timemodel fit

to measure MPI_Allreduce (pin OpenMPI's algorithm with --mca
coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 for the
ring), or with --local N to measure the in-process group of N members.

The fit is T(S) = a + b*S by least squares on the relative error (each point
weighted by 1/T, a and b >= 0: ordinary least squares is decided by the largest
sizes and gives a meaningless intercept), over the best times of all sizes,
and of each regime between the sizes in --split (one line rarely fits both
messages that stay in the caches and those that do not). alpha and beta are read off
a and b for --algorithm on the measured number of members (ring on N: a =
2(N-1)*alpha, b = 2(N-1)/N*beta). Rank 0 writes to --out: table.md (the
measured times, each fit with its RMS and largest relative error), fit.csv
(size, best and median seconds, the fits' predictions) and fit.png/.svg
(log-log: measured best and median times and the fitted lines).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := parseSizes(sizesFlag)
			if err != nil {
				return fmt.Errorf("--sizes %q: %w", sizesFlag, err)
			}
			var splitBytes []int64
			if splits != "" {
				if splitBytes, err = parseSizes(splits); err != nil || !slices.IsSorted(splitBytes) {
					return fmt.Errorf("--split %q: expected increasing sizes, e.g. 64KB,16MB", splits)
				}
			}
			if reps < 1 {
				return fmt.Errorf("--reps %d: expected >= 1", reps)
			}
			if _, ok := dist.Algorithms[algorithm]; !ok {
				return fmt.Errorf("--algorithm %q: expected one of %s", algorithm, strings.Join(dist.AlgorithmNames(), ", "))
			}
			timings, members, transport, err := measureAllReduces(sizes, reps, local)
			if err != nil || timings == nil {
				return err // nil timings: not rank 0
			}
			res, err := fitAllReduces(timings, members, algorithm, splitBytes)
			if err != nil {
				return err
			}
			res.transport, res.reps = transport, reps
			if err := res.write(out); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.table())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizesFlag, "sizes", defaultFitSizes, "message sizes, comma-separated (B, KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024)")
	f.IntVar(&reps, "reps", 20, "timed all-reduces per size")
	f.IntVar(&local, "local", 0, "measure an in-process group of this many members instead of MPI (0: MPI, under mpirun)")
	f.StringVar(&algorithm, "algorithm", dist.TopologyRing, "all-reduce algorithm whose alpha and beta the fits are read as ("+strings.Join(dist.AlgorithmNames(), ", ")+")")
	f.StringVar(&splits, "split", "64KB,16MB", "sizes that bound the regimes fitted apart, comma-separated (each regime takes the sizes above the previous bound up to its own); empty: one fit")
	f.StringVar(&out, "out", "experiments/results/timemodel-fit", "output directory (rank 0)")
	return cmd
}

// parseSizes reads a comma-separated list of byte sizes with units.
func parseSizes(s string) ([]int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	var out []int64
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		mult, num := 1.0, field
		for _, u := range units {
			if strings.HasSuffix(field, u.suffix) {
				mult, num = u.mult, strings.TrimSuffix(field, u.suffix)
				break
			}
		}
		x, err := strconv.ParseFloat(num, 64)
		if err != nil || !(x*mult >= 4) || x*mult > 1<<40 {
			return nil, fmt.Errorf("size %q: expected a number of bytes >= 4 with an optional unit (B, KB, MB, GB, KiB, MiB, GiB)", field)
		}
		if i := slices.Index(out, int64(x*mult)); i >= 0 {
			return nil, fmt.Errorf("size %q is %s again: expected each size once", field, humanBytes(out[i]))
		}
		out = append(out, int64(x*mult))
	}
	return out, nil
}

// measureAllReduces times the sizes on MPI_COMM_WORLD (local 0) or on an
// in-process group of local members. Ranks other than 0 get nil timings.
func measureAllReduces(sizes []int64, reps, local int) (timings []bench.AllReduceTiming, members int, transport string, err error) {
	if local > 0 {
		group, err := dist.NewLocal(local)
		if err != nil {
			return nil, 0, "", err
		}
		res := make([][]bench.AllReduceTiming, local)
		errs := make([]error, local)
		var wg sync.WaitGroup
		for i, m := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = bench.MeasureAllReduce(m, sizes, reps)
			}()
		}
		wg.Wait()
		return res[0], local, fmt.Sprintf("in-process group of %d members (shared memory, each member sums its share)", local), errors.Join(errs...)
	}
	launch, err := dist.DetectLaunch(os.Getenv)
	if err != nil {
		return nil, 0, "", err
	}
	if launch.From == "" {
		return nil, 0, "", errors.New("not started by mpirun: run it as `mpirun -np N gradwire timemodel fit` (a gradwire built with -tags mpi), or give --local N to time the in-process group")
	}
	world, err := dist.NewMPI()
	if err != nil {
		return nil, 0, "", err
	}
	defer world.Close()
	t, err := bench.MeasureAllReduce(world, sizes, reps)
	if err != nil || world.Rank() != 0 {
		return nil, 0, "", err
	}
	return t, world.Size(), fmt.Sprintf("MPI_Allreduce over %d processes", world.Size()), nil
}

// fitResult is a measurement and its fits: over all sizes (index 0), then one
// per regime between the split sizes.
type fitResult struct {
	timings    []bench.AllReduceTiming
	members    int
	algorithm  string
	bounds     []int64 // regime k > 0 takes sizes in (bounds[k-1], bounds[k]]
	transport  string
	reps       int
	fits       []bench.LinearFit
	have       []bool // false: fewer than two sizes in the regime
	alpha      []float64
	beta       []float64
	fitNames   []string
	machine    string
	measuredAt time.Time
}

func fitAllReduces(timings []bench.AllReduceTiming, members int, algorithm string, splits []int64) (*fitResult, error) {
	r := &fitResult{timings: timings, members: members, algorithm: algorithm,
		machine: version.Machine(), measuredAt: time.Now().UTC()}
	r.bounds = append([]int64{-1}, splits...)
	r.bounds = append(r.bounds, math.MaxInt64)
	r.fitNames = []string{"all sizes"}
	for k := 1; k < len(r.bounds); k++ {
		lo, hi := r.bounds[k-1], r.bounds[k]
		switch {
		case lo < 0 && hi == math.MaxInt64:
			r.fitNames = append(r.fitNames, "all sizes")
		case lo < 0:
			r.fitNames = append(r.fitNames, "<= "+humanBytes(hi))
		case hi == math.MaxInt64:
			r.fitNames = append(r.fitNames, "> "+humanBytes(lo))
		default:
			r.fitNames = append(r.fitNames, humanBytes(lo)+" < S <= "+humanBytes(hi))
		}
	}
	n := len(r.fitNames)
	r.fits, r.have, r.alpha, r.beta = make([]bench.LinearFit, n), make([]bool, n), make([]float64, n), make([]float64, n)
	for k := range r.fits {
		var S, T []float64
		for _, t := range timings {
			if k == 0 || r.regime(t.Bytes) == k {
				S, T = append(S, float64(t.Bytes)), append(T, t.Best)
			}
		}
		if len(S) < 2 {
			continue
		}
		f, err := bench.FitRelative(S, T)
		if err != nil {
			return nil, fmt.Errorf("fit over %s: %w", r.fitNames[k], err)
		}
		r.fits[k], r.have[k] = f, true
		if members >= 2 {
			if r.alpha[k], r.beta[k], err = bench.AlphaBeta(f, algorithm, members); err != nil {
				return nil, err
			}
		}
	}
	if !r.have[0] {
		return nil, errors.New("the fit needs at least two sizes")
	}
	return r, nil
}

// humanBytes writes 1000-based sizes as the defaults spell them.
func humanBytes(b int64) string {
	switch {
	case b >= 1e9 && b%1e9 == 0:
		return fmt.Sprintf("%dGB", b/1e9)
	case b >= 1e6 && b%1e6 == 0:
		return fmt.Sprintf("%dMB", b/1e6)
	case b >= 1e3 && b%1e3 == 0:
		return fmt.Sprintf("%dKB", b/1e3)
	}
	return fmt.Sprintf("%dB", b)
}

// regime is the index (>= 1) of the regime that holds size b.
func (r *fitResult) regime(b int64) int {
	for k := 1; k < len(r.bounds); k++ {
		if b <= r.bounds[k] {
			return k
		}
	}
	return len(r.bounds) - 1
}

func (r *fitResult) predict(k int, bytes int64) float64 {
	return r.fits[k].Intercept + r.fits[k].Slope*float64(bytes)
}

func (r *fitResult) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# All-reduce times and the time model's fit\n\n%s; %s; float32 sum; %d timed calls per size after one untimed; %s UTC\n\n",
		r.machine, r.transport, r.reps, r.measuredAt.Format("2006-01-02 15:04"))
	b.WriteString("| size | best (us) | median (us) | effective GB/s (best) | fit, all sizes (us) | error | fit by regime (us) | error |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, t := range r.timings {
		regime := r.regime(t.Bytes)
		all := r.predict(0, t.Bytes)
		cell, errCell := "", ""
		if r.have[regime] {
			p := r.predict(regime, t.Bytes)
			cell, errCell = fmt.Sprintf("%.1f", p*1e6), fmt.Sprintf("%+.0f%%", 100*(p-t.Best)/t.Best)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f | %.1f | %+.0f%% | %s | %s |\n", humanBytes(t.Bytes), t.Best*1e6, t.Median*1e6,
			float64(t.Bytes)/t.Best/1e9, all*1e6, 100*(all-t.Best)/t.Best, cell, errCell)
	}
	fmt.Fprintf(&b, "\n| fit | points | a (us) | 1/b (GB/s) | alpha (us), %s on %d | 1/beta (GB/s) | RMS relative error | largest relative error |\n|---|--:|--:|--:|--:|--:|--:|--:|\n", r.algorithm, r.members)
	for k, f := range r.fits {
		// Without --split the one regime is the whole range: its fit is the
		// first row's.
		if !r.have[k] || k == 1 && len(r.fits) == 2 {
			continue
		}
		inv := func(x float64) string {
			if x <= 0 {
				return "inf"
			}
			return fmt.Sprintf("%.3g", 1/x/1e9)
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %s | %.2f | %s | %.1f%% | %.1f%% |\n", r.fitNames[k], f.Points, f.Intercept*1e6, inv(f.Slope),
			r.alpha[k]*1e6, inv(r.beta[k]), 100*f.RMSRelError, 100*f.MaxRelError)
	}
	b.WriteString("\nFits: T(S) = a + b*S by least squares on the relative error over the best times, a, b >= 0. " +
		"alpha and beta: a and b read as the algorithm's latency and bandwidth terms (dist.Algorithms). " +
		"Errors: (fit - measured best) / measured best.\n")
	return b.String()
}

func (r *fitResult) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var c bytes.Buffer
	w := csv.NewWriter(&c)
	header := []string{"bytes", "best_seconds", "median_seconds", "fit_all_seconds"}
	for k := 1; k < len(r.fits); k++ {
		header = append(header, fmt.Sprintf("fit_regime%d_seconds", k))
	}
	w.Write(header)
	for _, t := range r.timings {
		row := []string{strconv.FormatInt(t.Bytes, 10), strconv.FormatFloat(t.Best, 'g', -1, 64), strconv.FormatFloat(t.Median, 'g', -1, 64)}
		for k := range r.fits {
			cell := ""
			if r.have[k] {
				cell = strconv.FormatFloat(r.predict(k, t.Bytes), 'g', -1, 64)
			}
			row = append(row, cell)
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "fit.csv"), c.Bytes()); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "table.md"), []byte(r.table())); err != nil {
		return err
	}
	return r.plot(dir)
}

// plot draws measured times and the fits on log-log axes, as PNG and SVG.
func (r *fitResult) plot(dir string) error {
	p := plot.New()
	p.Title.Text = "all-reduce time against message size: " + r.transport
	p.X.Label.Text = "message size (bytes, log scale)"
	p.Y.Label.Text = "time (seconds, log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	colours := plotColours
	points := func(name string, y func(bench.AllReduceTiming) float64, c color.Color, shape draw.GlyphDrawer) error {
		xy := make(plotter.XYs, len(r.timings))
		for i, t := range r.timings {
			xy[i] = plotter.XY{X: float64(t.Bytes), Y: y(t)}
		}
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: shape}
		p.Add(s)
		p.Legend.Add(name, s)
		return nil
	}
	if err := points("measured, best", func(t bench.AllReduceTiming) float64 { return t.Best }, colours[0], draw.CircleGlyph{}); err != nil {
		return err
	}
	if err := points("measured, median", func(t bench.AllReduceTiming) float64 { return t.Median }, colours[1], draw.PlusGlyph{}); err != nil {
		return err
	}
	lo, hi := float64(r.timings[0].Bytes), float64(r.timings[len(r.timings)-1].Bytes)
	for k := range r.fits {
		if !r.have[k] {
			continue
		}
		from, to := lo, hi
		if k > 0 {
			from, to = math.Max(lo, float64(r.bounds[k-1])), math.Min(hi, float64(r.bounds[k]))
		}
		var xy plotter.XYs
		for x := from; x <= to*1.0001; x *= math.Pow(to/from, 1.0/40) {
			xy = append(xy, plotter.XY{X: x, Y: r.fits[k].Intercept + r.fits[k].Slope*x})
			if to == from {
				break
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: colours[(2+k)%len(colours)], Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(float64(2 * k)), vg.Points(float64(2 * k))}}
		if k == 0 {
			l.LineStyle.Dashes = nil
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("fit, %s: a %.2f us, 1/b %.2f GB/s", r.fitNames[k], r.fits[k].Intercept*1e6, 1/r.fits[k].Slope/1e9), l)
	}
	return savePlot(p, dir, "fit")
}

// writeOutputs writes a command's results into dir, each file via a
// temporary file and a rename: rows as name.csv, table as table.md, then the
// plot (which writes its own PNG and SVG).
func writeOutputs(dir, name string, rows [][]string, table string, plot func(dir string) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var c bytes.Buffer
	w := csv.NewWriter(&c)
	if err := w.WriteAll(rows); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, name+".csv"), c.Bytes()); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "table.md"), []byte(table)); err != nil {
		return err
	}
	return plot(dir)
}

// plotColours are the series colours of the commands' plots (matplotlib's
// first six, as the sweep reports use).
var plotColours = []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255}}

// savePlot writes p as dir/name.png and dir/name.svg (9 x 6 inches).
func savePlot(p *plot.Plot, dir, name string) error {
	for _, ext := range []string{"png", "svg"} {
		wt, err := p.WriterTo(9*vg.Inch, 6*vg.Inch, ext)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, name+"."+ext), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func newTimeModelPredictCmd() *cobra.Command {
	var (
		runDir     string
		workers    []int
		gbps       []float64
		latencies  []float64
		algorithms []string
		widths     []int
		out        string
	)
	cmd := &cobra.Command{
		Use:   "predict --run DIR [--workers LIST] [--gbps LIST] [--latency-us LIST] [--algorithms LIST] [--pipeline LIST] [--out DIR]",
		Short: "Predict step time and speed-up of a finished run on clusters of other sizes, bandwidths, latencies and algorithms",
		Long: `Read a finished run's summary.json (a run of at least 2 workers: its
time_model holds the measured compute time of one worker's step and the steady
step's collective calls with their bytes) and predict, for every combination of
--workers N, --gbps, --latency-us, --algorithms and --pipeline width, one step's
communication time (the calls' alpha-beta costs on the algorithm, one after
the other), its wall time (compute + communication, or their maximum for
width 2) and the speed-up over one machine processing the same global batch
(N x compute / step time). Compression sizes are those the run measured; an
all-gather's per-worker payload and an all-reduce's buffer stay as they were
at the run's N.

Writes to --out (default: DIR/timemodel): predict.csv (every combination),
table.md (per algorithm and latency: step time in ms and speed-up for each N
and bandwidth, width 1 and 2) and predict.png/.svg (speed-up against N, log2
axis, one line per bandwidth and width, for the first algorithm and latency,
with the ideal N for reference).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runDir == "" {
				return errors.New("--run: give the run directory whose summary.json to read")
			}
			path := filepath.Join(runDir, "summary.json")
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("--run %s: no summary.json there: expected the directory of a finished run (gradwire train --out, or a sweep's runs/<variation>/seed-<k>)", runDir)
			}
			sum, err := train.ReadSummary(path)
			if err != nil {
				return err
			}
			tm := sum.TimeModel
			if tm == nil || tm.ComputeSecondsPerStep <= 0 {
				return fmt.Errorf("%s: no time_model (a run of one worker, or one that took no step): nothing to predict from", path)
			}
			if len(tm.AllReduceBytes)+len(tm.AllGatherBytes) == 0 && tm.BytesPerWorkerStep > 0 {
				return fmt.Errorf("%s: time_model lists no collective calls (written by an older gradwire): rerun the run to predict from it", path)
			}
			for _, n := range workers {
				if n < 1 {
					return fmt.Errorf("--workers %d: expected >= 1", n)
				}
			}
			for _, g := range gbps {
				if !(g > 0) || math.IsInf(g, 1) {
					return fmt.Errorf("--gbps %v: expected a finite bandwidth > 0", g)
				}
			}
			for _, l := range latencies {
				if !(l >= 0) || math.IsInf(l, 1) {
					return fmt.Errorf("--latency-us %v: expected a finite latency >= 0", l)
				}
			}
			for _, a := range algorithms {
				if _, ok := dist.Algorithms[a]; !ok {
					return fmt.Errorf("--algorithms %q: expected one of %s", a, strings.Join(dist.AlgorithmNames(), ", "))
				}
			}
			for _, w := range widths {
				if w != 1 && w != 2 {
					return fmt.Errorf("--pipeline %d: expected 1 or 2", w)
				}
			}
			for _, err := range []error{listOnce("--workers", workers), listOnce("--gbps", gbps), listOnce("--latency-us", latencies),
				listOnce("--algorithms", algorithms), listOnce("--pipeline", widths)} {
				if err != nil {
					return err
				}
			}
			if out == "" {
				out = filepath.Join(runDir, "timemodel")
			}
			traffic := dist.StepTraffic{AllReduceBytes: tm.AllReduceBytes, AllGatherBytes: tm.AllGatherBytes}
			var rows []predictRow
			for _, a := range algorithms {
				for _, l := range latencies {
					for _, g := range gbps {
						for _, w := range widths {
							for _, n := range workers {
								net := dist.Network{BandwidthGbps: g, LatencyUs: l, Topology: a}
								rows = append(rows, predictRow{a, l, g, w, net.Predict(tm.ComputeSecondsPerStep, traffic, n, w == 2)})
							}
						}
					}
				}
			}
			p := &prediction{run: runDir, sum: sum, rows: rows, workers: workers, gbps: gbps, latencies: latencies, algorithms: algorithms, widths: widths}
			if err := p.write(out); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), p.table())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runDir, "run", "", "run directory (its summary.json)")
	f.IntSliceVar(&workers, "workers", []int{2, 4, 8, 16, 32, 64}, "cluster sizes N")
	f.Float64SliceVar(&gbps, "gbps", []float64{1, 10, 100}, "link bandwidths in Gbit/s")
	f.Float64SliceVar(&latencies, "latency-us", []float64{50}, "per-message latencies in microseconds")
	f.StringSliceVar(&algorithms, "algorithms", []string{dist.TopologyRing}, "collective algorithms ("+strings.Join(dist.AlgorithmNames(), ", ")+")")
	f.IntSliceVar(&widths, "pipeline", []int{1, 2}, "pipeline widths (1, 2)")
	f.StringVar(&out, "out", "", "output directory (default: the run's timemodel/)")
	return cmd
}

type predictRow struct {
	algorithm string
	latency   float64
	gbps      float64
	width     int
	p         dist.Prediction
}

type prediction struct {
	run        string
	sum        *train.Summary
	rows       []predictRow
	workers    []int
	gbps       []float64
	latencies  []float64
	algorithms []string
	widths     []int
}

func (p *prediction) find(a string, l, g float64, w, n int) dist.Prediction {
	for _, r := range p.rows {
		if r.algorithm == a && r.latency == l && r.gbps == g && r.width == w && r.p.Workers == n {
			return r.p
		}
	}
	return dist.Prediction{}
}

func (p *prediction) table() string {
	var b strings.Builder
	tm := p.sum.TimeModel
	fmt.Fprintf(&b, "# Predicted step time and speed-up\n\nRun %s: %s, %s, %d workers measured, compute %.3f ms per worker step, %d all-reduce and %d all-gather calls a steady step (%d bytes sent per worker).\n",
		p.run, p.sum.Model, p.sum.Compressor, p.sum.Workers, tm.ComputeSecondsPerStep*1e3, len(tm.AllReduceBytes), len(tm.AllGatherBytes), tm.BytesPerWorkerStep)
	for _, a := range p.algorithms {
		for _, l := range p.latencies {
			fmt.Fprintf(&b, "\n## %s, latency %g us\n\nStep time (ms) / speed-up over one machine.\n\n| N |", a, l)
			for _, g := range p.gbps {
				for _, w := range p.widths {
					fmt.Fprintf(&b, " %g Gbit/s, width %d |", g, w)
				}
			}
			b.WriteString("\n|--:|" + strings.Repeat("--:|", len(p.gbps)*len(p.widths)) + "\n")
			for _, n := range p.workers {
				fmt.Fprintf(&b, "| %d |", n)
				for _, g := range p.gbps {
					for _, w := range p.widths {
						r := p.find(a, l, g, w, n)
						fmt.Fprintf(&b, " %.2f / %.2fx |", r.StepSeconds*1e3, r.SpeedUp)
					}
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\nThe alpha-beta model of each algorithm (dist.Algorithms) over the run's measured calls; width 2 overlaps a step's communication with the next step's compute (max instead of sum). Speed-up: N x compute / step time.\n")
	return b.String()
}

func (p *prediction) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var c bytes.Buffer
	w := csv.NewWriter(&c)
	w.Write([]string{"algorithm", "latency_us", "gbps", "pipeline", "workers", "compute_seconds", "comm_seconds", "step_seconds", "speedup"})
	for _, r := range p.rows {
		f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
		w.Write([]string{r.algorithm, f(r.latency), f(r.gbps), strconv.Itoa(r.width), strconv.Itoa(r.p.Workers), f(r.p.ComputeSeconds), f(r.p.CommSeconds), f(r.p.StepSeconds), f(r.p.SpeedUp)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "predict.csv"), c.Bytes()); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "table.md"), []byte(p.table())); err != nil {
		return err
	}
	return p.plot(dir)
}

func (p *prediction) plot(dir string) error {
	a, l := p.algorithms[0], p.latencies[0]
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("%s (%s, %s): predicted speed-up, %s, latency %g us", p.sum.Model, p.sum.Compressor, p.run, a, l)
	pl.X.Label.Text = "machines N (log2 scale)"
	pl.Y.Label.Text = "speed-up over one machine"
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	colours := plotColours
	ideal := make(plotter.XYs, len(p.workers))
	for i, n := range p.workers {
		ideal[i] = plotter.XY{X: float64(n), Y: float64(n)}
	}
	li, err := plotter.NewLine(ideal)
	if err != nil {
		return err
	}
	li.LineStyle = draw.LineStyle{Color: color.Gray{Y: 150}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(3)}}
	pl.Add(li)
	pl.Legend.Add("ideal (N)", li)
	for gi, g := range p.gbps {
		for _, w := range p.widths {
			xy := make(plotter.XYs, len(p.workers))
			for i, n := range p.workers {
				xy[i] = plotter.XY{X: float64(n), Y: p.find(a, l, g, w, n).SpeedUp}
			}
			line, points, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			c := colours[gi%len(colours)]
			line.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5)}
			points.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
			if w == 2 {
				line.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				points.GlyphStyle.Shape = draw.TriangleGlyph{}
			}
			pl.Add(line, points)
			pl.Legend.Add(fmt.Sprintf("%g Gbit/s, width %d", g, w), line, points)
		}
	}
	log2Axis(&pl.X)
	pl.Y.Tick.Marker = sweep.NiceTicks{}
	return savePlot(pl, dir, "predict")
}

// log2Scale and log2Ticks draw an axis of powers of two; log2Axis sets both.
type log2Scale struct{}

// log2Axis makes a an axis of powers of two, called once the data are added:
// one value alone gets an octave either side, where gonum/plot would widen
// it to value ± 1, which reaches 0 from 1.
func log2Axis(a *plot.Axis) {
	a.Scale, a.Tick.Marker = log2Scale{}, log2Ticks{}
	if a.Min == a.Max && a.Min > 0 {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

func (log2Scale) Normalize(min, max, x float64) float64 {
	return (math.Log2(x) - math.Log2(min)) / (math.Log2(max) - math.Log2(min))
}

type log2Ticks struct{}

func (log2Ticks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) || math.IsInf(max, 1) {
		return nil // no powers of two to mark (and doubling from 0 never ends)
	}
	var t []plot.Tick
	for v := math.Exp2(math.Floor(math.Log2(min))); v <= max*1.0001; v *= 2 {
		if v >= min/1.0001 {
			t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return t
}
