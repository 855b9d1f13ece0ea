package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/layerpar"
	"github.com/gradwire/gradwire/internal/train"
	"github.com/gradwire/gradwire/models"
)

func newTimeModelLayerParCmd() *cobra.Command {
	var (
		model          string
		shape          []int
		classes        int
		stages         []int
		examples       int
		perExample     float64
		downsample     int
		fp16           bool
		gbps           []float64
		latency        float64
		rounds, serial int
		cycles         int
	)
	cmd := &cobra.Command{
		Use:   "layerpar --serial-seconds-per-example S [--model NAME] [--stages LIST] [--examples N] [--gbps LIST] [--rounds R] [--serial-epochs S]",
		Short: "Predict layer-parallel training's round time and speed-up over serial training for K stages",
		Long: `Split the CIFAR ResNet --model into each of --stages K stages (internal/layerpar:
stage k holds basic blocks [k*nb/K, (k+1)*nb/K)), give each stage the serial
training time per example (--serial-seconds-per-example, measured: 1 / a serial
run's samples_per_second) in proportion to its training FLOPs, and predict with
layerpar.TimeModel, for every --gbps: the auxiliary-variable bytes a round sends
(the boundary maps after the --downsample filter, 2 or 4 bytes a value), the
stage parameters gathered per round, one round's time and its speed-up over a
serial epoch, and the speed-up of a schedule of --rounds parallel rounds and
--serial-epochs serial epochs in --cycles cycles. Devices are assumed equal and
the links between neighbouring stages to work at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !(perExample > 0) || math.IsInf(perExample, 1) {
				return fmt.Errorf("--serial-seconds-per-example: %v: must be a finite number > 0 (1 / a serial run's samples_per_second)", perExample)
			}
			if len(shape) != 3 || slices.Min(shape) < 1 {
				return fmt.Errorf("--input: %v: must be one example's shape C,H,W, each at least 1", shape)
			}
			if classes < 2 {
				return fmt.Errorf("--classes: %d: must be at least 2", classes)
			}
			if !(latency >= 0) || math.IsInf(latency, 1) {
				return fmt.Errorf("--latency-us: %v: must be a finite latency >= 0", latency)
			}
			if rounds < 1 {
				return fmt.Errorf("--rounds: %d: must be at least 1", rounds)
			}
			if serial < 0 {
				return fmt.Errorf("--serial-epochs: %d: must be at least 0", serial)
			}
			if cycles < 1 || cycles > rounds {
				return fmt.Errorf("--cycles: %d: must be in [1, --rounds %d] (each cycle takes at least one parallel round)", cycles, rounds)
			}
			for _, err := range []error{listOnce("--stages", stages), listOnce("--gbps", gbps)} {
				if err != nil {
					return err
				}
			}
			if examples < 1 {
				return fmt.Errorf("--examples: %d: must be at least 1", examples)
			}
			if downsample < 1 || downsample > layerpar.MaxDownsample {
				return fmt.Errorf("--downsample: %d: must be in [1, %d]", downsample, layerpar.MaxDownsample)
			}
			for _, g := range gbps {
				if !(g > 0) || math.IsInf(g, 0) {
					return fmt.Errorf("--gbps: %v: every bandwidth must be a finite number > 0", g)
				}
			}
			in := models.Input{Shape: shape, Classes: classes, YLen: 1}
			// The stages are built at batch 1 to count their FLOPs and parameters.
			if err := train.CheckModelMemory(fmt.Sprintf("--input: %v: %s on one such example", shape, model), "expected a smaller input",
				models.Config{Name: model}, in, 1, 1); err != nil {
				return err
			}
			blocks, err := models.ResNetBlocks(model, in)
			if err != nil {
				return fmt.Errorf("--model: %w", err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s on %v, %d examples, serial %.3g ms/example, filter %d, %d bytes/value, %d rounds + %d serial epochs\n\n",
				model, shape, examples, perExample*1e3, downsample, map[bool]int{true: 2, false: 4}[fp16], rounds, serial)
			fmt.Fprintln(&b, "| K | blocks | stage ms/example | aux MB/round | params MB/round | Gbit/s | round s | serial epoch s | round speed-up | schedule speed-up |")
			fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|")
			for _, K := range stages {
				los, his, err := models.StageBlocks(len(blocks), K)
				if err != nil {
					return fmt.Errorf("--stages: %w", err)
				}
				var flops []int64
				var total int64
				tm := layerpar.TimeModel{Examples: examples}
				for k := range K {
					st, err := models.NewResNetStage(models.Config{Name: model}, in, k, K, 1)
					if err != nil {
						return err
					}
					flops = append(flops, st.TrainFLOPs())
					total += st.TrainFLOPs()
					var pb int64
					for _, p := range st.Params() {
						pb += 4 * int64(len(p.Value))
					}
					for _, buf := range st.Buffers() {
						pb += 4 * int64(len(buf.Value))
					}
					tm.StageParamBytes = append(tm.StageParamBytes, pb)
					if k < K-1 {
						blk := blocks[his[k]-1]
						s := min(downsample, blk.OutH, blk.OutW)
						f := layerpar.Filter{C: blk.Cout, H: blk.OutH, W: blk.OutW, S: s}
						vb := int64(4)
						if fp16 {
							vb = 2
						}
						tm.BoundaryBytes = append(tm.BoundaryBytes, int64(f.Size())*vb)
					}
				}
				var ms []string
				var sizes []string
				for k, f := range flops {
					tm.StageSeconds = append(tm.StageSeconds, perExample*float64(f)/float64(total))
					ms = append(ms, fmt.Sprintf("%.3g", tm.StageSeconds[k]*1e3))
					sizes = append(sizes, fmt.Sprint(his[k]-los[k]))
				}
				for _, g := range gbps {
					net := dist.Network{BandwidthGbps: g, LatencyUs: latency}
					fmt.Fprintf(&b, "| %d | %s | %s | %.1f | %.2f | %g | %.2f | %.2f | %.2f | %.2f |\n", K, strings.Join(sizes, "+"),
						strings.Join(ms, ", "), float64(tm.AuxBytesPerRound())/1e6, float64(tm.ParamBytesPerRound())/1e6, g,
						tm.Round(net), tm.SerialEpoch(), tm.RoundSpeedup(net), tm.Speedup(net, rounds, serial, cycles))
				}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), b.String())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "resnet20", "CIFAR ResNet: resnet20, resnet32 or resnet56")
	f.IntSliceVar(&shape, "input", []int{1, 28, 28}, "one example's shape C,H,W")
	f.IntVar(&classes, "classes", 10, "number of classes")
	f.IntSliceVar(&stages, "stages", []int{2, 3, 4}, "numbers of stages K")
	f.IntVar(&examples, "examples", 60000, "training examples per epoch")
	f.Float64Var(&perExample, "serial-seconds-per-example", 0, "serial training's seconds per example (required)")
	f.IntVar(&downsample, "downsample", 2, "the auxiliary variables' filter factor (1 = none)")
	f.BoolVar(&fp16, "fp16", true, "auxiliary variables in half precision")
	f.Float64SliceVar(&gbps, "gbps", []float64{1, 10, 100}, "link bandwidths, Gbit/s")
	f.Float64Var(&latency, "latency-us", 50, "link latency, microseconds")
	f.IntVar(&rounds, "rounds", 6, "parallel rounds of the schedule")
	f.IntVar(&serial, "serial-epochs", 2, "serial epochs of the schedule")
	f.IntVar(&cycles, "cycles", 1, "cycles of the schedule (each starts with a forward pass)")
	return cmd
}
