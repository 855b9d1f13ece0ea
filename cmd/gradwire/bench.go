package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
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
		engine  bool
		scens   []string
		profile string
	)
	cmd := &cobra.Command{
		Use:   "bench [--model NAME]... [--batch N] [--steps N] [--warmup N] [--trials N] [--format table|csv|json] [--engine [--scenario W/R/COMPRESSOR]...]",
		Short: "Time one training step of each model, or full data-parallel steps (--engine)",
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
this binary was built with (gonum, or openblas with -tags openblas). The
machine (CPU, its x86 family and model, logical CPUs, memory, the vector
instructions the kernels use) and GOMAXPROCS head the table and are columns
of csv and json. Results
go to stdout, progress to stderr; GOMAXPROCS sets the cores used (the fast ops
split each batch over that many goroutines).

experiments/bench/run.sh runs this in several processes per model, interleaved
with PyTorch on the same models and shapes.

With --engine, each model is timed in full data-parallel training steps of a
global batch (--batch, default 256, split over the workers) through the
trainer's own path: dist.Engine over an in-process group, one
compress.Exchange per worker, the optimizer step on replica 0 and the copy to
the other replicas (SGD, momentum 0.9, weight decay 5e-4; DGC and PowerSGD in
their steady state from the first step). The data fill is not timed: every
step reuses one random batch. Each --scenario is WORKERS/REPLICAS/COMPRESSOR,
or WORKERS/REPLICAS/COMPRESSOR/unfused to keep the workers' steps one by one
where the trainer computes a replica's workers in one pass (models without
BatchNorm: one fused batch with compress.name none or powersgd, one grouped
pass with each worker's own gradient for the other compressors on mlp,
lenet5, lstm and charlstm; /unfused is what dist.passes one_by_one trains);
the default is 1/1/none, 8/2/none, 8/2/dgc and 8/2/powersgd. Each replica's
fast ops split their work over GOMAXPROCS/replicas goroutines, as in training.
The scenarios are built up front, warmed up in turn, then timed in --trials
rounds, each round a block of --steps steps of every scenario in rotating
order. Reported per scenario: how each replica computed its workers (passes:
fused, grouped, or one by one where the engine cannot fuse, e.g. workers not
divided evenly over the replicas, or with /unfused), best and median trial,
spread, the ratios to the first scenario, the overhead of a compressor over the scenario with the same
workers and replicas and compress.name none (not unfused), the engine's compute time per
worker (forward and backward of one worker batch), the process's CPU time per
step (all threads: steadier than the step time on a machine shared with other
jobs), and heap allocations per step.`,
		Args: noArgs,
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
			if err := listOnce("--model", names); err != nil {
				return err
			}
			if opsPath != "" && !slices.Contains(models.OpsNames(), opsPath) {
				return fmt.Errorf("--ops %q: expected one of %s", opsPath, strings.Join(models.OpsNames(), ", "))
			}
			if profile != "" {
				stop, err := startCPUProfile(profile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if engine {
				watchesContext.Store(true) // the engine's trials stop between steps
				if !cmd.Flags().Changed("batch") {
					batch = 256
				}
				return runEngineBench(cmd, names, scens, batch, steps, warmup, trials, format, opsPath)
			}
			if len(scens) > 0 {
				return fmt.Errorf("--scenario %s: only with --engine", scens[0])
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
	f.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the whole command to this file (go tool pprof -top FILE)")
	f.BoolVar(&engine, "engine", false, "time full data-parallel training steps (engine, exchange, optimizer) in several scenarios")
	f.StringSliceVar(&scens, "scenario", nil, "with --engine: WORKERS/REPLICAS/COMPRESSOR[/unfused], repeatable; the first is the baseline of the ratios (default 1/1/none, 8/2/none, 8/2/dgc, 8/2/powersgd)")
	return cmd
}

// writeJSONTo returns the function that writes a value to w as indented JSON.
func writeJSONTo[T any](w io.Writer) func(T) error {
	return func(v T) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
}

// benchWriter returns the function that writes results in the given format.
func benchWriter(format string, w io.Writer) (func([]bench.Result) error, error) {
	switch format {
	case "json":
		return writeJSONTo[[]bench.Result](w), nil
	case "csv":
		return func(rs []bench.Result) error {
			cw := csv.NewWriter(w)
			cw.Write([]string{"model", "batch", "params", "warmup", "steps", "trials", "best_seconds", "median_seconds", "spread",
				"best_samples_per_second", "samples_per_second", "best_gflop_per_second", "gflop_per_second",
				"alloc_bytes_per_step", "allocs_per_step", "ops", "blas", "blas_core", "gomaxprocs", "machine", "trial_seconds"})
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
					r.Ops, r.BLAS, r.BLASCore, strconv.Itoa(r.GOMAXPROCS), r.Machine, strings.Join(trials, ";")})
			}
			cw.Flush()
			return cw.Error()
		}, nil
	case "table":
		return func(rs []bench.Result) error {
			if len(rs) > 0 {
				fmt.Fprintf(w, "%s; GOMAXPROCS %d\n\n", rs[0].Machine, rs[0].GOMAXPROCS)
			}
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

// startCPUProfile starts a CPU profile into path; stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runEngineBench is `gradwire bench --engine`.
func runEngineBench(cmd *cobra.Command, names, scens []string, batch, steps, warmup, trials int, format, opsPath string) error {
	scenarios := bench.DefaultScenarios
	if len(scens) > 0 {
		scenarios = nil
		for _, s := range scens {
			sc, err := bench.ParseScenario(s)
			if err != nil {
				return fmt.Errorf("--scenario: %w", err)
			}
			scenarios = append(scenarios, sc)
		}
	}
	var cases []bench.EngineCase
	for _, n := range names {
		c, err := bench.NewCase(n, batch, models.Config{Ops: opsPath})
		if err != nil {
			return fmt.Errorf("--model %s: %w", n, err)
		}
		for _, s := range scenarios {
			if batch%s.Workers != 0 {
				return fmt.Errorf("--batch %d: the global batch must split evenly over the %d workers of scenario %v", batch, s.Workers, s)
			}
		}
		cases = append(cases, bench.EngineCase{Case: c, Scenarios: scenarios})
	}
	write, err := engineWriter(format, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	var results []bench.EngineResult
	for _, c := range cases {
		fmt.Fprintf(cmd.ErrOrStderr(), "bench --engine: %s global batch %d ...\n", c.Model, c.Batch)
		r, err := bench.MeasureEngine(cmd.Context(), c, steps, warmup, trials)
		if err != nil {
			return fmt.Errorf("bench %s: %w", c.Model, err)
		}
		results = append(results, r)
	}
	return write(results)
}

// engineWriter returns the function that writes engine results in the given format.
func engineWriter(format string, w io.Writer) (func([]bench.EngineResult) error, error) {
	pct := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(100**p, 'f', 1, 64)
	}
	switch format {
	case "json":
		return writeJSONTo[[]bench.EngineResult](w), nil
	case "csv":
		return func(rs []bench.EngineResult) error {
			cw := csv.NewWriter(w)
			cw.Write([]string{"model", "global_batch", "params", "scenario", "passes", "workers", "replicas", "compress", "worker_batch", "op_workers",
				"warmup", "steps", "trials", "best_seconds", "median_seconds", "spread", "best_ratio", "median_ratio",
				"best_overhead_percent", "median_overhead_percent", "compute_seconds", "best_cpu_seconds", "median_cpu_seconds",
				"alloc_bytes_per_step", "allocs_per_step",
				"ops", "blas", "gomaxprocs", "machine", "trial_seconds"})
			for _, r := range rs {
				for _, s := range r.Scenarios {
					trials := make([]string, len(s.TrialSeconds))
					for i, t := range s.TrialSeconds {
						trials[i] = strconv.FormatFloat(t, 'g', 6, 64)
					}
					g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
					cw.Write([]string{r.Model, strconv.Itoa(r.GlobalBatch), strconv.Itoa(r.Params), s.Scenario, s.Passes, strconv.Itoa(s.Workers),
						strconv.Itoa(s.Replicas), s.Compress, strconv.Itoa(s.WorkerBatch), strconv.Itoa(s.OpWorkers),
						strconv.Itoa(r.Warmup), strconv.Itoa(r.Steps), strconv.Itoa(r.Trials), g(s.BestSeconds), g(s.MedianSeconds),
						strconv.FormatFloat(s.Spread, 'f', 3, 64), strconv.FormatFloat(s.BestRatio, 'f', 3, 64), strconv.FormatFloat(s.MedianRatio, 'f', 3, 64),
						pct(s.BestOverhead), pct(s.MedianOverhead), g(s.ComputeSeconds), g(s.BestCPUSeconds), g(s.MedianCPUSeconds),
						strconv.FormatFloat(s.AllocBytesPerStep, 'f', 0, 64), strconv.FormatFloat(s.AllocsPerStep, 'f', 0, 64),
						r.Ops, r.BLAS, strconv.Itoa(r.GOMAXPROCS), r.Machine, strings.Join(trials, ";")})
				}
			}
			cw.Flush()
			return cw.Error()
		}, nil
	case "table":
		return func(rs []bench.EngineResult) error {
			if len(rs) > 0 {
				fmt.Fprintf(w, "%s; GOMAXPROCS %d; ops %s; blas %s; %d trials x %d steps after %d warm-up steps\n\n",
					rs[0].Machine, rs[0].GOMAXPROCS, rs[0].Ops, rs[0].BLAS, rs[0].Trials, rs[0].Steps, rs[0].Warmup)
			}
			fmt.Fprintln(w, "| model | global batch | scenario | passes | worker batch | op workers | best step (ms) | median step (ms) | spread | best / first | median / first | compressor overhead, best (%) | compressor overhead, median (%) | compute per worker (ms) | CPU per step, median (ms) | CPU / first | allocated per step (MB) | allocations per step |")
			fmt.Fprintln(w, "|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
			for _, r := range rs {
				for _, s := range r.Scenarios {
					cpuRatio := s.MedianCPUSeconds / r.Scenarios[0].MedianCPUSeconds
					if r.Scenarios[0].MedianCPUSeconds == 0 {
						cpuRatio = 0
					}
					fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %d | %.2f | %.2f | %.2fx | %.3f | %.3f | %s | %s | %.2f | %.2f | %.3f | %.2f | %.0f |\n",
						r.Model, r.GlobalBatch, s.Scenario, s.Passes, s.WorkerBatch, s.OpWorkers, s.BestSeconds*1e3, s.MedianSeconds*1e3, s.Spread,
						s.BestRatio, s.MedianRatio, pct(s.BestOverhead), pct(s.MedianOverhead), s.ComputeSeconds*1e3,
						s.MedianCPUSeconds*1e3, cpuRatio, s.AllocBytesPerStep/1e6, s.AllocsPerStep)
				}
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("--format %q: expected table, csv or json", format)
}
