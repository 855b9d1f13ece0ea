package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/train"
)

func newMeasureCmd() *cobra.Command {
	var o train.MeasureOptions
	cmd := &cobra.Command{
		Use:   "measure RUN_DIR... [--examples N] [--batch N] [--iterations N] [--seed N]",
		Short: "Sharpness and norm measures of finished runs' final parameters",
		Long: `Load each run's latest checkpoint (its config.yaml says the model and the data)
and compute, over the first --examples of a fixed permutation of its training
split (the same examples for every run of a data set):

  train_loss, train_accuracy   in evaluation mode
  param_norm                   sum over weight tensors of ||W||_F^2 (no biases,
                               no BatchNorm; Jiang et al. 2020, measure 42)
  log_spectral_product         log prod over weight tensors of ||W||_2^2, each
                               viewed as a matrix (measure 32)
  path_norm                    the outputs' sum with every parameter squared on
                               an all-ones input (measure 44)
  pacbayes_sigma, _mag_sigma   the largest sigma whose Gaussian noise on the
                               parameters (magnitude-aware: variance
                               sigma^2 w^2 + 1e-6) lowers the training accuracy
                               by 0.1: bisection on [0, 2], depth 15, 10 draws
                               (flatness measures 53 and 61 are 1/sigma^2)
  hessian_top_eigenvalue       the largest-magnitude eigenvalue of the training
                               loss's Hessian: power iteration from a seeded
                               random vector, Hessian-vector products as central
                               differences of gradients with step
                               5e-3 max(1, ||w||) (float32), stopping at a
                               relative change below 1e-3 or --iterations

The gradients run the model in training mode (BatchNorm normalises with each
batch's statistics); the running statistics are restored afterwards. Writes
RUN_DIR/measures.json and prints one line per run; gradwire report adds the
measured runs of a sweep and each measure's Kendall tau with the gap.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "| run | epoch | examples | train loss | train accuracy (%) | test accuracy (%) | param norm | top Hessian eigenvalue | products |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|")
			for _, dir := range args {
				m, err := train.Measure(dir, o)
				if err != nil {
					return err
				}
				conv := ""
				if !m.HessianConverged {
					conv = " (not converged)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "| %s | %d | %d | %.4f | %.2f | %.2f | %.2f | %.3f%s | %d |\n", dir, m.Epoch, m.Examples, m.TrainLoss,
					100*m.TrainAccuracy, 100*m.TestAccuracy, m.ParamNorm, m.HessianTop, conv, 2*m.HessianIterations)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Examples, "examples", 2048, "training examples (rounded down to whole batches)")
	f.IntVar(&o.Batch, "batch", 256, "examples per forward and backward")
	f.IntVar(&o.Iterations, "iterations", 100, "power-iteration products at most")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the example subset and the starting vector")
	return cmd
}
