package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/train"
)

func newTrainCmd() *cobra.Command {
	var (
		configPath string
		sets       []string
		outDir     string
		resumeDir  string
	)
	cmd := &cobra.Command{
		Use:   "train --config FILE [--set key=value]... [--out DIR] | train --resume DIR",
		Short: "Train a model from a YAML config",
		Long: `Train a model from a YAML config file (see configs/*.yaml and the README's config
reference). Every key can be overridden with --set key=value (repeatable), for
example --set optim.lr=0.1 --set model.hidden=300,100.

The run directory (--out, default runs/<config name>-<timestamp>) receives
config.yaml (the resolved config), metrics.jsonl (logged steps and one record per
epoch), checkpoints/step-NNNNNNNN.ckpt after every epoch, and summary.json at the end.
--resume DIR continues the run in DIR from its last checkpoint with the config
stored there, and ends with the same metrics as an uninterrupted run.

Logs and the progress bar go to stderr; stdout receives only summary.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg configs.Config
			var err error
			resume := resumeDir != ""
			switch {
			case resume && (configPath != "" || len(sets) > 0 || outDir != ""):
				return fmt.Errorf("--resume uses the config stored in the run directory: do not combine it with --config, --set or --out")
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
			log.Info("run", "dir", outDir, "config", strings.TrimSpace(configPath+resumeDir))
			sum, err := train.Run(cmd.Context(), cfg, train.Options{OutDir: outDir, Resume: resume, Log: log, Stderr: stderr})
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("interrupted; continue from the last completed epoch with: gradwire train --resume %s", outDir)
			}
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(sum)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "run config (YAML)")
	f.StringArrayVar(&sets, "set", nil, "override a config key: --set key=value (repeatable)")
	f.StringVarP(&outDir, "out", "o", "", "run directory (default runs/<config name>-<timestamp>)")
	f.StringVar(&resumeDir, "resume", "", "continue the run in this directory from its last checkpoint")
	return cmd
}
