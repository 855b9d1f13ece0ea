package sweep

import (
	"fmt"
	"strings"

	"github.com/gradwire/gradwire/internal/train"
)

// layerParallelTable is table.md's section for sweeps with train.mode
// layer_parallel runs: per variation, the method and schedule, accuracy,
// measured wall times (per parallel round and per serial epoch), the bytes the
// method moves and the time model's predictions. Empty when no run is layer-
// parallel.
func layerParallelTable(groups []group) string {
	any := false
	for _, g := range groups {
		for _, r := range g.runs {
			any = any || r.sum.LayerParallel != nil
		}
	}
	if !any {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Layer-parallel training\n\n")
	b.WriteString("| variation | mode | stages (blocks) | serial epochs | test accuracy (%) | wall time (s) | s per parallel round | s per serial epoch | initial pass (s) | aux MB per round | params MB sent | predicted round speed-up | predicted speed-up |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, g := range groups {
		acc := values(g, func(s *train.Summary) (float64, bool) {
			if s.TestAccuracy == nil {
				return 0, false
			}
			return 100 * *s.TestAccuracy, true
		})
		wall := values(g, func(s *train.Summary) (float64, bool) { return s.WallSeconds, true })
		lp := func(f func(l *train.LayerParallelSummary, s *train.Summary) (float64, bool)) []float64 {
			return values(g, func(s *train.Summary) (float64, bool) {
				if s.LayerParallel == nil {
					return 0, false
				}
				return f(s.LayerParallel, s)
			})
		}
		mode := field(g, func(s *train.Summary) string {
			if s.LayerParallel == nil {
				return "serial"
			}
			return s.LayerParallel.Method
		})
		stages := field(g, func(s *train.Summary) string {
			if s.LayerParallel == nil {
				return fmt.Sprintf("1 (%d workers)", s.Workers)
			}
			var bl []string
			for _, n := range s.LayerParallel.StageBlocks {
				bl = append(bl, fmt.Sprint(n))
			}
			return fmt.Sprintf("%d (%s)", s.LayerParallel.Stages, strings.Join(bl, "+"))
		})
		serial := field(g, func(s *train.Summary) string {
			if s.LayerParallel == nil {
				return fmt.Sprint(s.Epochs)
			}
			return fmt.Sprint(s.LayerParallel.SerialEpochs)
		})
		perRound := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) {
			return l.ParallelSeconds / float64(max(1, l.ParallelRounds)), l.ParallelRounds > 0
		})
		perSerial := values(g, func(s *train.Summary) (float64, bool) {
			if s.LayerParallel == nil {
				return s.WallSeconds / float64(max(1, s.Epochs)), true
			}
			l := s.LayerParallel
			return l.SerialSeconds / float64(max(1, l.SerialEpochs)), l.SerialEpochs > 0
		})
		init := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) { return l.InitSeconds, true })
		aux := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) {
			return float64(l.AuxBytesPerRound) / 1e6, true
		})
		params := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) {
			return float64(l.ParamBytes) / 1e6, true
		})
		pr := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) {
			return l.PredictedRoundSpeedup, true
		})
		ps := lp(func(l *train.LayerParallelSummary, _ *train.Summary) (float64, bool) { return l.PredictedSpeedup, true })
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", g.name, mode, stages, serial,
			meanStd(acc, 2), meanStd(wall, 0), meanStd(perRound, 1), meanStd(perSerial, 1), meanStd(init, 1),
			meanStd(aux, 1), meanStd(params, 1), meanStd(pr, 2), meanStd(ps, 2))
	}
	b.WriteString("\nWall time: the training's wall-clock time (parallel rounds, initial passes and serial epochs; evaluation excluded). " +
		"s per parallel round: a round's sub-problems, u-step and exchanges; s per serial epoch: a serial run's epoch, or a hybrid's serial epochs " +
		"(data-parallel over the stages' workers). Aux MB per round: the auxiliary variables and boundary gradients a round sends, 2 N b_k summed over the boundaries; " +
		"params MB sent: the stage parameters gathered for evaluation after each round and before serial phases. Predicted: layerpar.TimeModel from each " +
		"stage's compute timed alone on this machine, one device per stage at network.bandwidth_gbps: a round against a serial epoch, and the whole schedule " +
		"(initial passes and serial epochs included) against serial training.\n")
	return b.String()
}
