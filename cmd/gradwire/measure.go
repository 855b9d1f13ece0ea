package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/train"
)

func newMeasureCmd() *cobra.Command {
	var o train.MeasureOptions
	cmd := &cobra.Command{
		Use:   "measure RUN_DIR... [--examples N] [--batch N] [--iterations N] [--ascent-steps N] [--seed N]",
		Short: "Sharpness and norm measures of finished runs' final parameters",
		Long: `Load each run's latest checkpoint (its config.yaml says the model and the data)
and compute, over the first --examples of a fixed permutation of its training
split (the same examples for every run of a data set), the measures of Jiang et
al. 2020 ("Fantastic Generalization Measures"; numbers are the paper's):

  train_loss, train_accuracy   in evaluation mode
  param_norm                   sum over weight tensors of ||W||_F^2 (no biases,
                               no BatchNorm; measure 42)
  log_spectral_product         log prod over weight tensors of ||W||_2^2, each
                               viewed as a matrix (measure 32)
  path_norm                    the outputs' sum with every parameter squared on
                               an all-ones input (measure 44)
  dist_fro, dist_spec_init     sum over weight tensors of ||W - W0||_F^2 and of
                               ||W - W0||_2^2, W0 the run's initial parameters
                               (RUN_DIR/init.ckpt; measures 40 and 41). A run
                               without init.ckpt (trained before gradwire wrote
                               it, or with train.checkpoint off) has neither;
                               its notes say so and the other measures stand
  fisher_rao                   ((d+1)^2/m) sum_i <w, grad_w l(x_i, y_i)>^2, w
                               every parameter, each example's gradient exact
                               (batch 1), d the number of weight tensors
                               (measure 45); left out for models with BatchNorm
  pacbayes_sigma, _mag_sigma   the largest sigma whose Gaussian noise on the
                               parameters (magnitude-aware: variance
                               sigma^2 w^2 + 1e-6) lowers the training accuracy
                               by 0.1: bisection on [0, 2], depth 15, 10 draws
                               (flatness measures 53 and 61 are 1/sigma^2)
  sharpness_alpha, _mag_alpha  worst-case sharpness: the largest alpha whose
                               worst perturbation in the box |u_i| <= alpha
                               (magnitude-aware: alpha (|w_i| + 1e-3)) lowers
                               the training accuracy by 0.1; the perturbation by
                               --ascent-steps of projected sign-gradient ascent
                               on the training loss (steps of a quarter of the
                               box, one batch each, from a random point of the
                               box), alpha by bisection on [0, 2], depth 20
                               (flatness 1/alpha^2; measure 62 is 1/alpha'^2)
  hessian_top_eigenvalue       the largest-magnitude eigenvalue of the training
                               loss's Hessian: power iteration from a seeded
                               random vector, Hessian-vector products as central
                               differences of gradients with step
                               5e-3 max(1, ||w||) (float32), stopping at a
                               relative change below 1e-3 or --iterations

The gradients run the model in training mode (BatchNorm normalises with each
batch's statistics); the running statistics are restored afterwards. Writes
RUN_DIR/measures.json and prints one line per run; gradwire report adds the
measured runs of a sweep and each measure's Kendall tau with the gap, overall
and per varied hyper-parameter.`,
		Args: runDirArgs("measure", false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.AscentSteps < 1 {
				return fmt.Errorf("--ascent-steps %d: expected >= 1", o.AscentSteps)
			}
			for _, f := range []struct {
				name string
				val  int
			}{{"--examples", o.Examples}, {"--batch", o.Batch}, {"--iterations", o.Iterations}} {
				if f.val < 1 {
					return fmt.Errorf("%s %d: expected >= 1", f.name, f.val)
				}
			}
			if o.Examples < o.Batch {
				return fmt.Errorf("--examples %d is fewer than one --batch of %d: expected at least one whole batch", o.Examples, o.Batch)
			}
			if err := checkRunDirs("measure", args); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var notes []string             // in order of first appearance
			noted := map[string][]string{} // note -> the runs it concerns
			for i, dir := range args {
				m, err := train.Measure(dir, o)
				if err != nil {
					return err
				}
				if i == 0 { // the header once a row follows, not above an error
					fmt.Fprintln(out, "| run | epoch | examples | train loss | train accuracy (%) | test accuracy (%) | param norm | distance to init (Frobenius) | Fisher-Rao | 1/alpha^2 | 1/alpha'^2 | top Hessian eigenvalue | products |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
				}
				conv := ""
				if !m.HessianConverged {
					conv = " (not converged)"
				}
				fmt.Fprintf(out, "| %s | %d | %d | %.4f | %.2f | %.2f | %.2f | %s | %s | %s | %s | %.3f%s | %d |\n", dir, m.Epoch, m.Examples, m.TrainLoss,
					100*m.TrainAccuracy, 100*m.TestAccuracy, m.ParamNorm, optional(m.DistFro, nil), optional(m.FisherRao, nil),
					optional(m.SharpnessAlpha, invSquare), optional(m.SharpnessMagAlpha, invSquare), m.HessianTop, conv, 2*m.HessianIterations)
				for _, n := range m.Notes {
					if noted[n] == nil {
						notes = append(notes, n)
					}
					noted[n] = append(noted[n], dir)
				}
			}
			if len(notes) > 0 {
				fmt.Fprintln(out)
			}
			for _, n := range notes {
				fmt.Fprintf(out, "- %s: %s\n", strings.Join(noted[n], ", "), n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Examples, "examples", 2048, "training examples (rounded down to whole batches)")
	f.IntVar(&o.Batch, "batch", 256, "examples per forward and backward")
	f.IntVar(&o.Iterations, "iterations", 100, "power-iteration products at most")
	f.IntVar(&o.AscentSteps, "ascent-steps", train.DefaultAscentSteps, "projected gradient-ascent steps per sharpness probe")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the example subset and the starting vector")
	return cmd
}

// optional formats a measure that a run may lack ("-" when absent), through
// f when given.
func optional(v *float64, f func(float64) float64) string {
	if v == nil {
		return "-"
	}
	x := *v
	if f != nil {
		x = f(x)
	}
	return fmt.Sprintf("%.4g", x)
}

func invSquare(x float64) float64 { return 1 / (x * x) }
