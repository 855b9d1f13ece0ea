package sweep

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/datatest"
	"github.com/gradwire/gradwire/internal/train"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tinyBase is a run config that trains in a fraction of a second: a one-layer
// mlp of 8 units, 2 epochs of 2 steps, 2 workers on one replica.
const tinyBase = `model:
  name: mlp
  hidden: [8]
data:
  batch_size: 8
train:
  epochs: 2
  max_steps: 2
  log_every: 1
  eval_limit: 16
dist:
  workers: 2
  replicas: 1
`

// tinySweep writes the fake data set, a base config and a sweep file of 2
// variations x 2 seeds into a temporary folder and returns the sweep file's path.
func tinySweep(t *testing.T, extra string) string {
	t.Helper()
	root := t.TempDir()
	datatest.WriteFakeFashion(t, filepath.Join(root, "data"), 64, 16)
	writeFile(t, filepath.Join(root, "configs", "tiny.yaml"), tinyBase)
	path := filepath.Join(root, "experiments", "tiny.yaml")
	writeFile(t, path, fmt.Sprintf(`base: ../configs/tiny.yaml
set: [data.dir=%s]
seeds: [1, 2]
variations:
  - name: dense
    set: [compress.name=none]
  - name: topk
    set: [compress.name=topk, compress.density=0.1, compress.min_size=0%s]
`, filepath.Join(root, "data"), extra))
	return path
}

func executeSweep(t *testing.T, path, results string) string {
	t.Helper()
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	if err := Execute(context.Background(), s, Options{Results: results, Progress: &progress, Command: "gradwire sweep --config " + path}); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	return progress.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSweepRunsSkipsResumesAndReports is the whole life of a tiny sweep: the
// runs land in runs/<variation>/seed-<k>/, a rerun skips them, a run cut after
// its first checkpoint resumes, and the report is rebuilt byte for byte from the
// run outputs.
func TestSweepRunsSkipsResumesAndReports(t *testing.T) {
	path := tinySweep(t, "")
	results := t.TempDir()
	dir := filepath.Join(results, "tiny")

	out := executeSweep(t, path, results)
	for i, run := range []string{"dense seed 1", "dense seed 2", "topk seed 1", "topk seed 2"} {
		for _, want := range []string{fmt.Sprintf("[%d/4] %s: running", i+1, run), fmt.Sprintf("[%d/4] %s: done in ", i+1, run)} {
			if !strings.Contains(out, want) {
				t.Errorf("progress lacks %q:\n%s", want, out)
			}
		}
	}
	if !strings.Contains(out, "test_accuracy 0.") {
		t.Errorf("progress lines do not give the test accuracy:\n%s", out)
	}
	// Every run but the last is followed by the time left; the last has none.
	for i, run := range []string{"dense seed 1", "dense seed 2", "topk seed 1"} {
		if !regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("[%d/4] %s: done in ", i+1, run)) + `.*; about \S+ left \(ETA \d{4}-\d\d-\d\d \d\d:\d\d UTC\)\n`).MatchString(out) {
			t.Errorf("progress gives no time left after %s:\n%s", run, out)
		}
	}
	if strings.Contains(out[strings.Index(out, "[4/4] topk seed 2: done"):], "left") {
		t.Errorf("time left after the last run:\n%s", out)
	}
	for _, v := range []string{"dense", "topk"} {
		for _, seed := range []string{"seed-1", "seed-2"} {
			for _, f := range []string{"summary.json", "config.yaml", "metrics.jsonl", "train.log", "checkpoints/step-00000004.ckpt"} {
				if _, err := os.Stat(filepath.Join(dir, "runs", v, seed, f)); err != nil {
					t.Errorf("run output missing: %v", err)
				}
			}
		}
	}
	if log := readFile(t, filepath.Join(dir, "runs", "topk", "seed-2", "train.log")); !strings.Contains(log, "epoch=2") {
		t.Errorf("train.log does not hold the training's log:\n%s", log)
	}
	sum, err := train.ReadSummary(filepath.Join(dir, "runs", "topk", "seed-2", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Seed != 2 || sum.Compressor != "topk" || sum.Workers != 2 {
		t.Errorf("topk seed 2 ran with seed %d, compressor %s, %d workers", sum.Seed, sum.Compressor, sum.Workers)
	}

	res, err := Report(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// runs.csv, table.md and four plots, each as PNG and SVG (two workers:
	// the link-bytes plot is drawn).
	if len(res.Files) != 10 {
		t.Errorf("report wrote %v", res.Files)
	}
	csv1, table1 := readFile(t, filepath.Join(dir, RunsCSV)), readFile(t, filepath.Join(dir, TableMD))

	// A rerun trains nothing.
	before := readFile(t, filepath.Join(dir, "runs", "dense", "seed-1", "summary.json"))
	out = executeSweep(t, path, results)
	if n := strings.Count(out, "skipped (done)"); n != 4 || strings.Contains(out, "running") {
		t.Errorf("rerun: %d runs skipped, want 4:\n%s", n, out)
	}
	if after := readFile(t, filepath.Join(dir, "runs", "dense", "seed-1", "summary.json")); after != before {
		t.Error("rerun rewrote a finished run's summary.json")
	}
	// Each invocation is recorded: the first trained 4 runs, the rerun none.
	invs, err := readInvocations(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 2 || invs[0].Trained != 4 || invs[0].Skipped != 0 || invs[1].Trained != 0 || invs[1].Skipped != 4 ||
		invs[0].Command != "gradwire sweep --config "+path || invs[0].Machine == "" || invs[0].WallSeconds <= 0 ||
		invs[0].Running || invs[1].Running {
		t.Errorf("invocations.jsonl: %+v", invs)
	}

	// A run killed during its second epoch: checkpoint of epoch 1, no summary.
	cut := filepath.Join(dir, "runs", "topk", "seed-2")
	for _, f := range []string{"summary.json", "checkpoints/step-00000004.ckpt"} {
		if err := os.Remove(filepath.Join(cut, f)); err != nil {
			t.Fatal(err)
		}
	}
	out = executeSweep(t, path, results)
	if !strings.Contains(out, "[4/4] topk seed 2: resumed from epoch 1") || strings.Count(out, "skipped (done)") != 3 {
		t.Errorf("the cut run was not resumed from epoch 1:\n%s", out)
	}
	resumed, err := train.ReadSummary(filepath.Join(cut, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if resumed.TestLoss != sum.TestLoss || resumed.BytesSent != sum.BytesSent || resumed.Steps != sum.Steps {
		t.Errorf("resumed run ends differently: test loss %v, bytes %d, steps %d; uninterrupted %v, %d, %d",
			resumed.TestLoss, resumed.BytesSent, resumed.Steps, sum.TestLoss, sum.BytesSent, sum.Steps)
	}

	// The report depends on the run files only: rebuilding it twice from the
	// same runs gives the same bytes (the resumed run changed its wall time, so
	// compare two rebuilds of the current state).
	for _, f := range []string{RunsCSV, TableMD} {
		os.Remove(filepath.Join(dir, f))
	}
	if _, err := Report(dir, nil); err != nil {
		t.Fatal(err)
	}
	csv2, table2 := readFile(t, filepath.Join(dir, RunsCSV)), readFile(t, filepath.Join(dir, TableMD))
	if _, err := Report(dir, nil); err != nil {
		t.Fatal(err)
	}
	if csv3, table3 := readFile(t, filepath.Join(dir, RunsCSV)), readFile(t, filepath.Join(dir, TableMD)); csv3 != csv2 || table3 != table2 {
		t.Errorf("two reports of the same runs differ:\n%s\n%s", table2, table3)
	}
	// Only the resumed run's time fields may differ from the first report.
	if strings.Count(csv1, "\n") != strings.Count(csv2, "\n") || strings.Split(csv1, "\n")[0] != strings.Split(csv2, "\n")[0] {
		t.Errorf("runs.csv changed shape after the resume:\n%s\n%s", csv1, csv2)
	}
	_ = table1

	checkTableAgainstSummaries(t, dir, table2)
	checkRunsCSV(t, dir, csv2)
	for _, f := range []string{TestMetricPNG, AccVsRatioPNG, AccVsLinkPNG, TrainLossPNG} {
		checkPNG(t, filepath.Join(dir, f))
		checkSVG(t, filepath.Join(dir, strings.TrimSuffix(f, ".png")+".svg"))
	}
}

// checkTableAgainstSummaries recomputes mean and sample std of the test
// accuracy from the summaries and finds them in table.md.
func checkTableAgainstSummaries(t *testing.T, dir, table string) {
	t.Helper()
	accs := map[string][]float64{}
	for _, v := range []string{"dense", "topk"} {
		for _, seed := range []string{"seed-1", "seed-2"} {
			s, err := train.ReadSummary(filepath.Join(dir, "runs", v, seed, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			accs[v] = append(accs[v], *s.TestAccuracy*100)
		}
	}
	for _, v := range []string{"dense", "topk"} {
		a, b := accs[v][0], accs[v][1]
		m := (a + b) / 2
		sd := math.Sqrt(((a-m)*(a-m) + (b-m)*(b-m)) / 1) // n-1 = 1
		want := fmt.Sprintf("| %s | mlp | %s | 2 | 16 | sgd | 1, 2 | %s ± %s | ", v, map[string]string{"dense": "none", "topk": "topk"}[v],
			fixed(m, 2), fixed(sd, 2))
		if !strings.Contains(table, want) {
			t.Errorf("table.md lacks %q:\n%s", want, table)
		}
	}
	dm, tm := (accs["dense"][0]+accs["dense"][1])/2, (accs["topk"][0]+accs["topk"][1])/2
	if want := " | " + signed(tm-dm, 2) + " | "; !strings.Contains(table, "| topk |") || !strings.Contains(table, want) {
		t.Errorf("table.md lacks the topk difference %q:\n%s", want, table)
	}
	if !strings.Contains(table, " | baseline | 1.00 ± 0.00 | 1.00 ± 0.00 | ") {
		t.Errorf("dense row is not its own baseline with ratio 1:\n%s", table)
	}
}

func checkRunsCSV(t *testing.T, dir, text string) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("runs.csv has %d rows, want a header and 4 runs", len(rows))
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, c := range []string{"variation", "seed", "test_accuracy", "compression_ratio_by_kind.linear", "time_model.predictions.1gbps.speedup", "time_model.predictions.100gbps.comm_seconds"} {
		if _, ok := col[c]; !ok {
			t.Errorf("runs.csv has no column %s: %v", c, rows[0])
		}
	}
	if col["variation"] != 0 || col["seed"] != 1 || col["time_model.predictions.1gbps.speedup"] > col["time_model.predictions.10gbps.speedup"] {
		t.Errorf("runs.csv column order: %v", rows[0])
	}
	var order []string
	for _, r := range rows[1:] {
		order = append(order, r[0]+"/"+r[1])
	}
	if got := strings.Join(order, " "); got != "dense/1 dense/2 topk/1 topk/2" {
		t.Errorf("runs.csv rows in order %s", got)
	}
	s, err := train.ReadSummary(filepath.Join(dir, "runs", "topk", "seed-1", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rows[3][col["bytes_sent"]], fmt.Sprint(s.BytesSent); got != want {
		t.Errorf("runs.csv topk seed 1 bytes_sent %s, summary.json %s", got, want)
	}
}

// checkSVG fails unless path is an SVG document that xml parses.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", path, root)
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 672 || b.Dy() != 480 {
		t.Errorf("%s is %dx%d, want at least 672 wide (7 in at 96 dpi plus the legend) and 480 high", path, b.Dx(), b.Dy())
	}
}

// TestChangedVariationIsAnError: a run trained under other overrides must not
// be skipped as if it were done.
func TestChangedVariationIsAnError(t *testing.T) {
	path := tinySweep(t, "")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	// A stand-in for a finished run: its config.yaml is all the check reads.
	other, err := Load(tinySweepSame(t, path, "compress.density=0.1", "compress.density=0.2"))
	if err != nil {
		t.Fatal(err)
	}
	run := other.Runs[2] // topk seed 1
	if err := os.MkdirAll(run.Dir(s.Dir(results)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run.Config.WriteYAML(filepath.Join(run.Dir(s.Dir(results)), "config.yaml")); err != nil {
		t.Fatal(err)
	}
	err = Execute(context.Background(), s, Options{Results: results})
	if err == nil || !strings.Contains(err.Error(), "compress.density: 0.2 in the run, 0.1 in the sweep") || !strings.Contains(err.Error(), "topk seed 1") {
		t.Fatalf("changed config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(results, "tiny", "runs", "dense")); err == nil {
		t.Error("a run started although another run's directory was inconsistent")
	}
}

// tinySweepSame writes a copy of the sweep file at path with old replaced by new.
func tinySweepSame(t *testing.T, path, old, new string) string {
	t.Helper()
	dst := filepath.Join(filepath.Dir(path), "tiny-changed.yaml")
	writeFile(t, dst, strings.Replace(readFile(t, path), old, new, 1))
	return dst
}

func TestDryRunAndInterrupt(t *testing.T) {
	path := tinySweep(t, "")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	var out bytes.Buffer
	if err := DryRun(&out, s, results, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("dry run printed %d lines, want a header and 4 runs:\n%s", len(lines), out.String())
	}
	want := "[3/4] topk seed 1 (new): gradwire train --config " + s.BasePath + " --set data.dir="
	if !strings.HasPrefix(lines[3], want) || !strings.Contains(lines[3], "--set compress.density=0.1 --set compress.min_size=0 --set seed=1 --set train.progress=false --out "+filepath.Join(results, "tiny", "runs", "topk", "seed-1")) {
		t.Errorf("dry run line %q", lines[3])
	}
	if _, err := os.Stat(filepath.Join(results, "tiny")); err == nil {
		t.Error("dry run wrote the results folder")
	}
	if strings.Contains(out.String(), "# to train") {
		t.Errorf("dry run gave an estimate with no finished run to time it by:\n%s", out.String())
	}
	// A run another process holds is shown as training now, with its holder.
	release, _, err := train.ClaimForCopy(filepath.Join(results, "tiny", "runs", "topk", "seed-1"))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := DryRun(&out, s, results, nil); err != nil {
		t.Fatal(err)
	}
	release()
	if want := fmt.Sprintf("[3/4] topk seed 1 (new; training now, PID %d on host ", os.Getpid()); !strings.Contains(out.String(), want) {
		t.Errorf("dry run does not show %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "dense seed 1 (new; training") {
		t.Errorf("dry run shows a run no process holds as training:\n%s", out.String())
	}
	out.Reset()
	if err := DryRun(&out, s, results, nil); err != nil || strings.Contains(out.String(), "training now") {
		t.Errorf("dry run after the holder let go: %v\n%s", err, out.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Execute(ctx, s, Options{Results: results})
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), path) {
		t.Fatalf("cancelled sweep: %v", err)
	}
}

func TestBadSweepFiles(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "base.yaml"), tinyBase)
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"unknown-key", "base: base.yaml\nvariation:\n  - name: a\n", []string{`:2: unknown key "variation"`, "valid keys: name, base, set, seeds, variations"}},
		{"unknown-variation-key", "base: base.yaml\nvariations:\n  - name: a\n    sets: [optim.lr=0.1]\n", []string{`:4: variation "a": unknown key "sets"`}},
		{"duplicate", "base: base.yaml\nvariations:\n  - name: a\n  - name: b\n  - name: a\n", []string{`variation "a": name: appears more than once`}},
		{"bad-value", "base: base.yaml\nseeds: [1, 2]\nvariations:\n  - name: ok\n  - name: slow\n    set: [optim.lr=fast]\n",
			[]string{`variation "slow" (seeds 1, 2): optim.lr: "fast": expected a number`}},
		{"bad-key", "base: base.yaml\nvariations:\n  - name: typo\n    set: [optim.learning_rate=0.1]\n  - name: neg\n    set: [optim.lr=-1]\n",
			[]string{`variation "typo" (seed 1): unknown key "optim.learning_rate"`, `did you mean "optim.lr"`, `variation "neg" (seed 1): optim.lr: -1`}},
		{"seed-in-set", "base: base.yaml\nvariations:\n  - name: a\n    set: [seed=3]\n", []string{`variation "a": set: "seed=3": the seed comes from seeds`}},
		{"set-twice", "base: base.yaml\nset: [optim.lr=0.1, optim.lr=0.2]\nvariations:\n  - name: a\n    set: [train.epochs=1, Train.Epochs=2, train.epochs=3]\n",
			[]string{`set: optim.lr given 2 times ("0.1", "0.2"): give each key once`, `variation "a": set: train.epochs given 3 times ("1", "2", "3")`}},
		{"no-base", "variations:\n  - name: a\n", []string{"base: missing"}},
		{"missing-base", "base: nowhere.yaml\nvariations:\n  - name: a\n", []string{"nowhere.yaml"}},
		{"bad-name", "base: base.yaml\nvariations:\n  - name: a/b\n", []string{`variation "a/b": name: expected a letter or digit, then letters`}},
		{"dot-name", "base: base.yaml\nvariations:\n  - name: \"..\"\n", []string{`variation "..": name: expected a letter or digit, then letters`}},
		{"bad-type", "base: base.yaml\nseeds: [one]\nvariations:\n  - name: a\n", []string{"line 2", "one"}},
		{"duplicate-seed", "base: base.yaml\nvariations:\n  - name: a\n    seeds: [1, 1]\n", []string{`variation "a": seeds: 1 appears more than once`}},
		{"no-variations", "base: base.yaml\n", []string{"variations: missing"}},
		{"bad-reuse", "base: base.yaml\nreuse: [nowhere]\nvariations:\n  - name: a\n", []string{`reuse: "nowhere"`, "not a folder", "expected another sweep's results folder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(root, tc.name+".yaml")
			writeFile(t, path, tc.text)
			_, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "configs", "base.yaml"), tinyBase)
	path := filepath.Join(root, "exp", "my-sweep.yml")
	writeFile(t, path, "base: ../configs/base.yaml\nset: [optim.lr=0.2]\nvariations:\n  - name: a\n  - name: b\n    set: [optim.lr=0.3]\n    seeds: [5, 3]\n")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "my-sweep" || s.BasePath != filepath.Join(root, "configs", "base.yaml") {
		t.Errorf("name %q, base %q", s.Name, s.BasePath)
	}
	var got []string
	for _, r := range s.Runs {
		got = append(got, fmt.Sprintf("%s/%d/%g/%d", r.Variation, r.Seed, r.Config.Optim.LR, r.Config.Seed))
	}
	if strings.Join(got, " ") != "a/1/0.2/1 b/5/0.3/5 b/3/0.3/3" {
		t.Errorf("runs %v", got)
	}
	if r := s.Runs[1]; r.Config.Train.Progress || r.Index != 2 {
		t.Errorf("run %+v: progress bar on or index wrong", r)
	}
	// The variation's optim.lr replaces the common one in the run's overrides
	// (a train command line refuses a key given twice).
	if got := strings.Join(s.Runs[1].Sets, " "); got != "optim.lr=0.3 seed=5 train.progress=false" {
		t.Errorf("run 2's overrides %q", got)
	}
	if got := strings.Join(s.Runs[0].Sets, " "); got != "optim.lr=0.2 seed=1 train.progress=false" {
		t.Errorf("run 1's overrides %q", got)
	}
}

// TestFailedRunDoesNotStopTheSweep: the topk runs diverge (a learning rate of
// 1e30 makes the loss NaN); the dense runs still complete and the sweep reports
// the failures.
// TestRunHeldByAnotherProcess: a run another gradwire process holds (a second
// sweep over the same results) is skipped: nothing is written into its folder,
// no failure is recorded, and the other runs train.
func TestRunHeldByAnotherProcess(t *testing.T) {
	s, err := Load(tinySweep(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	held := filepath.Join(results, "tiny", "runs", "topk", "seed-1")
	release, _, err := train.ClaimForCopy(held)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var progress bytes.Buffer
	if err := Execute(context.Background(), s, Options{Results: results, Progress: &progress, Command: "gradwire sweep"}); err != nil {
		t.Fatalf("sweep: %v\n%s", err, progress.String())
	}
	if want := "topk seed 1: skipped (being trained by another gradwire process, PID "; !strings.Contains(progress.String(), want) {
		t.Errorf("progress lacks %q:\n%s", want, progress.String())
	}
	entries, err := os.ReadDir(held)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("the sweep wrote %s into the folder another process holds", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(results, "tiny", "runs", "topk", "seed-2", "summary.json")); err != nil {
		t.Errorf("the run after the held one did not train: %v", err)
	}
	invs, err := readInvocations(filepath.Join(results, "tiny"))
	if err != nil || len(invs) != 1 || invs[0].Trained != 3 || invs[0].Failed != 0 {
		t.Errorf("invocation record %+v (%v), want 3 runs trained and none failed", invs, err)
	}
}

func TestFailedRunDoesNotStopTheSweep(t *testing.T) {
	path := tinySweep(t, ", optim.lr=1e30")
	results := t.TempDir()
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	err = Execute(context.Background(), s, Options{Results: results, Progress: &progress})
	var failed *FailedRuns
	if !errors.As(err, &failed) || len(failed.Errs) != 2 || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("error %v, expected the two topk runs to fail with a NaN loss:\n%s", err, progress.String())
	}
	for _, seed := range []string{"seed-1", "seed-2"} {
		if _, err := os.Stat(filepath.Join(results, "tiny", "runs", "dense", seed, "summary.json")); err != nil {
			t.Errorf("dense run did not complete after a failed run: %v", err)
		}
	}
	if !strings.Contains(progress.String(), "topk seed 2: failed after") {
		t.Errorf("progress does not report the failure:\n%s", progress.String())
	}
	// The report names the failed runs with their error instead of dropping them.
	res, err := Report(filepath.Join(results, "tiny"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Table, "Failed, left out:") || !strings.Contains(res.Table, "- topk seed 2: ") ||
		!strings.Contains(res.Table, "NaN") || strings.Contains(res.Table, "Not finished") {
		t.Errorf("table.md does not name the failed runs:\n%s", res.Table)
	}
	// A dry run and the rerun say that the failed runs are retried, and why
	// they failed before (failed.txt's first clause).
	raw, err := os.ReadFile(filepath.Join(results, "tiny", "runs", "topk", "seed-2", "failed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	kind, _, _ := strings.Cut(string(raw), ": ")
	var dry bytes.Buffer
	if err := DryRun(&dry, s, results, nil); err != nil {
		t.Fatal(err)
	}
	if want := "topk seed 2 (new, a retry: failed before (" + kind + ")): "; !strings.Contains(dry.String(), want) ||
		!strings.Contains(dry.String(), "dense seed 2 (done)") {
		t.Errorf("dry run does not show %q:\n%s", want, dry.String())
	}
	// With finished runs to time it by, the dry run ends with the estimate the
	// sweep would print for the runs left.
	if lines := strings.Split(strings.TrimSpace(dry.String()), "\n"); !strings.HasPrefix(lines[len(lines)-1], "# to train: about ") ||
		!strings.Contains(lines[len(lines)-1], " left (ETA ") {
		t.Errorf("dry run does not end with the time estimate:\n%s", dry.String())
	}
	progress.Reset()
	if err := Execute(context.Background(), s, Options{Results: results, Progress: &progress, Only: []string{"topk"}}); err == nil {
		t.Fatal("the retried runs did not fail again")
	}
	if want := "topk seed 1: running, a retry: failed before (" + kind + ")"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress does not show %q:\n%s", want, progress.String())
	}
}

// TestFailureKindValidUTF8: a long failed.txt without a clause break is cut
// to a bounded kind without splitting a rune, for the table and progress line.
func TestFailureKindValidUTF8(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, failedFile), "x"+strings.Repeat("€", 100)+"\n")
	f, ok := readFailure(dir, "v", 1)
	if !ok {
		t.Fatal("failed.txt not read")
	}
	if k := f.kind(); !utf8.ValidString(k) || !utf8.ValidString(f.reason) || len(k) > maxKind+3 || !strings.HasSuffix(k, "...") {
		t.Errorf("kind %q, reason %q", k, f.reason)
	}
}

// TestFailureHostileFile: escape sequences and carriage returns in failed.txt
// do not reach the progress line or table.md, and the reason quoted from a
// huge file without a line break stays bounded.
func TestFailureHostileFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, failedFile), "diverged\x1b[2J\r: loss\tNaN\n"+strings.Repeat("y", 1<<20))
	f, ok := readFailure(dir, "v", 1)
	if !ok {
		t.Fatal("failed.txt not read")
	}
	if f.reason != "diverged [2J : loss NaN" || f.kind() != "diverged [2J " {
		t.Errorf("reason %q, kind %q", f.reason, f.kind())
	}
	writeFile(t, filepath.Join(dir, failedFile), strings.Repeat("z", 1<<20))
	if f, _ = readFailure(dir, "v", 1); len(f.reason) != maxReason+3 {
		t.Errorf("reason of %d bytes from a file without a line break", len(f.reason))
	}
}

// TestFailedRunsMessage: the count agrees with its noun.
func TestFailedRunsMessage(t *testing.T) {
	one := errors.New("run dense seed 1 failed: NaN loss")
	two := errors.New("run dense seed 2 failed: NaN loss")
	for _, tc := range []struct {
		errs []error
		want string
	}{
		{[]error{one}, "1 run failed:\n" + one.Error()},
		{[]error{one, two}, "2 runs failed:\n" + one.Error() + "\n" + two.Error()},
	} {
		if got := (&FailedRuns{Errs: tc.errs}).Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestPositionText: an epoch's end reads "epoch 4", an interrupt's mid-epoch
// checkpoint names its steps too (the progress line once said "epoch 0" for a
// run stopped 417 steps into its first epoch).
func TestPositionText(t *testing.T) {
	for _, c := range []struct {
		at   train.CheckpointPosition
		want string
	}{
		{train.CheckpointPosition{Epochs: 4}, "epoch 4"},
		{train.CheckpointPosition{Epochs: 0, StepInEpoch: 417}, "epoch 0 and 417 steps"},
	} {
		if got := positionText(c.at); got != c.want {
			t.Errorf("%+v: %q, want %q", c.at, got, c.want)
		}
	}
	st := state{resume: true, at: train.CheckpointPosition{Epochs: 2, StepInEpoch: 5}}
	if got := st.String(); got != "resume from epoch 2 and 5 steps" {
		t.Errorf("dry-run state %q", got)
	}
	st.failedBefore = "stalled"
	if got := st.String(); got != "resume from epoch 2 and 5 steps, a retry: failed before (stalled)" {
		t.Errorf("dry-run state of a failed run %q", got)
	}
	st.unselected = true
	if got := st.String(); got != "not selected, at epoch 2 and 5 steps, failed before (stalled)" {
		t.Errorf("dry-run state of a failed run left out by --only %q", got)
	}
}

// TestETA: a run is expected to take its variation's mean time (dense: 10 and
// 20 s -> 15), else the mean of every finished run ((10 + 20 + 40) / 3 =
// 23.3 s for lstm), and a resumed run the share of its epochs left (topk,
// 1 epoch and 2 of its 4 steps done: 40 x 2.5/4 = 25 s). Left after run 0:
// 15 + 25 + 23.3.
func TestETA(t *testing.T) {
	run := func(v string, epochs int) Run {
		var r Run
		r.Variation, r.Config.Train.Epochs = v, epochs
		return r
	}
	runs := []Run{run("dense", 4), run("dense", 4), run("topk", 4), run("lstm", 4)}
	states := []state{{done: true, wall: 10}, {}, {resume: true, at: train.CheckpointPosition{Epochs: 1, StepInEpoch: 2, StepsPerEpoch: 4}}, {}}
	e := newETA(runs, states)
	if _, ok := e.left(runs, states, 0); !ok {
		t.Fatal("no estimate from a finished run")
	}
	e.add("dense", 20)
	e.add("topk", 40)
	got, ok := e.left(runs, states, 1)
	// Runs finished in this invocation replace the earlier ones: dense 20
	// (not the mean with the earlier 10), topk 40 x 2.5 of 4 epochs left,
	// lstm the mean of this invocation's runs.
	if want := 20 + 25 + 30.0; !ok || math.Abs(got-want) > 1e-9 {
		t.Fatalf("time left %v (%v), want %v", got, ok, want)
	}
	if _, ok := e.left(runs, states, 4); ok {
		t.Error("an estimate with no run left")
	}
	if _, ok := newETA(runs, make([]state, 4)).left(runs, make([]state, 4), 0); ok {
		t.Error("an estimate before any run finished")
	}
	if got := etaText(3725, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); got != "about 1h2m0s left (ETA 2026-01-02 04:06 UTC)" {
		t.Errorf("etaText: %q", got)
	}
}

// TestETACountsEvaluation: a finished run's expected time is its training
// and its evaluations (wall_seconds + eval_seconds), which it took; a summary
// without eval_seconds, or with a negative one, counts its training alone.
func TestETACountsEvaluation(t *testing.T) {
	cfg, err := configs.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		summary string
		want    float64
	}{
		{`{"wall_seconds": 100, "eval_seconds": 12.5}`, 112.5},
		{`{"wall_seconds": 100}`, 100},
		{`{"wall_seconds": 100, "eval_seconds": -50}`, 100},
	} {
		dir := t.TempDir()
		if err := cfg.WriteYAML(filepath.Join(dir, "config.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(tc.summary), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := inspect(Run{Variation: "dense", Seed: 1, Config: cfg}, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !st.done || st.wall != tc.want {
			t.Errorf("%s: state %v with %v s, expected done with %v s", tc.summary, st, st.wall, tc.want)
		}
	}
}

// TestOnlyTrainsTheSelectedVariations: --only trains the matching variations,
// leaves the others untouched (no directory), says so in the progress and the
// dry run, and a later sweep without --only trains the rest.
func TestOnlyTrainsTheSelectedVariations(t *testing.T) {
	path := tinySweep(t, "")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	dir := filepath.Join(results, "tiny")
	var progress bytes.Buffer
	if err := Execute(context.Background(), s, Options{Results: results, Progress: &progress, Only: []string{"to*"}}); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	out := progress.String()
	for _, want := range []string{"(0 done, 2 selected by --only to*)", "[1/4] dense seed 1: skipped (not selected by --only)",
		"[2/4] dense seed 2: skipped (not selected by --only)", "[3/4] topk seed 1: done in ", "[4/4] topk seed 2: done in "} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "dense")); err == nil {
		t.Error("a variation left out by --only has a run directory")
	}
	for _, seed := range []string{"seed-1", "seed-2"} {
		if _, err := os.Stat(filepath.Join(dir, "runs", "topk", seed, "summary.json")); err != nil {
			t.Errorf("selected run topk %s: %v", seed, err)
		}
	}
	// The time estimate after the first selected run counts only the second.
	if !regexp.MustCompile(`\[3/4\] topk seed 1: done in .*; about \S+ left`).MatchString(out) {
		t.Errorf("no time left after the first selected run:\n%s", out)
	}
	if strings.Contains(out[strings.Index(out, "[4/4] topk seed 2: done"):], "left") {
		t.Errorf("time left after the last selected run, as if unselected runs were to come:\n%s", out)
	}

	var dry bytes.Buffer
	if err := DryRun(&dry, s, results, []string{"dense"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[1/4] dense seed 1 (new)", "[3/4] topk seed 1 (done)"} {
		if !strings.Contains(dry.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, dry.String())
		}
	}
	dry.Reset()
	if err := DryRun(&dry, s, results, []string{"nothing-like-it"}); err == nil {
		t.Error("dry run accepted a pattern that matches no variation")
	}

	rest := executeSweep(t, path, results)
	for _, want := range []string{"[1/4] dense seed 1: running", "[3/4] topk seed 1: skipped (done)"} {
		if !strings.Contains(rest, want) {
			t.Errorf("sweep after --only lacks %q:\n%s", want, rest)
		}
	}
}

func TestSelectPatterns(t *testing.T) {
	s, err := Load(tinySweep(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		only []string
		want []bool
		err  string
	}{
		{nil, []bool{true, true, true, true}, ""},
		{[]string{"dense"}, []bool{true, true, false, false}, ""},
		{[]string{"d*", "top?"}, []bool{true, true, true, true}, ""},
		{[]string{"[t]*"}, []bool{false, false, true, true}, ""},
		{[]string{"dense", "lars-*"}, nil, `--only "lars-*" matches no variation of ` + s.Path + " (variations: dense, topk)"},
		{[]string{"[a-"}, nil, `--only "[a-": syntax error in pattern`},
	} {
		got, err := s.Select(tc.only)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Select(%q): error %v, want %q", tc.only, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Select(%q) = %v, %v; want %v", tc.only, got, err, tc.want)
		}
	}
}

// TestReuseCopiesFinishedRunsOfTheSameConfig: a sweep whose file names another
// sweep's results folder under reuse copies the finished runs there whose
// config equals its own run's (seed included) instead of training them,
// trains the rest, records the copies, and copies again a copy that was cut
// short before its summary.json.
func TestReuseCopiesFinishedRunsOfTheSameConfig(t *testing.T) {
	path := tinySweep(t, "")
	results := t.TempDir()
	executeSweep(t, path, results)
	probe := filepath.Join(results, "tiny")
	root := filepath.Dir(filepath.Dir(path))
	second := filepath.Join(root, "experiments", "picks.yaml")
	writeFile(t, second, fmt.Sprintf(`base: ../configs/tiny.yaml
set: [data.dir=%s]
seeds: [1, 3]
reuse: [%s]
variations:
  - name: dense-pick
    set: [compress.name=none]
  - name: slower
    set: [compress.name=none, optim.lr=0.001]
`, filepath.Join(root, "data"), probe))
	s, err := Load(second)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(probe, "runs", "dense", "seed-1")
	// A long training time there, so that counting it as this sweep's would
	// show in the provenance.
	sum := readFile(t, filepath.Join(src, "summary.json"))
	long := regexp.MustCompile(`"wall_seconds": [0-9.e-]+`).ReplaceAllString(sum, `"wall_seconds": 100000`)
	if long == sum {
		t.Fatalf("no wall_seconds in %s", sum)
	}
	writeFile(t, filepath.Join(src, "summary.json"), long)
	// Files that must stay behind, marked so that a copy of them shows.
	for _, f := range notCopied {
		writeFile(t, filepath.Join(src, f), "from the original\n")
	}
	// What an unfinished run left where the copy goes: cleared by the copy.
	dst := filepath.Join(results, "picks", "runs", "dense-pick", "seed-1")
	writeFile(t, filepath.Join(dst, failedFile), "an earlier attempt failed\n")
	writeFile(t, filepath.Join(dst, "checkpoints", "stale"), "x")
	var dry bytes.Buffer
	if err := DryRun(&dry, s, results, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[1/4] dense-pick seed 1 (copy from " + filepath.ToSlash(src) + ")", "[2/4] dense-pick seed 3 (new)", "[3/4] slower seed 1 (new)"} {
		if !strings.Contains(dry.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, dry.String())
		}
	}
	dry.Reset()
	if err := DryRun(&dry, s, results, []string{"slower"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[1/4] dense-pick seed 1 (copy from ", "[2/4] dense-pick seed 3 (not selected)"} {
		if !strings.Contains(dry.String(), want) {
			t.Errorf("dry run --only slower lacks %q:\n%s", want, dry.String())
		}
	}

	// Copies train nothing, so --only does not hold them back.
	var progress bytes.Buffer
	if err := Execute(context.Background(), s, Options{Results: results, Progress: &progress, Command: "gradwire sweep --only slower", Only: []string{"slower"}}); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	out := progress.String()
	for _, want := range []string{"(0 done, 1 to copy from the reuse folders, 2 selected by --only slower)",
		"[1/4] dense-pick seed 1: copied from " + filepath.ToSlash(src) + " (finished there with the same config)",
		"[2/4] dense-pick seed 3: skipped (not selected by --only)", "[3/4] slower seed 1: running", "[4/4] slower seed 3: running"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
	if out := executeSweep(t, second, results); !strings.Contains(out, "[2/4] dense-pick seed 3: running") || !strings.Contains(out, "[1/4] dense-pick seed 1: skipped (done)") {
		t.Errorf("the rest of the sweep:\n%s", out)
	}
	for _, f := range []string{"config.yaml", "metrics.jsonl", "summary.json"} {
		if readFile(t, filepath.Join(dst, f)) != readFile(t, filepath.Join(src, f)) {
			t.Errorf("copied %s differs from the original", f)
		}
	}
	log := readFile(t, filepath.Join(dst, "train.log"))
	if !strings.HasPrefix(log, readFile(t, filepath.Join(src, "train.log"))) ||
		!strings.Contains(log[strings.LastIndex(strings.TrimSuffix(log, "\n"), "\n")+1:], `msg="copied by gradwire sweep" sweep=picks variation=dense-pick seed=1 from=`) {
		t.Errorf("copied train.log is not the original plus a note of the copy:\n%s", log)
	}
	for _, f := range append(notCopied, "checkpoints") {
		// The copy holds the run's lock as training does, so .lock is there,
		// but its own.
		if f == ".lock" {
			if b, err := os.ReadFile(filepath.Join(dst, f)); err != nil || strings.Contains(string(b), "from the original") {
				t.Errorf(".lock in the copy: %q, %v", b, err)
			}
		} else if _, err := os.Stat(filepath.Join(dst, f)); err == nil {
			t.Errorf("%s in the copy", f)
		}
	}
	invs, err := readInvocations(filepath.Join(results, "picks"))
	if err != nil || len(invs) != 2 || len(invs[0].Copied) != 1 || invs[0].Copied[0] != (CopiedRun{Run: "dense-pick/seed-1", From: filepath.ToSlash(src)}) || invs[0].Trained != 2 || invs[1].Trained != 1 || invs[1].Copied != nil {
		t.Fatalf("invocations: %+v, %v", invs, err)
	}
	rep, err := Report(filepath.Join(results, "picks"), nil)
	if err != nil {
		t.Fatal(err)
	}
	table := rep.Table
	if !strings.Contains(table, "`gradwire sweep --only slower` trained 2 runs, copied 1 run finished with the same config elsewhere (dense-pick/seed-1 from "+filepath.ToSlash(src)+")") {
		t.Errorf("table.md's provenance does not name the copy:\n%s", table)
	}
	if strings.Contains(table, "left no record") {
		t.Errorf("the copied run's training time is counted as this sweep's:\n%s", table)
	}

	// A copy cut short (no summary.json) is copied again; the rest is done.
	if err := os.Remove(filepath.Join(dst, "summary.json")); err != nil {
		t.Fatal(err)
	}
	again := executeSweep(t, second, results)
	for _, want := range []string{"[1/4] dense-pick seed 1: copied from ", "[2/4] dense-pick seed 3: skipped (done)"} {
		if !strings.Contains(again, want) {
			t.Errorf("rerun lacks %q:\n%s", want, again)
		}
	}
	if readFile(t, filepath.Join(dst, "summary.json")) != readFile(t, filepath.Join(src, "summary.json")) {
		t.Error("the second copy's summary.json differs from the original")
	}
	// A run another sweep finished meanwhile is left as it is.
	writeFile(t, filepath.Join(dst, "summary.json"), "{}\n")
	if copied, err := copyRun(src, dst, s.Runs[0], "picks"); err != nil || copied || readFile(t, filepath.Join(dst, "summary.json")) != "{}\n" {
		t.Errorf("copy onto a finished run: copied %v, %v", copied, err)
	}
}

// TestConfigDiffLeavesOutUnreadSections: a changed layer_parallel default does
// not disown a run that never read the section, and still counts when either
// config trains layer-parallel.
func TestConfigDiffLeavesOutUnreadSections(t *testing.T) {
	old := configs.Default()
	cur := configs.Default()
	cur.LayerParallel.Rho = old.LayerParallel.Rho * 2
	if d := configDiff(old, cur); len(d) != 0 {
		t.Errorf("data-parallel runs differ only in layer_parallel, got %q", d)
	}
	cur.Train.Mode = configs.TrainModeLayerParallel
	d := configDiff(old, cur)
	want := fmt.Sprintf("layer_parallel.rho: %v in the run, %v in the sweep", old.LayerParallel.Rho, cur.LayerParallel.Rho)
	if !slices.Contains(d, want) {
		t.Errorf("diff %q lacks %q", d, want)
	}
	old.Train.Mode = configs.TrainModeLayerParallel
	if d := configDiff(old, cur); !slices.Equal(d, []string{want}) {
		t.Errorf("layer-parallel runs: diff %q, want [%q]", d, want)
	}
	cur.Optim.LR = old.Optim.LR * 2
	old.Train.Mode, cur.Train.Mode = configs.TrainModeSerial, configs.TrainModeSerial
	if d := configDiff(old, cur); len(d) != 1 || !strings.HasPrefix(d[0], "optim.lr: ") {
		t.Errorf("a read key that differs: diff %q, want optim.lr's alone", d)
	}
}
