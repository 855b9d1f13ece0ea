package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/internal/train"
)

// optimizerBatchPivot is the large-batch comparison's table: the test metric with
// one row per optimizer and one column per global batch, plus each optimizer's
// state memory. It is made when the sweep varies exactly those two things:
// one model, one compressor, at least two optimizers and two global batches,
// and one variation per (row, batch) (see pivotRow). Otherwise it is "".
func optimizerBatchPivot(groups []group, metrics []metric, failed []failedRun) string {
	if len(groups) == 0 || len(metrics) != 1 {
		return ""
	}
	m := metrics[0]
	str := func(f func(*train.Summary) string) []string {
		var out []string
		for _, g := range groups {
			for _, v := range strings.Split(field(g, f), "/") {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		return out
	}
	models := str(func(s *train.Summary) string { return s.Model })
	comps := str(func(s *train.Summary) string { return s.Compressor })
	opts := str(func(s *train.Summary) string { return s.Optimizer })
	batchNames := str(func(s *train.Summary) string { return strconv.Itoa(s.GlobalBatch) })
	if len(models) != 1 || len(comps) != 1 || len(opts) < 2 || len(batchNames) < 2 {
		return ""
	}
	batches := make([]int, len(batchNames))
	for i, b := range batchNames {
		batches[i], _ = strconv.Atoi(b)
	}
	slices.Sort(batches)
	// A row is an optimizer, or where the variations' names end in -b<batch>
	// the name without it, so that two recipes of one optimizer (rates scaled
	// from a small batch, rates tuned at the large one) get a row each.
	var rows []string
	cell := map[string]*group{}
	for i := range groups {
		g := &groups[i]
		opt := field(*g, func(s *train.Summary) string { return s.Optimizer })
		b := field(*g, func(s *train.Summary) string { return strconv.Itoa(s.GlobalBatch) })
		row := pivotRow(g.name, opt, b)
		key := row + "@" + b
		if strings.Contains(opt+b, "/") || cell[key] != nil {
			return "" // a variation mixes optimizers or batches, or two share a cell
		}
		cell[key] = g
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s by optimizer and global batch\n\n", strings.ToUpper(m.header[:1])+m.header[1:])
	header := []string{"optimizer"}
	for _, gb := range batches {
		header = append(header, fmt.Sprintf("batch %d", gb))
	}
	header = append(header, "state bytes per parameter")
	fmt.Fprintf(&b, "| %s |\n|---|%s--:|\n", strings.Join(header, " | "), strings.Repeat("--:|", len(batches)))
	for _, label := range rows {
		row := []string{label}
		var state []float64
		for _, gb := range batches {
			g := cell[label+"@"+strconv.Itoa(gb)]
			if g == nil {
				mark := "—"
				if slices.ContainsFunc(failed, func(f failedRun) bool {
					return pivotRow(f.variation, f.optimizer, strconv.Itoa(f.globalBatch)) == label && f.globalBatch == gb
				}) {
					mark = "failed"
				}
				row = append(row, mark)
				continue
			}
			text := meanStd(values(*g, m.value), m.decimals)
			// Beside a larger batch, its difference from the row's smallest
			// batch: the large-batch marks are about that gap.
			if first := cell[label+"@"+strconv.Itoa(batches[0])]; first != nil && gb != batches[0] {
				text += fmt.Sprintf(" (%+.*f)", m.decimals, mean(values(*g, m.value))-mean(values(*first, m.value)))
			}
			row = append(row, text)
			state = append(state, values(*g, func(s *train.Summary) (float64, bool) {
				return s.OptimizerStateBytesPerParam, true
			})...)
		}
		// The state per parameter does not depend on the batch; the mean hides
		// nothing but shows which optimizers keep one tensor of state and which two.
		row = append(row, fixed(mean(state), 2))
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(&b, "\n(±d) beside a batch above %d: its mean's difference from the same row's mean at batch %d. ", batches[0], batches[0])
	b.WriteString("failed: the run ended with an error (see Failed below); —: not run. " +
		"State bytes per parameter: the optimizer's state (momentum, moments) over the number of parameters, from summary.json.\n")
	return b.String()
}

// pivotRow is the pivot row of a variation: its name without a trailing
// -b<batch> when it has one, else its optimizer.
func pivotRow(name, optimizer, batch string) string {
	if stem, ok := strings.CutSuffix(name, "-b"+batch); ok && stem != "" {
		return stem
	}
	return optimizer
}
