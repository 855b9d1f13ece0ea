package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/sweep"
	"github.com/gradwire/gradwire/internal/train"
)

func newTrainCmd() *cobra.Command {
	var (
		configPath string
		sets       []string
		outDir     string
		resumeDir  string
		overwrite  bool
		allow      []string
	)
	cmd := &cobra.Command{
		Annotations: map[string]string{watchesContextAnnotation: "true"},
		Use:         "train --config FILE [--set key=value]... [--out DIR] | train --resume DIR",
		Short:       "Train a model from a YAML config",
		Long: `Train a model from a YAML config file (see configs/*.yaml and the README's config
reference). Every key can be overridden with --set key=value (repeatable; a key
given again takes its last value, with a warning), for example --set optim.lr=0.1
--set model.hidden=300,100.

The run directory (--out, default runs/<config name>-<timestamp>) receives
config.yaml (the resolved config), metrics.jsonl (logged steps and one record per
epoch), checkpoints/step-NNNNNNNN.ckpt (after every epoch, every
train.checkpoint_every steps or train.checkpoint_minutes, and when the run is
interrupted; the newest train.keep_checkpoints and the best are kept) and
summary.json at the end. One process owns a run directory at a time (a second
one fails, naming the first); --out into a folder that holds another run is
refused unless --overwrite (which removes that run's files first).

--resume DIR continues the run in DIR from its newest checkpoint with the config
stored there, and ends with the same parameters and metrics as an uninterrupted
run. It refuses a config.yaml or data files that differ from those the
checkpoint was made with in anything that changes the result, naming the keys;
--allow-change KEY accepts such a change ("data" for the data files).

Ctrl-C (or SIGTERM) writes a checkpoint at the current step and prints the
command that continues the run. Logs and the progress bar go to stderr; stdout
receives only summary.json (on MPI rank 0).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg configs.Config
			var err error
			resume := resumeDir != ""
			switch {
			case resume && (configPath != "" || len(sets) > 0 || outDir != "" || overwrite):
				return fmt.Errorf("--resume uses the config stored in the run directory: do not combine it with --config, --set, --out or --overwrite")
			case !resume && len(allow) > 0:
				return fmt.Errorf("--allow-change applies to --resume only")
			}
			// A key given again takes its last value (a command line extended
			// by appending overrides), but say so: it may be a slip.
			for _, r := range configs.RepeatedSets(sets) {
				fmt.Fprintf(cmd.ErrOrStderr(), "gradwire: warning: --set %s: the last value is used\n", r)
			}
			for _, k := range allow {
				if k != "data" && !slices.Contains(configs.Keys(), k) {
					return fmt.Errorf("--allow-change %s: not a config key (expected a key such as optim.lr, or data for the data files)", k)
				}
			}
			switch {
			case resume:
				outDir = resumeDir
				if cfg, err = configs.Load(filepath.Join(resumeDir, "config.yaml"), nil); err != nil {
					return fmt.Errorf("resume %s: %w", resumeDir, err)
				}
			case configPath == "":
				return fmt.Errorf("--config FILE is required (or --resume DIR); try configs/quickstart.yaml")
			default:
				if cfg, err = configs.Load(configPath, sets); err != nil {
					return err
				}
				if outDir == "" {
					outDir = filepath.Join("runs", cfg.Name+"-"+time.Now().Format("20060102-150405"))
				}
			}
			stderr := cmd.ErrOrStderr()
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						a.Value = slog.StringValue(a.Value.Time().Format("15:04:05"))
					}
					return a
				},
			}))
			if l, _ := dist.DetectLaunch(os.Getenv); l.Rank > 0 {
				// One of several launched processes: rank 0 logs for all, the others print errors only.
				log = slog.New(slog.DiscardHandler)
			}
			log.Info("run", "dir", outDir, "config", strings.TrimSpace(configPath+resumeDir))
			sum, err := train.Run(cmd.Context(), cfg, train.Options{OutDir: outDir, Resume: resume, Overwrite: overwrite,
				AllowChange: allow, Log: log, Stderr: stderr})
			if err != nil {
				return interruptedHint(err, outDir)
			}
			if sum == nil {
				return nil // an MPI rank other than 0: rank 0 prints the job's summary
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(sum)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "run config (YAML)")
	f.StringArrayVar(&sets, "set", nil, "override a config key: --set key=value (repeatable; the last value of a key given twice wins)")
	f.StringVarP(&outDir, "out", "o", "", "run directory (default runs/<config name>-<timestamp>)")
	f.StringVar(&resumeDir, "resume", "", "continue the run in this directory from its newest checkpoint")
	f.BoolVar(&overwrite, "overwrite", false, "replace the run that --out holds (its config, metrics, summary and checkpoints are removed first)")
	f.StringSliceVar(&allow, "allow-change", nil, "with --resume: accept a changed config key (repeatable or comma-separated; \"data\" for the data files)")
	return cmd
}

// interruptedHint turns an interrupted run's error into the command that
// continues it, or says why it cannot be continued.
func interruptedHint(err error, outDir string) error {
	var stopped *train.Interrupted
	switch {
	case errors.As(err, &stopped) && stopped.Checkpoint != "":
		return fmt.Errorf("%w; continue with: gradwire train --resume %s", err, sweep.ShellQuote(outDir))
	case errors.As(err, &stopped):
		return fmt.Errorf("%w; no checkpoint was written (train.checkpoint is false, or the write failed), so the run cannot be continued", err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted before training started; nothing to continue: %w", err)
	}
	return err
}
