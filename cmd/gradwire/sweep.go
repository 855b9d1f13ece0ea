package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/sweep"
)

func newSweepCmd() *cobra.Command {
	var (
		configPath string
		results    string
		dryRun     bool
		only       []string
	)
	cmd := &cobra.Command{
		Annotations: map[string]string{watchesContextAnnotation: "true"},
		Use:         "sweep --config FILE [--results DIR] [--only PATTERN]... [--dry-run]",
		Short:       "Run a grid of trainings from a sweep file, then report",
		Long: `Run every (variation, seed) of a sweep file and build its report.

A sweep file (YAML) names a base run config (relative to the sweep file's folder),
overrides applied to every run (set), seeds (default [1]) and variations, each a
name, a list of key=value overrides and optionally its own seeds:

  name: compression-lenet5-fashion
  base: ../configs/lenet5-fashion.yaml
  set: [dist.workers=8]
  seeds: [1, 2]
  variations:
    - name: dense
      set: [compress.name=none]
    - name: dgc
      set: [compress.name=dgc]

Every run's config is checked before the first run starts. Run k of variation V
goes to <results>/<name>/runs/V/seed-k/ (a normal run directory plus train.log):
a run with summary.json is skipped, a run with a checkpoint and no summary
resumes from it, the others start afresh. A run that failed (its failed.txt says
why) is not finished: a rerun tries it again by the same rules, and the dry run
and the progress line say it is a retry and why it failed before. An optional
key reuse lists other sweeps' results folders (relative to the sweep file's
folder, e.g. reuse: [results/lrprobe]): a run not yet started whose config, seed
included, equals a finished run's there is copied from it instead of trained
(whatever --only selects: a copy trains nothing), and the copy is recorded in
invocations.jsonl and train.log. One progress line per run goes to stderr, with
the time the runs left should take (from the finished runs' training and
evaluation times) once one has finished. Ctrl-C stops the current run with a
checkpoint at the step it reached (at its last epoch's end for a pipelined run,
dist.pipeline 2); rerunning continues from there.
Afterwards the sweep's report is rebuilt (see gradwire report) and table.md is
printed on stdout.

--only restricts the runs trained to the variations whose names match one of
the given patterns (comma-separated or repeated; * ? and [a-z] as in shell
globs, e.g. --only 'lars-*,lamb-*'), to get the rows that matter first out of a
sweep that takes days; the other runs are left as they are and the report still
covers every finished run. A pattern that matches no variation is an error.

--dry-run prints each run's state (with the process training it, if one is)
and its equivalent gradwire train command, then the estimated time for the runs
left, without training.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return fmt.Errorf("--config FILE is required: the sweep file, e.g. experiments/<name>.yaml")
			}
			if err := folderFlag("--results", results); err != nil {
				return err
			}
			sw, err := sweep.Load(configPath)
			if err != nil {
				return err
			}
			if dryRun {
				return sweep.DryRun(cmd.OutOrStdout(), sw, results, only)
			}
			stderr := cmd.ErrOrStderr()
			// Failed runs do not prevent the report of the others; the
			// command still ends with their errors.
			// The command as typed, minus the binary's path, for the record of what
			// produced the results.
			command := cmd.CommandPath() + " --config " + configPath
			if cmd.Flags().Changed("results") {
				command += " --results " + results
			}
			if len(only) > 0 {
				command += " --only " + sweep.ShellQuote(strings.Join(only, ","))
			}
			runErr := sweep.Execute(cmd.Context(), sw, sweep.Options{Results: results, Progress: stderr, Command: command, Only: only})
			var failed *sweep.FailedRuns
			if runErr != nil && !errors.As(runErr, &failed) {
				return runErr
			}
			res, err := sweep.Report(sw.Dir(results), stderr)
			if err != nil {
				return errors.Join(runErr, err)
			}
			fmt.Fprintf(stderr, "report: %d files in %s\n", len(res.Files), sw.Dir(results))
			if _, err := fmt.Fprint(cmd.OutOrStdout(), res.Table); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "sweep file (YAML)")
	f.StringVar(&results, "results", sweep.DefaultResults, "results root; the sweep writes to <results>/<name>")
	f.StringSliceVar(&only, "only", nil, "train only the variations matching these patterns (e.g. 'lars-*'); the others are left as they are")
	f.BoolVar(&dryRun, "dry-run", false, "list the runs and their overrides without training")
	return cmd
}
