package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/internal/train"
)

// batchGrid is a large-batch comparison laid out by recipe and global batch:
// a row per optimizer (or recipe, see pivotRow), a column per global batch
// (of finished and of failed runs, so that a batch where every run failed
// keeps its column), the finished variation in each cell, and the cells
// where runs failed.
type batchGrid struct {
	rows    []string
	batches []int // ascending
	cell    map[string]*group
	failed  map[string]bool // row@batch where a run failed
}

func cellKey(row string, batch int) string { return row + "@" + strconv.Itoa(batch) }

// newBatchGrid lays the sweep out by recipe and global batch when it varies
// just those: one model, one compressor, at least two global batches, and one
// variation per (row, batch); nil otherwise.
func newBatchGrid(groups []group, failed []failedRun) *batchGrid {
	if len(groups) == 0 {
		return nil
	}
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
	if len(models) != 1 || len(comps) != 1 {
		return nil
	}
	bg := &batchGrid{cell: map[string]*group{}, failed: map[string]bool{}}
	addRow := func(row string) {
		if !slices.Contains(bg.rows, row) {
			bg.rows = append(bg.rows, row)
		}
	}
	addBatch := func(b int) {
		if !slices.Contains(bg.batches, b) {
			bg.batches = append(bg.batches, b)
		}
	}
	for i := range groups {
		g := &groups[i]
		opt := field(*g, func(s *train.Summary) string { return s.Optimizer })
		b := field(*g, func(s *train.Summary) string { return strconv.Itoa(s.GlobalBatch) })
		batch, err := strconv.Atoi(b)
		if err != nil {
			return nil // a variation mixes batches
		}
		row := pivotRow(g.name, opt, b)
		key := cellKey(row, batch)
		if strings.Contains(opt, "/") || bg.cell[key] != nil {
			return nil // a variation mixes optimizers, or two share a cell
		}
		bg.cell[key] = g
		addRow(row)
		addBatch(batch)
	}
	for _, f := range failed {
		if f.optimizer == "" || f.globalBatch <= 0 {
			continue // its config did not load: nowhere to put it
		}
		row := pivotRow(f.variation, f.optimizer, strconv.Itoa(f.globalBatch))
		bg.failed[cellKey(row, f.globalBatch)] = true
		addRow(row)
		addBatch(f.globalBatch)
	}
	if len(bg.batches) < 2 {
		return nil
	}
	slices.Sort(bg.batches)
	return bg
}

// optimizerBatchPivot is the large-batch comparison's table: the test metric with
// one row per optimizer and one column per global batch, plus each optimizer's
// state memory. It is made when the sweep varies just those (see newBatchGrid);
// otherwise it is "".
func optimizerBatchPivot(groups []group, metrics []metric, failed []failedRun) string {
	if len(metrics) != 1 {
		return ""
	}
	m := metrics[0]
	bg := newBatchGrid(groups, failed)
	if bg == nil {
		return ""
	}
	rows, batches, cell := bg.rows, bg.batches, bg.cell

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
			g := cell[cellKey(label, gb)]
			if g == nil {
				mark := "—"
				if bg.failed[cellKey(label, gb)] {
					mark = "failed"
				}
				row = append(row, mark)
				continue
			}
			text := meanStd(values(*g, m.value), m.decimals)
			// Beside a larger batch, its difference from the row's smallest
			// batch: the large-batch marks are about that gap.
			if first := cell[cellKey(label, batches[0])]; first != nil && gb != batches[0] {
				text += fmt.Sprintf(" (%+.*f)", m.decimals, mean(values(*g, m.value))-mean(values(*first, m.value)))
			}
			row = append(row, text)
			state = append(state, values(*g, func(s *train.Summary) (float64, bool) {
				return s.OptimizerStateBytesPerParam, true
			})...)
		}
		// The state per parameter does not depend on the batch; the mean hides
		// nothing but shows which optimizers keep one tensor of state and which two.
		stateText := "—" // every run of the row failed
		if len(state) > 0 {
			stateText = fixed(mean(state), 2)
		}
		row = append(row, stateText)
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(&b, "\n(±d) beside a batch above %d: its mean's difference from the same row's mean at batch %d. ", batches[0], batches[0])
	b.WriteString("failed: the run ended with an error (see Failed below); —: not run. " +
		"State bytes per parameter: the optimizer's state (momentum, moments) over the number of parameters, from summary.json.\n")
	return b.String()
}

// pivotRow is the pivot row of a variation: its name without its -b<batch>
// part when it has one (lars-b128 and lars-b8192 are the row lars,
// lars-b128-adapt the row lars-adapt), else its optimizer.
func pivotRow(name, optimizer, batch string) string {
	parts := strings.Split(name, "-")
	if i := slices.Index(parts, "b"+batch); i > 0 {
		return strings.Join(slices.Delete(parts, i, i+1), "-")
	}
	return optimizer
}
