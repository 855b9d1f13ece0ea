package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/sweep"
)

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Rebuild a sweep's table and plots from its runs",
		Long: `Rebuild the report of the sweep whose results folder is DIR
(<results>/<name>, e.g. experiments/results/compression-lenet5-fashion) from the
files its runs wrote (runs/<variation>/seed-<k>/summary.json and metrics.jsonl),
without training:

  runs.csv                     one row per run: variation, seed, every summary.json field
  table.md                     one row per variation, mean ± std over seeds
  test_metric.png              test accuracy (or test loss) per epoch
  accuracy_vs_compression.png  final test accuracy vs steady compression ratio
                               (sweeps with a compressed variation)
  accuracy_vs_link_bytes.png   the same against bytes through the busiest link
  train_loss.png               logged training loss per step (per epoch when
                               the runs' steps an epoch differ)
  sharpness_vs_gap.png         top Hessian eigenvalue against the generalization gap
                               (runs with measures.json)
  validation_vs_lr.png         validation figure against optim.lr, a line per
                               learning-rate grid (variations of one optimizer
                               and batch differing in optim.lr alone; runs
                               holding a validation split out)
  accuracy_vs_batch.png        final test accuracy against the global batch, a
                               line per optimizer or recipe, failed batches
                               marked as such (sweeps of one model and compressor at
                               two or more global batches, as the table's
                               section by optimizer and global batch)
  scaling_speedup_<B>gbps.png  time model's speed-up against workers, and
  scaling_link_bytes.png       busiest link's bytes against workers (sweeps
                               whose variations run at several worker counts)
  *_char.png                   a sweep of classifiers and character models:
                               test_metric, accuracy_vs_compression,
                               accuracy_vs_link_bytes and train_loss again for
                               the character models (the plain files hold the
                               classifiers)

Every plot is written as PNG and as SVG of the same name; a plot that does
not apply to the sweep is not written (an older one is removed).

Rows follow the variation order of DIR/sweep.yaml (written by gradwire sweep),
then the seed; when the sweep file it was written from (its source:) has
gained, lost or changed variations since, a warning on stderr names them (and
says so when that file no longer loads).
Unfinished runs are left out with a warning on stderr. table.md
is printed on stdout. When runs hold measures.json (gradwire measure), table.md
ends with their measures and each measure's rank correlation with the
generalization gap: Kendall's tau over the runs, the granulated psi for each
hyper-parameter the sweep varies (sweep.yaml's set: keys whose value differs
between runs) and Psi, their mean (Jiang et al. 2020). When the sweep has
learning-rate grids and validation figures, table.md gives each grid's pick
(best on validation), its test figure and whether it lies inside the grid.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("report needs one argument, the sweep's results folder DIR, e.g. gradwire report experiments/results/<name>")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := sweep.Report(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), res.Table)
			return err
		},
	}
}
