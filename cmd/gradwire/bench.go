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
		format  string
		opsPath string
	)
	cmd := &cobra.Command{
		Use:   "bench [--model NAME]... [--batch N] [--steps N] [--warmup N] [--format table|csv|json]",
		Short: "Time one training step of each model",
		Long: `Time one training step (forward, backward and an SGD update) of each model
on a fixed random batch, in this process, one model after the other:

  mlp       784-512-256-10 on 1x28x28 images
  lenet5    LeNet-5 on 1x28x28 images
  resnet20  ResNet-20 on 3x32x32 images
  lstm      one LSTM layer of 128 units over 28 rows of 28 pixels
  charlstm  embedding 64, two LSTM layers of 128, on windows of 64 characters
            of a 65-symbol vocabulary (--batch counts windows)

For each: the median seconds per step over --steps timed steps after --warmup
untimed ones, samples/s at the median, GFLOP/s (multiply-adds of the convolution,
linear and LSTM layers counted twice, forward plus two backward products: 3x the
forward FLOPs), and Go heap bytes and allocations per step. The BLAS back-end is
the one this binary was built with (gonum, or openblas with -tags openblas).
Results go to stdout, progress to stderr; GOMAXPROCS sets the cores used (the
fast ops split each batch over that many goroutines).

experiments/bench/run.sh runs this next to PyTorch on the same models and shapes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
				r, err := bench.Measure(c, steps, warmup)
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
	f.IntVar(&steps, "steps", 20, "timed steps per model")
	f.IntVar(&warmup, "warmup", 3, "untimed steps before timing")
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
			cw.Write([]string{"model", "batch", "params", "steps", "median_seconds", "samples_per_second", "gflop_per_second", "alloc_bytes_per_step", "allocs_per_step", "ops", "blas", "blas_core"})
			for _, r := range rs {
				cw.Write([]string{r.Model, strconv.Itoa(r.Batch), strconv.Itoa(r.Params), strconv.Itoa(r.Steps),
					strconv.FormatFloat(r.MedianSeconds, 'g', 6, 64), strconv.FormatFloat(r.SamplesPerSecond, 'f', 1, 64),
					strconv.FormatFloat(r.GFLOPs, 'f', 2, 64), strconv.FormatFloat(r.AllocBytesPerStep, 'f', 0, 64),
					strconv.FormatFloat(r.AllocsPerStep, 'f', 0, 64), r.Ops, r.BLAS, r.BLASCore})
			}
			cw.Flush()
			return cw.Error()
		}, nil
	case "table":
		return func(rs []bench.Result) error {
			fmt.Fprintln(w, "| model | batch | params | median step (ms) | samples/s | GFLOP/s | allocated per step (MB) | allocations per step | ops | blas |")
			fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|---|---|")
			for _, r := range rs {
				blas := r.BLAS
				if r.BLASCore != "" {
					blas += " " + r.BLASCore
				}
				fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.1f | %.2f | %.2f | %.0f | %s | %s |\n", r.Model, r.Batch, r.Params,
					r.MedianSeconds*1e3, r.SamplesPerSecond, r.GFLOPs, r.AllocBytesPerStep/1e6, r.AllocsPerStep, r.Ops, blas)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("--format %q: expected table, csv or json", format)
}
