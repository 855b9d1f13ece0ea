package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/dist/coded"
)

func newCodedCmd() *cobra.Command {
	var (
		models   []string
		schemes  []string
		dropouts []float64
		classes  []int
		cfg      coded.Config
		dataDir  string
		out      string
	)
	cmd := &cobra.Command{
		Use:   "coded [--model LIST] [--schemes LIST] [--dropout LIST] [--devices N] [--steps N] [--out DIR]",
		Short: "Train linear models on devices that drop out, with uncoded, replicated, MDS- and RLNC-coded data",
		Long: `Logistic regression and a linear SVM on two Fashion-MNIST classes (--classes,
default 0 T-shirt/top against 6 shirt, the hardest pair for a linear model;
pixels in [0, 1] and a bias feature), trained by full-batch gradient descent
whose two matrix-vector products (z = X w over row blocks of X, X^T r over
feature blocks) are computed by --devices devices that each drop out of a
round with probability --dropout. Schemes (k source blocks):

  uncoded      k = n, one block per device: any absence stalls the step
  replication  k = n/2, every block on two devices
  mds          k = 2n/3, device i stores sum_j G_ij B_j, G Gaussian: any k decode
  rlnc         k = 2n/3, each device combines a random ceil((k+1)/2) of the
               blocks with Gaussian coefficients: decode by least squares once
               the answering rows reach rank k (condition number <= 1e8)

A round whose answers cannot be decoded is repeated (the step waits). Reported
per model, scheme and drop-out rate: the encoding traffic that builds the
coded blocks (devices exchanging source blocks, each block starting on its own
device; and through a central encoder), the bytes a step moves (w and r down,
results up, float64, failed rounds included), rounds and stalled rounds,
the final training loss, training and test accuracy. Writes table.md,
coded.csv and coded.png/.svg (test accuracy and stalled rounds per step
against the drop-out rate) to --out. Data from --data-dir, data.dir's
default: $GRADWIRE_DATA, then /usr/share/datasets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, m := range models {
				if m != "logreg" && m != "svm" {
					return fmt.Errorf("--model %q: expected logreg or svm", m)
				}
			}
			for _, s := range schemes {
				if _, ok := coded.Codes[s]; !ok {
					return fmt.Errorf("--schemes %q: expected one of %s", s, strings.Join(coded.Names(), ", "))
				}
			}
			for _, p := range dropouts {
				if !(p >= 0 && p < 1) {
					return fmt.Errorf("--dropout %v: expected a probability in [0, 1)", p)
				}
			}
			if len(classes) != 2 {
				return fmt.Errorf("--classes %v: expected two classes, e.g. 0,6", classes)
			}
			if cfg.Devices < 2 || cfg.Devices%2 != 0 {
				return fmt.Errorf("--devices %d: expected an even number >= 2 (replication pairs them)", cfg.Devices)
			}
			if cfg.Steps < 1 || !(cfg.LR > 0) || !(cfg.Lambda >= 0) {
				return fmt.Errorf("--steps %d, --lr %v, --lambda %v: expected steps >= 1, lr > 0, lambda >= 0", cfg.Steps, cfg.LR, cfg.Lambda)
			}
			train, test, err := data.OpenTrainTest(data.Options{Name: "fashion-mnist", Dir: dataDir})
			if err != nil {
				return err
			}
			p, err := coded.Pair(train, test, classes[0], classes[1])
			if err != nil {
				return fmt.Errorf("--classes %v: %w", classes, err)
			}
			var rows []coded.Result
			for _, m := range models {
				for _, s := range schemes {
					for _, d := range dropouts {
						c := cfg
						c.Model, c.Scheme, c.Dropout = m, s, d
						fmt.Fprintf(cmd.ErrOrStderr(), "coded: %s %s dropout %g ...\n", m, s, d)
						r, err := coded.Train(p, c)
						if err != nil {
							return err
						}
						rows = append(rows, r)
					}
				}
			}
			res := codedResult{rows: rows, classes: classes, examples: len(p.Y), tests: len(p.YTest)}
			if err := res.write(out); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.table())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&models, "model", coded.Models, "models: logreg, svm")
	f.StringSliceVar(&schemes, "schemes", coded.Names(), "schemes ("+strings.Join(coded.Names(), ", ")+")")
	f.Float64SliceVar(&dropouts, "dropout", []float64{0, 0.1, 0.2, 0.3}, "drop-out probabilities per device and round")
	f.IntSliceVar(&classes, "classes", []int{0, 6}, "the two Fashion-MNIST classes (label 0, label 1)")
	f.IntVar(&cfg.Devices, "devices", 12, "devices n (even)")
	f.IntVar(&cfg.Steps, "steps", 100, "gradient steps")
	f.Float64Var(&cfg.LR, "lr", 0.03, "learning rate (the lowest training loss of 0.003, 0.01, 0.03 at 100 steps)")
	f.Float64Var(&cfg.Lambda, "lambda", 1e-4, "L2 regularisation")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the coefficients and drop-outs")
	f.StringVar(&dataDir, "data-dir", "", "data folder (default $GRADWIRE_DATA, then /usr/share/datasets)")
	f.StringVar(&out, "out", "experiments/results/coded", "output directory")
	return cmd
}

type codedResult struct {
	rows            []coded.Result
	classes         []int
	examples, tests int
}

func (r *codedResult) table() string {
	var b strings.Builder
	c := r.rows[0].Config
	fmt.Fprintf(&b, "# Coded gradient descent on devices that drop out\n\nFashion-MNIST classes %d against %d (%d training, %d test examples), %d devices, %d full-batch steps, lr %g, lambda %g, seed %d.\n\n",
		r.classes[0], r.classes[1], r.examples, r.tests, c.Devices, c.Steps, c.LR, c.Lambda, c.Seed)
	b.WriteString("| model | scheme | k | dropout | encoding MB (devices / central) | MB a step | rounds a step | stalled rounds | train loss | train accuracy (%) | test accuracy (%) |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.1f / %.1f | %.2f | %.2f | %d | %.4f | %.2f | %.2f |\n", x.Model, x.Scheme, x.K, x.Dropout,
			float64(x.EncodingBytes)/1e6, float64(x.CentralEncodingBytes)/1e6, x.StepBytes/1e6, float64(x.Rounds)/float64(x.Steps), x.Stalls,
			x.TrainLoss, 100*x.TrainAccuracy, 100*x.TestAccuracy)
	}
	b.WriteString("\nEncoding: bytes that build the coded blocks of X and of X^T, each source block starting on its own device (devices) or passing through one encoder (central); coefficient rows at 4 bytes a coefficient. A step: w and r down to the devices that answer, their results up, at 8 bytes a value, failed rounds included. Rounds a step: 1 when every step decodes at once.\n")
	return b.String()
}

func (r *codedResult) write(dir string) error {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	rows := [][]string{{"model", "scheme", "k", "dropout", "encoding_bytes", "central_encoding_bytes", "step_bytes", "rounds", "stalls", "steps", "train_loss", "train_accuracy", "test_accuracy"}}
	for _, x := range r.rows {
		rows = append(rows, []string{x.Model, x.Scheme, strconv.Itoa(x.K), f(x.Dropout), strconv.FormatInt(x.EncodingBytes, 10), strconv.FormatInt(x.CentralEncodingBytes, 10),
			f(x.StepBytes), strconv.Itoa(x.Rounds), strconv.Itoa(x.Stalls), strconv.Itoa(x.Steps), f(x.TrainLoss), f(x.TrainAccuracy), f(x.TestAccuracy)})
	}
	return writeOutputs(dir, "coded", rows, r.table(), r.plot)
}

// plot: rounds a step against the drop-out rate, one line per model and scheme.
func (r *codedResult) plot(dir string) error {
	pl := plot.New()
	pl.Title.Text = "coded gradient descent: rounds a step against drop-out"
	pl.X.Label.Text = "drop-out probability per device and round"
	pl.Y.Label.Text = "rounds per step (1 = never waits; log scale)"
	pl.Y.Scale, pl.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PlusGlyph{}}
	i := 0
	seen := map[string]bool{}
	for _, x := range r.rows {
		key := x.Model + " " + x.Scheme
		if seen[key] {
			continue
		}
		seen[key] = true
		var xy plotter.XYs
		for _, y := range r.rows {
			if y.Model == x.Model && y.Scheme == x.Scheme {
				xy = append(xy, plotter.XY{X: y.Dropout, Y: float64(y.Rounds) / float64(y.Steps)})
			}
		}
		l, p, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		col := plotColours[i%len(plotColours)]
		l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.5)}
		if x.Model == "svm" {
			l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3), Shape: shapes[i%len(shapes)]}
		pl.Add(l, p)
		pl.Legend.Add(key, l, p)
		i++
	}
	pl.Y.Min, pl.Y.Max = 0.9, pl.Y.Max*4 // room above the data for the legend
	return savePlot(pl, dir, "coded")
}
