package sweep

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/internal/train"
)

// The files Report writes into a sweep's results folder.
const (
	RunsCSV        = "runs.csv"
	TableMD        = "table.md"
	TestMetricPNG  = "test_metric.png"
	AccVsRatioPNG  = "accuracy_vs_compression.png"
	AccVsLinkPNG   = "accuracy_vs_link_bytes.png"
	TrainLossPNG   = "train_loss.png"
	SharpnessPNG   = "sharpness_vs_gap.png"
	LRPNG          = "validation_vs_lr.png"
	charSuffix     = "_char" // the character models' copy of a metric plot in a mixed sweep
	recordFile     = "sweep.yaml"
	failedFile     = "failed.txt" // a failed run's error, written by the sweep
	summaryFile    = "summary.json"
	metricsFile    = "metrics.jsonl"
	seedDirPrefix  = "seed-"
	percentPerUnit = 100
)

// Result is what Report wrote.
type Result struct {
	Table string   // table.md's content
	Files []string // every file written, in the order written
}

// runData is one finished run as read back from its directory.
type runData struct {
	variation string
	seed      int64
	dir       string
	flat      map[string]string // summary.json flattened for runs.csv
	sum       *train.Summary
	epochs    []metricRecord
	steps     []metricRecord
	measures  *train.Measures // measures.json (gradwire measure); nil when absent
}

// metricRecord is the part of a metrics.jsonl line (train.EpochResult or a step
// record) the plots use.
type metricRecord struct {
	Kind         string   `json:"kind"`
	Epoch        int      `json:"epoch"`
	Step         int      `json:"step"`
	Loss         float64  `json:"loss"`       // a step record's loss
	TrainLoss    float64  `json:"train_loss"` // an epoch record's mean over its steps
	TestLoss     float64  `json:"test_loss"`
	TestAccuracy *float64 `json:"test_accuracy"`
}

// group is one variation's finished runs, in seed order.
type group struct {
	name string
	runs []*runData
	// sets are sweep.yaml's overrides of the variation's runs: the sweep's
	// set: followed by the variation's (a later key wins); listed is false
	// for a variation sweep.yaml does not name.
	sets   []string
	listed bool
}

// Report rebuilds runs.csv, table.md and the plots in dir (a sweep's results
// folder) from the files its runs left: runs/<variation>/seed-<k>/summary.json
// and metrics.jsonl. It trains nothing. Problems that do not stop the report
// (unfinished runs, runs not in sweep.yaml) are written to warn.
func Report(dir string, warn io.Writer) (*Result, error) {
	if warn == nil {
		warn = io.Discard
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("report: %s is not a folder: expected a sweep's results folder such as %s/<name>", dir, DefaultResults)
	}
	name := filepath.Base(filepath.Clean(dir))
	rec, err := readRecord(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Name != "" {
		name = rec.Name
	}
	if rec != nil {
		drift, err := recordDrift(rec, dir)
		switch {
		case err != nil:
			fmt.Fprintf(warn, "report: cannot compare %s with the sweep file it names: %v\n", filepath.Join(dir, recordFile), err)
		case drift != "":
			fmt.Fprintf(warn, "report: %s has changed since %s was written (%s); this report follows %s, the last sweep's copy, until the next gradwire sweep --config %s rewrites it\n",
				rec.Source, filepath.Join(dir, recordFile), drift, recordFile, rec.Source)
		}
	}
	groups, missing, failed, err := collect(dir, rec, warn)
	if err != nil {
		return nil, err
	}
	invs, err := readInvocations(dir)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	write := func(file string, data []byte) error {
		path := filepath.Join(dir, file)
		if err := atomicfile.Write(path, data); err != nil {
			return err
		}
		res.Files = append(res.Files, path)
		return nil
	}
	csvBytes, err := runsCSV(groups)
	if err != nil {
		return nil, err
	}
	if err := write(RunsCSV, csvBytes); err != nil {
		return nil, err
	}
	var runWall float64
	copied := copiedRuns(invs)
	for _, g := range groups {
		for _, r := range g.runs {
			if !copied[r.variation+"/seed-"+strconv.FormatInt(r.seed, 10)] {
				runWall += r.sum.WallSeconds
			}
		}
	}
	res.Table = table(name, groups, missing, failed) + provenance(invs, runWall)
	if err := write(TableMD, []byte(res.Table)); err != nil {
		return nil, err
	}
	// Each plot is written as a PNG and an SVG of the same name; a plot that
	// does not apply (no compressed variation) removes an older one.
	writeFigure := func(file string, fig *figure) error {
		svgFile := strings.TrimSuffix(file, ".png") + ".svg"
		if fig == nil {
			for _, f := range []string{file, svgFile} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		}
		if err := write(file, fig.png); err != nil {
			return err
		}
		return write(svgFile, fig.svg)
	}
	// A sweep of classifiers and character models (the foundation sweep)
	// draws each metric plot twice: accuracy and loss per example for the
	// classifiers, loss per character for the others, whose losses would
	// otherwise share an axis or be left out.
	main, char := groups, []group(nil)
	var charFailed []failedRun
	if mixedKinds(groups) {
		main, char, charFailed = splitKinds(groups, failed)
	}
	for _, p := range []struct {
		file    string
		make    func(string, []group, []failedRun) (*figure, error)
		perKind bool
	}{
		{TestMetricPNG, plotTestMetric, true},
		{AccVsRatioPNG, plotMetricVsCompression, true},
		{AccVsLinkPNG, plotMetricVsLinkBytes, true},
		{TrainLossPNG, plotTrainLoss, true},
		{SharpnessPNG, plotSharpnessVsGap, false},
		{LRPNG, plotValidationVsRate, false},
		{AccVsBatchPNG, plotMetricVsBatch, false},
	} {
		gs := groups
		if p.perKind {
			gs = main
		}
		fig, err := p.make(name, gs, failed)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, p.file), err)
		}
		if err := writeFigure(p.file, fig); err != nil {
			return nil, err
		}
		if !p.perKind {
			continue
		}
		charFile := strings.TrimSuffix(p.file, ".png") + charSuffix + ".png"
		fig = nil
		if char != nil {
			if fig, err = p.make(name+" (character models)", char, charFailed); err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(dir, charFile), err)
			}
		}
		if err := writeFigure(charFile, fig); err != nil {
			return nil, err
		}
	}
	scaling, err := scalingPlots(name, groups)
	if err != nil {
		return nil, fmt.Errorf("%s: scaling plots: %w", dir, err)
	}
	for _, file := range slices.Sorted(maps.Keys(scaling)) {
		if err := writeFigure(file, scaling[file]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// collect reads every finished run under dir/runs, grouped by variation in the
// order of sweep.yaml (variations it does not list follow, sorted by name), each
// group's runs by seed. missing lists the runs sweep.yaml expects that have no
// summary.json.
func collect(dir string, rec *Record, warn io.Writer) ([]group, []string, []failedRun, error) {
	found := map[string]map[int64]string{} // variation -> seed -> run directory
	varDirs, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, err
	}
	for _, vd := range varDirs {
		if !vd.IsDir() {
			continue
		}
		seedDirs, err := os.ReadDir(filepath.Join(dir, "runs", vd.Name()))
		if err != nil {
			return nil, nil, nil, err
		}
		for _, sd := range seedDirs {
			path := filepath.Join(dir, "runs", vd.Name(), sd.Name())
			seed, err := strconv.ParseInt(strings.TrimPrefix(sd.Name(), seedDirPrefix), 10, 64)
			if fi, serr := os.Stat(path); serr != nil || !fi.IsDir() || !strings.HasPrefix(sd.Name(), seedDirPrefix) || err != nil {
				continue // not a run directory (os.Stat, not sd.IsDir: a run may be a symbolic link)
			}
			if found[vd.Name()] == nil {
				found[vd.Name()] = map[int64]string{}
			}
			found[vd.Name()][seed] = path
		}
	}

	var order []string
	expected := map[string][]int64{}
	if rec != nil {
		for _, v := range rec.Variations {
			order = append(order, v.Name)
			expected[v.Name] = v.Seeds
		}
	}
	var extra []string
	for v := range found {
		if !slices.Contains(order, v) {
			extra = append(extra, v)
		}
	}
	slices.Sort(extra)
	if rec != nil && len(extra) > 0 {
		fmt.Fprintf(warn, "report: %s lists no variation %s; their runs are reported after the others\n",
			filepath.Join(dir, recordFile), strings.Join(extra, ", "))
	}
	order = append(order, extra...)

	var groups []group
	var missing []string
	var failed []failedRun
	total := 0
	for _, v := range order {
		seeds := slices.Collect(maps.Keys(found[v]))
		for _, s := range expected[v] {
			if !slices.Contains(seeds, s) {
				seeds = append(seeds, s)
			}
		}
		slices.Sort(seeds)
		g := group{name: v}
		if rec != nil {
			if i := slices.IndexFunc(rec.Variations, func(rv RecordVariation) bool { return rv.Name == v }); i >= 0 {
				g.sets, g.listed = slices.Concat(rec.Set, rec.Variations[i].Set), true
			}
		}
		for _, seed := range seeds {
			runDir, ok := found[v][seed]
			if ok {
				if _, err := os.Stat(filepath.Join(runDir, summaryFile)); err == nil {
					r, err := readRun(runDir, v, seed)
					if err != nil {
						return nil, nil, nil, err
					}
					g.runs = append(g.runs, r)
					continue
				}
				if f, ok := readFailure(runDir, v, seed); ok {
					f.sets = g.sets
					failed = append(failed, f)
					continue
				}
			}
			missing = append(missing, fmt.Sprintf("%s seed %d", v, seed))
		}
		total += len(g.runs)
		if len(g.runs) > 0 {
			groups = append(groups, g)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(warn, "report: not finished (no summary.json), left out: %s\n", strings.Join(missing, ", "))
	}
	for _, f := range failed {
		fmt.Fprintf(warn, "report: %s seed %d failed, left out: %s\n", f.variation, f.seed, f.reason)
	}
	if total == 0 {
		if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
			return nil, nil, nil, fmt.Errorf("report: %s is one run's directory (it holds config.yaml): expected a sweep's results folder, the one that holds runs/<variation>/seed-<k>", dir)
		}
		return nil, nil, nil, fmt.Errorf("report: %s holds no finished run (expected runs/<variation>/seed-<k>/summary.json); run gradwire sweep first", dir)
	}
	return groups, missing, failed, nil
}

// readRun reads one run's summary.json and metrics.jsonl.
func readRun(dir, variation string, seed int64) (*runData, error) {
	r := &runData{variation: variation, seed: seed, dir: dir}
	path := filepath.Join(dir, summaryFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep the numbers' text exactly for runs.csv
	var generic any
	damaged := func(what string) error {
		return fmt.Errorf("%s: damaged (%s), expected the JSON object gradwire train writes: restore the file, or delete %s and rerun gradwire sweep to train that run again", path, what, dir)
	}
	if err := dec.Decode(&generic); err != nil {
		return nil, damaged(err.Error())
	}
	if _, ok := generic.(map[string]any); !ok {
		return nil, damaged("not an object")
	}
	r.flat = flattenJSON(generic)
	delete(r.flat, "seed") // the seed column comes first
	if r.sum, err = train.ReadSummary(path); err != nil {
		return nil, err
	}
	if r.measures, err = readMeasures(dir); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, metricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil // plots will lack this run's curves; the table needs only the summary
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m metricRecord
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", f.Name(), line, err)
		}
		switch m.Kind {
		case "epoch":
			r.epochs = append(r.epochs, m)
		case "step":
			r.steps = append(r.steps, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return r, nil
}

// runsCSV is runs.csv: variation, seed, then every flattened summary.json key
// (the union over runs, in sortColumns order); a run without a key leaves it empty.
func runsCSV(groups []group) ([]byte, error) {
	set := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.runs {
			for k := range r.flat {
				set[k] = true
			}
		}
	}
	cols := make([]string, 0, len(set))
	for k := range set {
		cols = append(cols, k)
	}
	sortColumns(cols)
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write(append([]string{"variation", "seed"}, cols...))
	for _, g := range groups {
		for _, r := range g.runs {
			row := []string{r.variation, strconv.FormatInt(r.seed, 10)}
			for _, c := range cols {
				row = append(row, r.flat[c])
			}
			w.Write(row)
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// metric is a column pair of table.md: the final test metric and its difference
// from the dense baseline.
type metric struct {
	header, diffHeader string
	decimals           int
	value              func(*train.Summary) (float64, bool)
}

var (
	accuracyMetric = metric{"test accuracy (%)", "Δ dense (pp)", 2, func(s *train.Summary) (float64, bool) {
		if s.TestAccuracy == nil {
			return 0, false
		}
		return *s.TestAccuracy * percentPerUnit, true
	}}
	// The language model has no accuracy: summary.json's test_loss is its
	// loss on the corpus's test split in nats per character ("test", so that
	// "validation" only ever means the split held out of the training data).
	lossMetric = metric{"test loss (nats/char)", "Δ dense (nats/char)", 3, func(s *train.Summary) (float64, bool) {
		return s.TestLoss, s.TestAccuracy == nil
	}}
)

// The validation split's figures (data.validation), which a recipe is picked
// on instead of the test figures: accuracy, or the loss for runs without one.
// better says whether a is better than b.
type valMetric struct {
	metric
	better func(a, b float64) bool
	unit   string // after the value on the "best on validation" line
}

var (
	valAccuracyMetric = valMetric{metric{"validation accuracy (%)", "", 2, func(s *train.Summary) (float64, bool) {
		if s.ValAccuracy == nil {
			return 0, false
		}
		return *s.ValAccuracy * percentPerUnit, true
	}}, func(a, b float64) bool { return a > b }, "%"}
	valLossMetric = valMetric{metric{"validation loss (nats)", "", 3, func(s *train.Summary) (float64, bool) {
		if s.ValLoss == nil {
			return 0, false
		}
		return *s.ValLoss, true
	}}, func(a, b float64) bool { return a < b }, " nats"}
)

// validationMetric is the validation column table.md shows: for classifiers
// accuracy when a run has it, else the loss when a run has it; for language
// models (no test accuracy) the loss first, which is what they are trained
// and compared on (their next-character accuracy is a side figure). ok is
// false when no run holds a validation split out.
func validationMetric(groups []group) (valMetric, bool) {
	order := []valMetric{valAccuracyMetric, valLossMetric}
	if !classifiers(groups) {
		order = []valMetric{valLossMetric, valAccuracyMetric}
	}
	for _, m := range order {
		if slices.ContainsFunc(groups, func(g group) bool { return len(values(g, m.value)) > 0 }) {
			return m, true
		}
	}
	return valMetric{}, false
}

// bestOnValidation is the line under table.md's table naming the variation
// with the best mean validation figure over its seeds, or every variation
// that ties with it as printed (the line would otherwise name one of them by
// its order in the file), so that a recipe can be picked without looking at
// the test figures.
func bestOnValidation(groups []group, m valMetric) string {
	// As the learning-rate section does, means that print the same tie.
	pick := func(keep func(group) bool) ([]string, float64) {
		var names, shown []string
		found, bestV := false, 0.0
		for _, g := range groups {
			if v := values(g, m.value); keep(g) && len(v) > 0 {
				names, shown = append(names, g.name), append(shown, fixed(mean(v), m.decimals))
				if !found || m.better(mean(v), bestV) {
					found, bestV = true, mean(v)
				}
			}
		}
		var tied []string
		for i, name := range names {
			if shown[i] == fixed(bestV, m.decimals) {
				tied = append(tied, name)
			}
		}
		return tied, bestV
	}
	text := func(names []string, v float64) string {
		value := fixed(v, m.decimals) + m.unit
		if len(names) == 1 {
			return fmt.Sprintf("%s (%s)", names[0], value)
		}
		return fmt.Sprintf("%s and %s tie (%s each)", strings.Join(names[:len(names)-1], ", "), names[len(names)-1], value)
	}
	best, bestV := pick(func(group) bool { return true })
	line := "\nbest on validation: " + text(best, bestV)
	// Dense usually wins; what a sweep of recipes asks is the best compressed one.
	compressed := func(g group) bool {
		return field(g, func(s *train.Summary) string { return s.Compressor }) != "none"
	}
	// Named already when a compressed variation is among the best.
	if c, cv := pick(compressed); len(c) > 0 && !slices.Contains(best, c[0]) {
		line += "; best compressed: " + text(c, cv)
	}
	return line + "\n"
}

// table is table.md: one row per variation, aggregated over its seeds.
func table(name string, groups []group, missing []string, failed []failedRun) string {
	var metrics []metric
	for _, m := range []metric{accuracyMetric, lossMetric} {
		if slices.ContainsFunc(groups, func(g group) bool { return len(values(g, m.value)) > 0 }) {
			metrics = append(metrics, m)
		}
	}
	val, hasVal := validationMetric(groups)
	// A sweep without compression (an optimizer or learning-rate probe) has
	// no dense baseline to differ from and no ratios but 1: those columns go.
	compressed := slices.ContainsFunc(groups, func(g group) bool {
		return field(g, func(s *train.Summary) string { return s.Compressor }) != "none"
	})
	header := []string{"variation", "model", "compressor", "workers", "global batch", "optimizer", "seeds"}
	for _, m := range metrics {
		header = append(header, m.header)
		if compressed {
			header = append(header, m.diffHeader)
		}
	}
	if hasVal {
		header = append(header, val.header)
	}
	if compressed {
		header = append(header, "compression ratio", "steady compression ratio")
	}
	header = append(header, "sent per worker-step (kB)", "busiest link per step (kB)")
	for _, gbps := range speedUpGbps {
		header = append(header, fmt.Sprintf("speed-up at %g Gbit/s", gbps))
	}
	header = append(header, "wall time per run (s)")

	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", name)
	row := func(cells []string) { fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | ")) }
	row(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
		if i >= 3 && header[i] != "optimizer" {
			sep[i] = "--:" // numbers right-aligned
		}
	}
	fmt.Fprintf(&b, "|%s|\n", strings.Join(sep, "|"))
	var wall float64
	runs := 0
	for i, g := range groups {
		seeds := make([]string, len(g.runs))
		for j, r := range g.runs {
			seeds[j] = strconv.FormatInt(r.seed, 10)
			wall += r.sum.WallSeconds
		}
		runs += len(g.runs)
		cells := []string{g.name, field(g, func(s *train.Summary) string { return s.Model }),
			field(g, func(s *train.Summary) string { return s.Compressor }),
			field(g, func(s *train.Summary) string { return strconv.Itoa(s.Workers) }),
			field(g, func(s *train.Summary) string { return strconv.Itoa(s.GlobalBatch) }),
			field(g, func(s *train.Summary) string { return s.Optimizer }),
			strings.Join(seeds, ", ")}
		base := baseline(groups, i)
		for _, m := range metrics {
			v := values(g, m.value)
			cells = append(cells, meanStd(v, m.decimals))
			switch bv := values(groups[max(base, 0)], m.value); {
			case !compressed:
			case base == i && len(v) > 0:
				cells = append(cells, "baseline")
			case base < 0 || len(v) == 0 || len(bv) == 0:
				cells = append(cells, "")
			default:
				cells = append(cells, signed(mean(v)-mean(bv), m.decimals))
			}
		}
		if hasVal {
			cells = append(cells, meanStd(values(g, val.value), val.decimals))
		}
		ratio := values(g, func(s *train.Summary) (float64, bool) { return s.CompressionRatio, true })
		// 0 is a summary written before the steady ratio existed: unknown, not zero.
		steady := values(g, func(s *train.Summary) (float64, bool) { return s.CompressionRatioSteady, s.CompressionRatioSteady > 0 })
		if compressed {
			cells = append(cells, meanStd(ratio, ratioDecimals(ratio)), meanStd(steady, ratioDecimals(steady)))
		}
		for _, f := range []func(*train.Summary) (float64, bool){sentKB, linkKB} {
			v := values(g, f)
			cells = append(cells, meanStd(v, ratioDecimals(v)))
		}
		for _, gbps := range speedUpGbps {
			cells = append(cells, meanStd(values(g, speedUpAt(gbps)), 2))
		}
		cells = append(cells, meanStd(values(g, func(s *train.Summary) (float64, bool) { return s.WallSeconds, s.WallSeconds > 0 }), 0))
		row(cells)
	}
	valNote := ""
	if hasVal {
		b.WriteString(bestOnValidation(groups, val))
		valNote = "Validation accuracy (or loss): the same after the last epoch, on the examples data.validation held out of the training set " +
			"(blank for a run without one); best on validation: the variation with the best mean, or all that tie with it as printed (and the best compressed one, when that is another), by which a recipe is picked without looking at the test figures. "
	}
	compressNote := "No finished run compresses its gradients: no Δ dense or compression ratio columns. "
	if compressed {
		compressNote = "Δ dense: difference of the means from the baseline, the first variation with compressor none and the same model, workers and global batch (blank when there is none, and for layer-parallel runs). " +
			"Compression ratio: bytes of dense float32 gradients over bytes sent, over the whole run; steady: after the compressor's warm-up. "
	}
	b.WriteString("\nMean ± sample standard deviation over the seeds of each variation; a single seed has no ±. " +
		"Test accuracy and test loss are those after the last epoch. " +
		valNote + compressNote +
		"Sent per worker-step: what one worker puts on the wire in a steady step (1 kB = 1000 B). " +
		"Busiest link per step: the bytes that cross one link in a steady step on the configured topology (a ring: (N-1) x the payload for an all-gather, 2(N-1)/N x the buffer for an all-reduce), which is what the time model charges bandwidth for. " +
		"Speed-up at 1 and 10 Gbit/s: the time model's prediction for one machine per worker over one machine, from the measured compute time per step (blank for one worker). " +
		"Wall time per run: the training epochs' wall-clock time on this machine, evaluation excluded (summary.json's wall_seconds, summed over the parts of a resumed run).\n")
	b.WriteString(optimizerBatchPivot(groups, metrics, failed))
	b.WriteString(learningRateTable(groups, failed, metrics))
	b.WriteString(measuresTable(groups))
	b.WriteString(layerParallelTable(groups))
	fmt.Fprintf(&b, "\n%s, %.0f s of training in total (sum of wall_seconds). Rebuilt from the runs' summary.json by `gradwire report`.\n", countRuns(runs), wall)
	if len(failed) > 0 {
		b.WriteString("\nFailed, left out:\n\n")
		for _, f := range failed {
			fmt.Fprintf(&b, "- %s seed %d: %s\n", f.variation, f.seed, f.reason)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\nNot finished, left out: %s.\n", strings.Join(missing, ", "))
	}
	return b.String()
}

// baseline is the index of group i's dense baseline, or -1. Layer-parallel
// runs (train.mode layer_parallel) neither have nor are one: their workers
// are stages, not data-parallel replicas of one step.
func baseline(groups []group, i int) int {
	layerParallel := func(g group) bool {
		return slices.ContainsFunc(g.runs, func(r *runData) bool { return r.sum.LayerParallel != nil })
	}
	if layerParallel(groups[i]) {
		return -1
	}
	key := func(g group) string {
		return field(g, func(s *train.Summary) string {
			return fmt.Sprintf("%s/%d/%d", s.Model, s.Workers, s.GlobalBatch)
		})
	}
	for j, g := range groups {
		if field(g, func(s *train.Summary) string { return s.Compressor }) == "none" && !layerParallel(g) && key(g) == key(groups[i]) {
			return j
		}
	}
	return -1
}

// field is a summary field's value over a group's runs: the value, or the
// distinct values joined with "/" when the seeds disagree.
func field(g group, f func(*train.Summary) string) string {
	var vals []string
	for _, r := range g.runs {
		if v := f(r.sum); !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	return strings.Join(vals, "/")
}

// values collects f over the group's runs where it applies.
func values(g group, f func(*train.Summary) (float64, bool)) []float64 {
	var out []float64
	for _, r := range g.runs {
		if v, ok := f(r.sum); ok {
			out = append(out, v)
		}
	}
	return out
}

// sentKB is what one worker sends per steady step, in kB.
func sentKB(s *train.Summary) (float64, bool) {
	if s.TimeModel == nil {
		return 0, false
	}
	return float64(s.TimeModel.BytesPerWorkerStep) / 1e3, true
}

// linkKB is what crosses the busiest link per steady step, in kB (absent from
// summaries written before it was recorded).
func linkKB(s *train.Summary) (float64, bool) {
	if s.TimeModel == nil || s.TimeModel.LinkBytesPerStep == 0 {
		return 0, false
	}
	return float64(s.TimeModel.LinkBytesPerStep) / 1e3, true
}

// speedUpGbps are the bandwidths of the table's speed-up columns.
var speedUpGbps = []float64{1, 10}

// speedUpAt is the time model's predicted speed-up at gbps Gbit/s.
func speedUpAt(gbps float64) func(s *train.Summary) (float64, bool) {
	return func(s *train.Summary) (float64, bool) {
		if s.TimeModel == nil {
			return 0, false
		}
		for _, p := range s.TimeModel.Predictions {
			if p.Gbps == gbps {
				return p.SpeedUp, true
			}
		}
		return 0, false
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// sampleStd is the standard deviation with Bessel's correction (n-1); 0 for
// fewer than two values.
func sampleStd(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := mean(v)
	var s float64
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)-1))
}

// meanStd formats "mean ± std" with the given decimals, the mean alone for one
// value, and "" for none.
func meanStd(v []float64, decimals int) string {
	switch len(v) {
	case 0:
		return ""
	case 1:
		return fixed(v[0], decimals)
	}
	return fixed(mean(v), decimals) + " ± " + fixed(sampleStd(v), decimals)
}

// fixed formats x with the given decimals, never as "-0.00".
func fixed(x float64, decimals int) string {
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	if strings.Trim(s, "-0.") == "" {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

// signed is fixed with a leading + for positive differences.
func signed(x float64, decimals int) string {
	s := fixed(x, decimals)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// ratioDecimals keeps three significant digits for ratios from 1 to 999.
func ratioDecimals(v []float64) int {
	if len(v) == 0 {
		return 2
	}
	switch m := math.Abs(mean(v)); {
	case m >= 100:
		return 0
	case m >= 10:
		return 1
	}
	return 2
}

// recordDrift compares sweep.yaml with the sweep file it was written from, when
// that file is still there (its path is relative to the working directory of
// the sweep), and describes how they differ ("" when they agree or the file is
// gone; an error when it is there but does not load). The report follows
// sweep.yaml, so a variation added to the file since the sweep last ran would
// otherwise go unmentioned: neither reported nor listed as not finished.
// Runs in dir (finished or not) of the variations that still agree are
// compared with the config the file gives them now, which catches an edited
// base config (the record holds only its path).
func recordDrift(rec *Record, dir string) (string, error) {
	if rec.Source == "" {
		return "", nil
	}
	s, err := Load(filepath.FromSlash(rec.Source))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	now := s.Record()
	var parts []string
	if now.Base != rec.Base || !slices.Equal(now.Set, rec.Set) {
		parts = append(parts, "base config or set: changed")
	}
	old := map[string]RecordVariation{}
	for _, v := range rec.Variations {
		old[v.Name] = v
	}
	var added, changed []string
	for _, v := range now.Variations {
		o, ok := old[v.Name]
		switch {
		case !ok:
			added = append(added, v.Name)
		case !slices.Equal(o.Seeds, v.Seeds) || !slices.Equal(o.Set, v.Set):
			changed = append(changed, v.Name)
		}
		delete(old, v.Name)
	}
	removed := slices.Sorted(maps.Keys(old))
	for _, l := range []struct {
		what  string
		names []string
	}{{"variations added", added}, {"removed", removed}, {"changed", changed}} {
		if len(l.names) > 0 {
			parts = append(parts, l.what+": "+strings.Join(l.names, ", "))
		}
	}
	var stale, broken []string
	for _, r := range s.Runs {
		if slices.Contains(added, r.Variation) || slices.Contains(changed, r.Variation) {
			continue
		}
		diff, _, err := trainedConfigDiff(r, r.Dir(dir))
		switch {
		case err != nil:
			// One damaged run folder does not hide the others' drift.
			broken = append(broken, fmt.Sprintf("%s/seed-%d (%s)", r.Variation, r.Seed, strings.ReplaceAll(err.Error(), "\n", "; ")))
		case len(diff) > 0:
			more := ""
			if len(diff) > 1 {
				more = fmt.Sprintf(" and %d more", len(diff)-1)
			}
			stale = append(stale, fmt.Sprintf("%s/seed-%d (%s%s)", r.Variation, r.Seed, diff[0], more))
		}
	}
	if len(stale) > 0 {
		parts = append(parts, "runs trained with another config than the file gives them now: "+strings.Join(stale, ", "))
	}
	if len(broken) > 0 {
		parts = append(parts, "runs whose config.yaml does not load: "+strings.Join(broken, ", "))
	}
	return strings.Join(parts, "; "), nil
}

// mixedKinds reports whether the sweep has both classifier variations (a test
// accuracy) and character-model ones (a test loss in nats per character).
func mixedKinds(groups []group) bool {
	return classifiers(groups) && slices.ContainsFunc(groups, func(g group) bool { return !classifiers([]group{g}) })
}

// splitKinds returns the groups twice, once with the character models' runs
// taken out and once with the classifiers' taken out, so that a variation keeps
// its index (its colour and marker) in both plots, and the failed runs of the
// character variations (a variation none of whose runs finished has no kind
// and stays with the classifiers' plot).
func splitKinds(groups []group, failed []failedRun) (cls, char []group, charFailed []failedRun) {
	charNames := map[string]bool{}
	for _, g := range groups {
		c, o := g, g
		if classifiers([]group{g}) {
			o.runs = nil
		} else {
			c.runs = nil
			charNames[g.name] = true
		}
		cls, char = append(cls, c), append(char, o)
	}
	for _, f := range failed {
		if charNames[f.variation] {
			charFailed = append(charFailed, f)
		}
	}
	return cls, char, charFailed
}
