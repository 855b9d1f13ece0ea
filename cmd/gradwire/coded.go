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

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/dist/coded"
	"github.com/gradwire/gradwire/internal/sweep"
)

// codedOptions are the flags of gradwire coded.
type codedOptions struct {
	models, schemes []string
	dropouts        []float64
	classes         []int
	devices, steps  int
	lr, lambda      float64
	seed            uint64
	dataDir, out    string
}

func newCodedCmd() *cobra.Command {
	var o codedOptions
	cmd := &cobra.Command{
		Use:   "coded [--model LIST] [--schemes LIST] [--dropout LIST] [--devices N] [--steps N] [--out DIR]",
		Short: "Train linear models on devices that drop out, with uncoded, replicated, MDS- and RLNC-coded data",
		Long: `Logistic regression (labels 0/1) and a linear SVM (hinge, labels -1/+1) with L2
regularisation on two Fashion-MNIST classes (--classes, default 0 T-shirt/top
against 6 shirt, the pair a linear model confuses most, so that training
progress shows in the accuracy), pixels in [0, 1] plus a bias feature, trained
by full-batch gradient descent in float64. Each step's two products, z = X w
over row blocks of X and X^T r over row blocks of X^T, are computed by
--devices devices, each holding one coded block of X and one of X^T; r is
formed at the master. Schemes (n devices, k source blocks):

  uncoded      k = n, block i on device i
  replication  k = n/2, every block on two devices (n must be even)
  mds          k = floor(2n/3), device i stores sum_j G_ij B_j with G Gaussian:
               any k answers decode
  rlnc         k = floor(2n/3), device i combines d = ceil((k+1)/2) blocks
               (its own block among them when it owns one) with Gaussian
               coefficients: decodes by least squares once the answers' rows
               reach rank k with condition number <= 1e8

Time passes in rounds; in each round every device is away with probability p
(--dropout), independently. Present devices that have not yet answered the
current product answer it; answers are kept until the product decodes, so
every scheme applies the exact gradient and a product that lacks answers waits
(uncoded waits for each missing device to return). The run has the time of
--steps undisturbed steps (2 rounds each) and completes the steps that fit.

Reported per model, scheme and drop-out rate: encoding bytes (devices
exchanging source blocks, block j starting on device j, coefficient vectors at
4 bytes a coefficient; and through a central encoder for MDS and RLNC), bytes
a completed step (w and r down, results up, 8 bytes a value), steps
completed, stalled steps (more than 2 rounds), how many k-subsets of devices
decode on their own, decode failures (rounds whose
answers did not decode; ill-conditioned among them), final training loss,
training and test accuracy (the test split of the two classes). Writes
table.md, coded.csv and coded.png/.svg (test accuracy against drop-out) to
--out. Data from --data-dir, default $GRADWIRE_DATA, then /usr/share/datasets.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			train, test, err := data.OpenTrainTest(data.Options{Name: "fashion-mnist", Dir: o.dataDir})
			if err != nil {
				if o.dataDir != "" {
					return fmt.Errorf("--data-dir %s: %w", o.dataDir, err)
				}
				return err
			}
			p, err := coded.Pair(train, test, o.classes[0], o.classes[1])
			if err != nil {
				return fmt.Errorf("--classes %v: %w", o.classes, err)
			}
			var rows []coded.Result
			for _, s := range o.schemes {
				store, err := coded.Encode(p, s, o.devices, o.seed)
				if err != nil {
					return fmt.Errorf("--schemes %s, --devices %d: %w", s, o.devices, err)
				}
				for _, m := range o.models {
					for _, d := range o.dropouts {
						fmt.Fprintf(cmd.ErrOrStderr(), "coded: %s %s dropout %g\n", m, s, d)
						r, err := coded.Train(store, p, coded.Config{Model: m, Dropout: d, Steps: o.steps, LR: o.lr, Lambda: o.lambda, Seed: o.seed})
						if err != nil {
							return err
						}
						rows = append(rows, r)
					}
				}
			}
			slices.SortStableFunc(rows, func(a, b coded.Result) int { return strings.Compare(a.Model, b.Model) })
			res := codedResult{opts: o, rows: rows, examples: len(p.Y), tests: len(p.YTest)}
			if err := res.write(o.out); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.table())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.models, "model", coded.Models, "models: logreg, svm")
	f.StringSliceVar(&o.schemes, "schemes", coded.Names(), "schemes: "+strings.Join(coded.Names(), ", "))
	f.Float64SliceVar(&o.dropouts, "dropout", []float64{0, 0.1, 0.2, 0.3}, "probabilities that a device is away in a round, each in [0, 1)")
	f.IntSliceVar(&o.classes, "classes", []int{0, 6}, "the two Fashion-MNIST classes, labelled 0 and 1 (0-9)")
	f.IntVar(&o.devices, "devices", 8, "devices n, 2-256 (even for replication)")
	f.IntVar(&o.steps, "steps", 100, "time budget: the rounds of this many undisturbed gradient steps (2 each)")
	f.Float64Var(&o.lr, "lr", 0.05, "learning rate")
	f.Float64Var(&o.lambda, "lambda", 1e-4, "L2 regularisation lambda")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the coefficients, supports and drop-outs")
	f.StringVar(&o.dataDir, "data-dir", "", "folder holding fashion-mnist/ (default $GRADWIRE_DATA, then /usr/share/datasets)")
	f.StringVar(&o.out, "out", "experiments/results/coded", "output directory")
	return cmd
}

func (o *codedOptions) validate() error {
	if len(o.models) == 0 {
		return fmt.Errorf("--model: expected at least one of %s", strings.Join(coded.Models, ", "))
	}
	for _, m := range o.models {
		if !slices.Contains(coded.Models, m) {
			return fmt.Errorf("--model %q: expected one of %s", m, strings.Join(coded.Models, ", "))
		}
	}
	if err := listOnce("--model", o.models); err != nil {
		return err
	}
	if len(o.schemes) == 0 {
		return fmt.Errorf("--schemes: expected at least one of %s", strings.Join(coded.Names(), ", "))
	}
	for _, s := range o.schemes {
		if _, ok := coded.Schemes[s]; !ok {
			return fmt.Errorf("--schemes %q: expected one of %s", s, strings.Join(coded.Names(), ", "))
		}
	}
	if err := listOnce("--schemes", o.schemes); err != nil {
		return err
	}
	if len(o.dropouts) == 0 {
		return fmt.Errorf("--dropout: expected at least one probability in [0, 1)")
	}
	for _, p := range o.dropouts {
		if !(p >= 0 && p < 1) {
			return fmt.Errorf("--dropout %v: expected a probability in [0, 1)", p)
		}
	}
	if err := listOnce("--dropout", o.dropouts); err != nil {
		return err
	}
	if len(o.classes) != 2 || o.classes[0] == o.classes[1] {
		return fmt.Errorf("--classes %v: expected two different classes in 0-9, e.g. 0,6", o.classes)
	}
	for _, c := range o.classes {
		if c < 0 || c > 9 {
			return fmt.Errorf("--classes %v: expected two different classes in 0-9, e.g. 0,6", o.classes)
		}
	}
	if o.devices < 2 || o.devices > 256 {
		return fmt.Errorf("--devices %d: expected 2-256", o.devices)
	}
	if o.devices%2 != 0 && slices.Contains(o.schemes, "replication") {
		return fmt.Errorf("--devices %d: expected an even number with --schemes replication (two copies of n/2 blocks)", o.devices)
	}
	if o.steps < 1 {
		return fmt.Errorf("--steps %d: expected at least 1", o.steps)
	}
	if !(o.lr > 0) || math.IsInf(o.lr, 1) {
		return fmt.Errorf("--lr %v: expected a finite learning rate > 0", o.lr)
	}
	if !(o.lambda >= 0) || math.IsInf(o.lambda, 1) {
		return fmt.Errorf("--lambda %v: expected a finite lambda >= 0", o.lambda)
	}
	return nil
}

type codedResult struct {
	opts            codedOptions
	rows            []coded.Result
	examples, tests int
}

func mb(b int64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 1, 64) }

func (r *codedResult) table() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "# Coded gradient descent on devices that drop out\n\n"+
		"Fashion-MNIST class %d (label 0) against %d (label 1): %d training, %d test examples, 785 features (784 pixels in [0, 1], bias). "+
		"%d devices; a budget of %d rounds (%d undisturbed steps); lr %g, lambda %g, seed %d.\n\n",
		o.classes[0], o.classes[1], r.examples, r.tests, o.devices, 2*o.steps, o.steps, o.lr, o.lambda, o.seed)
	b.WriteString("| model | scheme | k | k-subsets that decode | dropout | encoding MB, devices | encoding MB, central | KB a step | steps completed | stalled steps | decode failures (ill-conditioned) | train loss | train accuracy (%) | test accuracy (%) |\n" +
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.rows {
		central := "-"
		if x.HasCentral {
			central = mb(x.CentralEncodingBytes)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d / %d | %.2f | %s | %s | %.1f | %d / %d | %d | %d (%d) | %.4f | %.2f | %.2f |\n",
			x.Model, x.Scheme, x.K, x.KDecodable, x.KChecked, x.Dropout, mb(x.EncodingBytes), central, x.StepBytes/1e3, x.StepsCompleted, x.Steps,
			x.StalledSteps, x.DecodeFailures, x.IllConditioned, x.TrainLoss, 100*x.TrainAccuracy, 100*x.TestAccuracy)
	}
	b.WriteString("\nk-subsets that decode: of the sets of k devices (all C(n, k), or 5000 drawn when there are more), those whose answers alone decode: the code's tolerance to drop-outs apart from the run's draws.\n\n" +
		"What is counted. Encoding (once, both stores: the coded blocks of X and of X^T): devices exchanging blocks, source block j " +
		"starting on device j (j < k), each device receiving the blocks of its support it does not own plus its coefficient vector " +
		"(4 bytes a coefficient; none for uncoded and replication); central: the k source blocks up to one encoder and the n coded blocks down " +
		"(MDS and RLNC only). A step: w down to and the X w results up from each device that answers the first product, r down to and " +
		"the X^T r results up from each that answers the second, 8 bytes a value, answers beyond k included (a device answers when present, " +
		"before the master knows who else will). Every completed step applies the exact gradient; a product that cannot yet be decoded " +
		"waits a round for more answers (a decode failure) and a step with such a wait is stalled.\n")
	return b.String()
}

func (r *codedResult) write(dir string) error {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	rows := [][]string{{"model", "scheme", "devices", "k", "dropout", "encoding_bytes", "central_encoding_bytes", "step_bytes", "total_bytes",
		"k_subsets_decodable", "k_subsets_checked", "rounds", "steps_budget", "steps_completed", "stalled_steps", "decode_failures", "ill_conditioned", "train_loss", "train_accuracy", "test_accuracy"}}
	for _, x := range r.rows {
		central := ""
		if x.HasCentral {
			central = strconv.FormatInt(x.CentralEncodingBytes, 10)
		}
		rows = append(rows, []string{x.Model, x.Scheme, strconv.Itoa(x.Devices), strconv.Itoa(x.K), f(x.Dropout),
			strconv.FormatInt(x.EncodingBytes, 10), central, f(x.StepBytes), strconv.FormatInt(x.TotalBytes, 10),
			strconv.Itoa(x.KDecodable), strconv.Itoa(x.KChecked), strconv.Itoa(x.Rounds), strconv.Itoa(x.Steps), strconv.Itoa(x.StepsCompleted), strconv.Itoa(x.StalledSteps),
			strconv.Itoa(x.DecodeFailures), strconv.Itoa(x.IllConditioned), f(x.TrainLoss), f(x.TrainAccuracy), f(x.TestAccuracy)})
	}
	return writeOutputs(dir, "coded", rows, r.table(), r.plot)
}

// plot: test accuracy against the drop-out rate, one series per model and
// scheme; the scheme sets colour and marker, the model the line (solid
// logistic, dashed SVM) and the glyph's fill.
func (r *codedResult) plot(dir string) error {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Fashion-MNIST %d vs %d, %d devices, budget of %d steps' rounds", r.opts.classes[0], r.opts.classes[1], r.opts.devices, r.opts.steps)
	pl.X.Label.Text = "probability that a device is away in a round"
	pl.Y.Label.Text = "test accuracy (%)"
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = false, true
	pl.Legend.YOffs = vg.Points(8)
	// Per scheme a shape, filled for logistic regression and outlined for the SVM.
	filled := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.PyramidGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}}
	hollow := []draw.GlyphDrawer{draw.RingGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PlusGlyph{}}
	lo, hi := 100.0, 0.0
	for _, m := range r.opts.models {
		for si, s := range r.opts.schemes {
			var xy plotter.XYs
			for _, x := range r.rows {
				if x.Model == m && x.Scheme == s {
					xy = append(xy, plotter.XY{X: x.Dropout, Y: 100 * x.TestAccuracy})
					lo, hi = min(lo, 100*x.TestAccuracy), max(hi, 100*x.TestAccuracy)
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, p, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			col := plotColours[si%len(plotColours)]
			// Earlier schemes drawn wider, so that identical curves (MDS and
			// RLNC decode the same rounds when both tolerate every k-subset)
			// show as a coloured border rather than one hiding the other.
			wider := float64(len(r.opts.schemes) - 1 - si)
			l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.5 + 1.2*wider)}
			shape := filled[si%len(filled)]
			if m == "svm" {
				l.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				shape = hollow[si%len(hollow)]
			}
			p.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3.5 + 1.2*wider), Shape: shape}
			pl.Add(l, p)
			pl.Legend.Add(m+" "+s, l, p)
		}
	}
	var ticks []plot.Tick
	for _, d := range r.opts.dropouts {
		ticks = append(ticks, plot.Tick{Value: d, Label: strconv.FormatFloat(d, 'g', -1, 64)})
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	// Room under the curves for the legend.
	span := max(hi-lo, 1)
	pl.Y.Min, pl.Y.Max = lo-1.2*span, hi+0.15*span
	pl.Y.Tick.Marker = sweep.NiceTicks{}
	return savePlot(pl, dir, "coded")
}
