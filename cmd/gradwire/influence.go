package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/train"
)

func newInfluenceCmd() *cobra.Command {
	var o train.InfluenceOptions
	cmd := &cobra.Command{
		Use:   "influence RUN_DIR [--examples N] [--last-layer] [--top LIST]",
		Short: "TracIn self-influence of training examples over a run's checkpoints",
		Long: `TracInCP (Pruthi et al., NeurIPS 2020): the self-influence of a training
example z is the sum over the run's epoch-end checkpoints t of
lr_t ||grad l(z; w_t)||^2, with lr_t the learning rate of the epoch's last
step and the gradient of z's loss under the label the run trained on. It
ranks the examples the training found hardest to fit.

Scores the first --examples of a seeded permutation of the run's training set
(the held-out split removed and the labels flipped exactly as the run did:
data.validation, data.label_noise), per example on a model of batch 1;
--last-layer restricts the gradient to the last layer's weights and bias (the
paper's fast variant). Models with BatchNorm are refused: their per-example
gradient in training mode is not the model's.

When the run flipped labels, reports the fraction of the flipped examples
found within the top --top fractions of three rankings: self-influence, the
final checkpoint's loss, and random order (its expectation). Writes
RUN_DIR/influence.json (every score, highest first). The run must keep its
epoch-end checkpoints: set train.keep_checkpoints to at least the epochs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range o.Top {
				if !(f > 0 && f <= 1) {
					return fmt.Errorf("--top %v: expected fractions in (0, 1]", f)
				}
			}
			if o.Examples < 0 {
				return fmt.Errorf("--examples %d: expected >= 0 (0 = all)", o.Examples)
			}
			res, err := train.Influence(args[0], o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d examples, %d mislabelled, %d checkpoints (%s), learning rates %v, gradient of %s\n\n",
				res.Examples, res.Flipped, len(res.Checkpoints), strings.Join(res.Checkpoints, ", "), res.LRs, map[bool]string{true: "the last layer", false: "every parameter"}[res.LastLayer])
			if res.Flipped == 0 {
				return nil
			}
			fmt.Fprint(out, "| ranking |")
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
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Examples, "examples", 10000, "training examples scored (0 = all)")
	f.BoolVar(&o.LastLayer, "last-layer", false, "gradients of the last layer only")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the example permutation")
	f.Float64SliceVar(&o.Top, "top", []float64{0.1, 0.2}, "ranking fractions to report")
	return cmd
}
