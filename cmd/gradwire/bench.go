package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/bench"
	"github.com/gradwire/gradwire/models"
)

func newBenchCmd() *cobra.Command {
	var (
		names   []string
		batch   int
		steps   int
		warmup  int
		trials  int
		format  string
		opsPath string
	)
	cmd := &cobra.Command{
		Use:   "bench [--model NAME]... [--batch N] [--steps N] [--warmup N] [--trials N] [--format table|csv|json]",
		Short: "Time one training step of each model",
		Long: `Time one training step (forward, backward and an SGD update) of each model
on a fixed random batch, in this process, one model after the other:

  mlp       784-512-256-10 on 1x28x28 images
  lenet5    LeNet-5 on 1x28x28 images
  resnet20  ResNet-20 on 3x32x32 images
  lstm      one LSTM layer of 128 units over 28 rows of 28 pixels
  charlstm  embedding 64, two LSTM layers of 128, on windows of 64 characters
            of a 65-symbol vocabulary (--batch counts windows)

For each model: --warmup untimed steps, then --trials timed blocks of --steps
steps each, every step timed on its own. A trial's figure is its median step.
Reported: the best (fastest) trial's median step, the median over trials, and
the spread (slowest trial over fastest: 1.00 when the trials agree, well above
1 when the machine was busy or the process changed speed between blocks);
samples/s and GFLOP/s at the best and at the median trial (multiply-adds of
the convolution, linear and LSTM layers counted twice, forward plus two
backward products: 3x the forward FLOPs); Go heap bytes and allocations per
timed step. json and csv also give each trial's median in run order (csv:
trial_seconds, separated by ";"); json also the fastest single step. The BLAS back-end is the one
this binary was built with (gonum, or openblas with -tags openblas). Results
go to stdout, progress to stderr; GOMAXPROCS sets the cores used (the fast ops
split each batch over that many goroutines).

experiments/bench/run.sh runs this in several processes per model, interleaved
with PyTorch on the same models and shapes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct {
				name     string
				val, min int
			}{{"steps", steps, 1}, {"trials", trials, 1}, {"warmup", warmup, 0}} {
				if f.val < f.min {
					return fmt.Errorf("--%s %d: expected >= %d", f.name, f.val, f.min)
				}
			}
			if len(names) == 0 {
				names = bench.Models
			}
			var cases []bench.Case
			for _, n := range names {
				c, err := bench.NewCase(n, batch, models.Config{Ops: opsPath})
				if err != nil {
					return fmt.Errorf("--model %s: %w", n, err)
				}
				cases = append(cases, c)
			}
			write, err := benchWriter(format, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var results []bench.Result
			for _, c := range cases {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: %s batch %d ...\n", c.Model, c.Batch)
				r, err := bench.Measure(c, steps, warmup, trials)
				if err != nil {
					return fmt.Errorf("bench %s: %w", c.Model, err)
				}
				results = append(results, r)
			}
			return write(results)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&names, "model", nil, "models to time, repeatable or comma-separated (default all: "+strings.Join(bench.Models, ", ")+")")
	f.IntVar(&batch, "batch", 64, "batch size (charlstm: windows of 64 characters)")
	f.IntVar(&steps, "steps", 10, "timed steps per trial")
	f.IntVar(&warmup, "warmup", 20, "untimed steps before the first trial")
	f.IntVar(&trials, "trials", 5, "timed blocks of --steps steps per model, in this process")
	f.StringVar(&format, "format", "table", "output: table (Markdown), csv or json")
	f.StringVar(&opsPath, "ops", "", "layer implementation, as model.ops: fast (default) or gorgonia")
	return cmd
}

// benchWriter returns the function that writes results in the given format.
func benchWriter(format string, w io.Writer) (func([]bench.Result) error, error) {
	switch format {
	case "json":
		return func(rs []bench.Result) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rs)
		}, nil
	case "csv":
		return func(rs []bench.Result) error {
			cw := csv.NewWriter(w)
			cw.Write([]string{"model", "batch", "params", "warmup", "steps", "trials", "best_seconds", "median_seconds", "spread",
				"best_samples_per_second", "samples_per_second", "best_gflop_per_second", "gflop_per_second",
				"alloc_bytes_per_step", "allocs_per_step", "ops", "blas", "blas_core", "trial_seconds"})
			for _, r := range rs {
				trials := make([]string, len(r.TrialSeconds))
				for i, t := range r.TrialSeconds {
					trials[i] = strconv.FormatFloat(t, 'g', 6, 64)
				}
				cw.Write([]string{r.Model, strconv.Itoa(r.Batch), strconv.Itoa(r.Params), strconv.Itoa(r.Warmup), strconv.Itoa(r.Steps), strconv.Itoa(r.Trials),
					strconv.FormatFloat(r.BestSeconds, 'g', 6, 64), strconv.FormatFloat(r.MedianSeconds, 'g', 6, 64), strconv.FormatFloat(r.Spread, 'f', 3, 64),
					strconv.FormatFloat(r.BestSamplesPerSecond, 'f', 1, 64), strconv.FormatFloat(r.SamplesPerSecond, 'f', 1, 64),
					strconv.FormatFloat(r.BestGFLOPs, 'f', 2, 64), strconv.FormatFloat(r.GFLOPs, 'f', 2, 64),
					strconv.FormatFloat(r.AllocBytesPerStep, 'f', 0, 64), strconv.FormatFloat(r.AllocsPerStep, 'f', 0, 64),
					r.Ops, r.BLAS, r.BLASCore, strings.Join(trials, ";")})
			}
			cw.Flush()
			return cw.Error()
		}, nil
	case "table":
		return func(rs []bench.Result) error {
			fmt.Fprintln(w, "| model | batch | params | trials x steps | best step (ms) | median step (ms) | spread | samples/s, best | samples/s, median | GFLOP/s, best | allocated per step (MB) | allocations per step | ops | blas |")
			fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|")
			for _, r := range rs {
				blas := r.BLAS
				if r.BLASCore != "" {
					blas += " " + r.BLASCore
				}
				fmt.Fprintf(w, "| %s | %d | %d | %d x %d | %.2f | %.2f | %.2fx | %.1f | %.1f | %.2f | %.2f | %.0f | %s | %s |\n", r.Model, r.Batch, r.Params,
					r.Trials, r.Steps, r.BestSeconds*1e3, r.MedianSeconds*1e3, r.Spread, r.BestSamplesPerSecond, r.SamplesPerSecond,
					r.BestGFLOPs, r.AllocBytesPerStep/1e6, r.AllocsPerStep, r.Ops, blas)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("--format %q: expected table, csv or json", format)
}
