package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gradwire/gradwire/internal/train"
)

func newInfluenceCmd() *cobra.Command {
	var (
		o        train.InfluenceOptions
		plotOnly bool
	)
	cmd := &cobra.Command{
		Use:   "influence RUN_DIR [--examples N] [--last-layer] [--top LIST] [--test LIST [--proponents K] [--project D]] [--out FILE] [--plot-only]",
		Short: "TracIn self-influence, proponents and opponents over a run's checkpoints",
		Long: `TracInCP (Pruthi et al., NeurIPS 2020): the influence of a training example z
on an example z' is the sum over the run's epoch-end checkpoints t of
lr_t grad l(z; w_t) . grad l(z'; w_t), with lr_t the learning rate of the
epoch's last step; z's loss under the label the run trained on. The
self-influence of z (z' = z) ranks the examples the training found hardest to
fit.

Scores the first --examples of a seeded permutation of the run's training set
(the held-out split removed and the labels flipped exactly as the run did:
data.validation, data.label_noise), per example on a model of batch 1;
--last-layer restricts the gradient to the last layer's weights and bias (the
paper's fast variant). Models with BatchNorm are refused: their per-example
gradient in training mode is not the model's.

When the run flipped labels, reports the fraction of the flipped examples
found within the top --top fractions of three rankings: self-influence, the
final checkpoint's loss, and random order (its expectation).

--test LIST (indices into the test split) reports, for each of those test
examples (under its true label), its --proponents K proponents (the scored
training examples of highest positive influence: to first order, training on
them lowered its loss) and K opponents (most negative). --project D replaces
the gradients in those scores by their random projections G^T g, G with
i.i.d. N(0, 1/D) entries drawn from --project-seed (one G for every
checkpoint), which keeps each dot product unbiased with a relative error of
order sqrt(2/D); self-influence stays exact. Projecting costs the gradient's
length x D per training example and saves about the gradient's length per
test example: it is faster only with more test examples than D.

Writes --out (default RUN_DIR/influence.json: every self-influence, highest
first, and the proponents and opponents) and, when the run flipped labels, a
plot of the share of the mislabelled examples found against the share of
examples inspected in each ranking order, under --out's name with .png and
.svg. The run must keep its epoch-end checkpoints: set train.keep_checkpoints
to at least the epochs. --plot-only draws that plot from an earlier result
(--out) and computes nothing.`,
		Args: runDirArgs("influence", true),
		RunE: func(cmd *cobra.Command, args []string) error {
			jsonOut := o.Out
			if jsonOut == "" {
				jsonOut = filepath.Join(args[0], "influence.json")
			}
			if plotOnly {
				var computing []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if f.Name != "out" && f.Name != "plot-only" {
						computing = append(computing, "--"+f.Name)
					}
				})
				if len(computing) > 0 {
					return fmt.Errorf("--plot-only draws an earlier result and computes nothing: %s does not apply", strings.Join(computing, ", "))
				}
				b, err := os.ReadFile(jsonOut)
				if err != nil {
					return err
				}
				var res train.InfluenceResult
				if err := json.Unmarshal(b, &res); err != nil {
					return fmt.Errorf("%s: not an influence result: %w", jsonOut, err)
				}
				if res.Flipped == 0 {
					return fmt.Errorf("%s: the run flipped no labels, so there is nothing to plot", jsonOut)
				}
				return plotDetection(&res, jsonOut)
			}
			for _, f := range o.Top {
				if !(f > 0 && f <= 1) {
					return fmt.Errorf("--top %v: expected fractions in (0, 1]", f)
				}
			}
			if o.Examples < 0 {
				return fmt.Errorf("--examples %d: expected >= 0 (0 = all)", o.Examples)
			}
			if o.K < 1 {
				return fmt.Errorf("--proponents %d: expected >= 1", o.K)
			}
			if err := listOnce("--top", o.Top); err != nil {
				return err
			}
			if err := listOnce("--test", o.Test); err != nil {
				return err
			}
			if err := checkRunDirs("influence", args); err != nil {
				return err
			}
			if o.Project < 0 {
				return fmt.Errorf("--project %d: expected >= 0 (0 = exact dot products)", o.Project)
			}
			for _, i := range o.Test {
				if i < 0 {
					return fmt.Errorf("--test %d: expected indices >= 0 into the test split", i)
				}
			}
			start := time.Now()
			res, err := train.Influence(args[0], o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d examples, %d mislabelled, %d checkpoints (%s), learning rates %v, gradient of %s; %.1f s\n",
				res.Examples, res.Flipped, len(res.Checkpoints), strings.Join(res.Checkpoints, ", "), res.LRs, map[bool]string{true: "the last layer", false: "every parameter"}[res.LastLayer],
				time.Since(start).Seconds())
			if res.Flipped > 0 {
				if err := plotDetection(res, jsonOut); err != nil {
					return fmt.Errorf("plot of the mislabelled examples found: %w", err)
				}
				fmt.Fprint(out, "\n| ranking |")
				for _, f := range o.Top {
					fmt.Fprintf(out, " mislabelled found in the top %g%% |", 100*f)
				}
				fmt.Fprintln(out, "\n|---|"+strings.Repeat("--:|", len(o.Top)))
				for _, name := range []string{"self-influence", "loss", "random"} {
					fmt.Fprintf(out, "| %s |", name)
					for _, v := range res.Found[name] {
						fmt.Fprintf(out, " %.1f%% |", 100*v)
					}
					fmt.Fprintln(out)
				}
			}
			how := "exact dot products"
			if res.Projection > 0 {
				how = fmt.Sprintf("random projection to %d dimensions, seed %d", res.Projection, res.ProjectionSeed)
			}
			for _, t := range res.Tests {
				fmt.Fprintf(out, "\nTest example %d (label %d, predicted %d, loss %.4f at the last checkpoint; %s):\n\n", t.Index, t.Label, t.Predicted, t.Loss, how)
				fmt.Fprintln(out, "| rank | proponent | label | influence | opponent | label | influence |\n|--:|--:|--:|--:|--:|--:|--:|")
				for r := range max(len(t.Proponents), len(t.Opponents)) {
					fmt.Fprintf(out, "| %d |%s%s\n", r+1, influencerCells(t.Proponents, r), influencerCells(t.Opponents, r))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Examples, "examples", 10000, "training examples scored (0 = all)")
	f.BoolVar(&o.LastLayer, "last-layer", false, "gradients of the last layer only")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the example permutation")
	f.Float64SliceVar(&o.Top, "top", []float64{0.1, 0.2}, "ranking fractions to report")
	f.IntSliceVar(&o.Test, "test", nil, "test-split indices whose proponents and opponents are reported")
	f.IntVar(&o.K, "proponents", 5, "proponents and opponents per test example")
	f.IntVar(&o.Project, "project", 0, "random projection of the gradients to this many dimensions for the proponent scores (0 = exact)")
	f.Uint64Var(&o.ProjectSeed, "project-seed", 1, "seed of the random projection")
	f.StringVar(&o.Out, "out", "", "the JSON result (default RUN_DIR/influence.json)")
	f.BoolVar(&plotOnly, "plot-only", false, "only draw the plot of the mislabelled examples found from the result in --out")
	return cmd
}

// influencerCells are a proponent's or opponent's cells of row r: training
// index (flagged when its label was flipped), label, influence; blank past
// the list's end.
func influencerCells(list []train.Influencer, r int) string {
	if r >= len(list) {
		return "  |  |  |"
	}
	e := list[r]
	flag := ""
	if e.Mislabeled {
		flag = " (flipped)"
	}
	return fmt.Sprintf(" %d%s | %d | %.4g |", e.Index, flag, e.Label, e.Score)
}
