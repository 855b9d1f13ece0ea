package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/internal/train"
)

// DefaultResults is the results root of `gradwire sweep`.
const DefaultResults = "experiments/results"

// Options are what the sweep command passes in besides the sweep.
type Options struct {
	Results  string    // results root; the sweep writes to Results/<name>
	Progress io.Writer // one line per run; nil = none
	Command  string    // the command line, recorded in invocations.jsonl; "" = not recorded
	// Only, when not empty, restricts the runs trained to the variations whose
	// names match one of these patterns (path.Match syntax: *, ?, [a-z]); the
	// others are left as they are. The report still covers every run.
	Only []string
}

// state is what a run's directory already holds.
type state struct {
	done   bool                     // summary.json exists: nothing to do
	resume bool                     // a checkpoint but no summary: continue from it
	at     train.CheckpointPosition // where the last checkpoint stands (resume)
	wall   float64                  // a done run's time: training and, where measured, evaluation (summary.json's wall_seconds + eval_seconds)
	// unselected: not done, not to be copied, and left out by Options.Only,
	// so neither trained nor counted in the time estimate.
	unselected bool
	// copyFrom is a finished run of the same config in one of the sweep's
	// reuse folders, copied instead of trained ("" = none; only for a run
	// that has not started). Copies are made whatever Options.Only selects:
	// they train nothing.
	copyFrom string
	// failedBefore is what an earlier attempt's failed.txt says went wrong
	// (its first clause, "diverged" say; "" = none): the run is retried, and
	// the dry run and the progress line say so.
	failedBefore string
}

func (st state) String() string {
	switch {
	case st.done:
		return "done"
	case st.copyFrom != "":
		return "copy from " + filepath.ToSlash(st.copyFrom)
	case st.unselected && st.resume:
		return "not selected, at " + positionText(st.at) + st.failedText(false)
	case st.unselected:
		return "not selected" + st.failedText(false)
	case st.resume:
		return "resume from " + positionText(st.at) + st.failedText(true)
	}
	return "new" + st.failedText(true)
}

// failedText notes an earlier failure after a state: ", failed before
// (diverged)", and ", a retry" where the run is to be trained again.
func (st state) failedText(retried bool) string {
	if st.failedBefore == "" {
		return ""
	}
	if retried {
		return ", a retry: failed before (" + st.failedBefore + ")"
	}
	return ", failed before (" + st.failedBefore + ")"
}

// positionText is a checkpoint's position as the progress lines give it:
// "epoch 4", or "epoch 0 and 417 steps" for one an interrupt wrote mid-epoch.
func positionText(at train.CheckpointPosition) string {
	if at.StepInEpoch == 0 {
		return fmt.Sprintf("epoch %d", at.Epochs)
	}
	return fmt.Sprintf("epoch %d and %d steps", at.Epochs, at.StepInEpoch)
}

// inspect reports the run's state and checks that a run already in dir was
// trained with the config the sweep gives it now: otherwise a changed sweep
// file would silently mix old results into the new table.
func inspect(r Run, dir string) (state, error) {
	var st state
	diff, found, err := trainedConfigDiff(r, dir)
	switch {
	case err != nil:
		return st, fmt.Errorf("run %s seed %d: %w", r.Variation, r.Seed, err)
	case !found:
		return st, nil // nothing there yet (or a run killed before it wrote anything)
	case len(diff) > 0:
		return st, fmt.Errorf("run %s seed %d: %s was trained with a different config than the sweep gives it now (%s); delete %s to retrain it, or give the changed variation a new name",
			r.Variation, r.Seed, filepath.Join(dir, "config.yaml"), strings.Join(diff, "; "), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		st.done = true
		if sum, err := train.ReadSummary(filepath.Join(dir, "summary.json")); err == nil {
			// Only for the time estimate: a bad summary shows in gradwire
			// report. A summary without eval_seconds (written before it was
			// measured) leaves the evaluations out, about a tenth of a
			// ResNet-20 run. A negative figure (a hand-edited file) counts 0.
			st.wall = max(sum.WallSeconds, 0) + max(sum.EvalSeconds, 0)
		}
		return st, nil
	}
	if st.at, st.resume, err = train.NewestCheckpoint(dir); err != nil {
		return st, fmt.Errorf("run %s seed %d: %w", r.Variation, r.Seed, err)
	}
	if f, ok := readFailure(dir, r.Variation, r.Seed); ok {
		st.failedBefore = f.kind()
	}
	return st, nil
}

// trainedConfigDiff compares the config.yaml in a run's folder with the
// config the sweep gives the run now; found is false when there is none.
func trainedConfigDiff(r Run, dir string) (diff []string, found bool, err error) {
	cfgPath := filepath.Join(dir, "config.yaml")
	if _, err := os.Stat(cfgPath); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	old, err := configs.Load(cfgPath, nil)
	if err != nil {
		return nil, true, err
	}
	return configDiff(old, r.Config), true, nil
}

// configDiff lists the keys whose values differ, as "key: old in the run, new in
// the sweep". Configs are compared through their YAML form, which is what
// config.yaml holds, so that nil and empty lists compare equal.
//
// Sections that a run reads only under a setting (unreadSections) are left out
// when neither config has it: a default changed there since the run finished
// does not change what the run did.
func configDiff(old, cur configs.Config) []string {
	a, b := flatConfig(old), flatConfig(cur)
	for _, u := range unreadSections {
		if u.reads(old) || u.reads(cur) {
			continue
		}
		for _, m := range []map[string]string{a, b} {
			maps.DeleteFunc(m, func(k, _ string) bool { return strings.HasPrefix(k, u.prefix) })
		}
	}
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diff []string
	for _, k := range keys {
		if a[k] != b[k] {
			diff = append(diff, fmt.Sprintf("%s: %s in the run, %s in the sweep", k, a[k], b[k]))
		}
	}
	return diff
}

// unreadSections are the config sections that training reads only when a
// setting selects them.
var unreadSections = []struct {
	prefix string
	reads  func(configs.Config) bool
}{
	{"layer_parallel.", func(c configs.Config) bool { return c.Train.Mode == configs.TrainModeLayerParallel }},
}

func flatConfig(c configs.Config) map[string]string {
	raw, err := yaml.Marshal(c)
	if err != nil {
		panic(err) // a Config always marshals
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if sub, ok := v.(map[string]any); ok {
			for k, x := range sub {
				walk(strings.TrimPrefix(prefix+"."+k, "."), x)
			}
			return
		}
		if rv := reflect.ValueOf(v); v != nil && rv.Kind() == reflect.Slice && rv.Len() == 0 {
			v = "[]"
		}
		out[prefix] = fmt.Sprint(v)
	}
	walk("", m)
	return out
}

// Execute runs every run of the sweep in order into Results/<name>/runs/:
// finished runs are skipped, runs with a checkpoint and no summary resume, the
// others start afresh. A run that fails does not stop the others; Execute then
// returns *FailedRuns. Every run directory is checked before the first run
// starts. Each run's log goes to train.log in its directory. When ctx is
// cancelled the current run stops (checkpointed where it stopped) and
// Execute returns an error saying how to continue.
func Execute(ctx context.Context, s *Sweep, opts Options) error {
	dir := s.Dir(opts.Results)
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	states, err := inspectAll(s, dir, opts.Only)
	if err != nil {
		return err
	}
	done, selected, toCopy := 0, 0, 0
	for _, st := range states {
		switch {
		case st.done:
			done++
		case st.unselected:
		case st.copyFrom != "":
			toCopy++
		default:
			selected++
		}
	}
	copies := ""
	if toCopy > 0 {
		copies = fmt.Sprintf(", %d to copy from the reuse folders", toCopy)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rec, err := marshalYAML(s.Record())
	if err != nil {
		return err
	}
	header := "# Written by gradwire sweep: the sweep file in resolved form. gradwire report reads the\n# order of the variations and the runs to expect from it.\n"
	if err := atomicfile.Write(filepath.Join(dir, "sweep.yaml"), append([]byte(header), rec...)); err != nil {
		return err
	}
	if len(opts.Only) > 0 {
		fmt.Fprintf(progress, "sweep %s: %d runs (%d done%s, %d selected by --only %s) in %s\n", s.Name, len(s.Runs), done, copies, selected, strings.Join(opts.Only, ","), dir)
	} else {
		fmt.Fprintf(progress, "sweep %s: %d runs (%d done%s) in %s\n", s.Name, len(s.Runs), done, copies, dir)
	}
	entry := &invocationLog{inv: newInvocation(opts.Command, time.Now()), dir: dir, t0: time.Now(), line: -1, write: opts.Command != ""}
	entry.inv.Skipped = done
	// The line is written now, after every run and every heartbeat, so that
	// an invocation killed outright (no deferred code runs) still leaves its
	// record, up to its last beat.
	if err := entry.update(func(inv *Invocation) { inv.Running = true }); err != nil {
		return err
	}
	stop := entry.heartbeat(invocationHeartbeat)
	err = execute(ctx, s, opts, dir, states, entry, progress)
	stop()
	if werr := entry.update(func(inv *Invocation) { inv.Running = false }); werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// invocationHeartbeat is how often a sweep rewrites its invocations.jsonl
// line while a run trains.
var invocationHeartbeat = time.Minute

// execute trains the runs that are not done, counting them in entry, which
// records the invocation's line after each run.
func execute(ctx context.Context, s *Sweep, opts Options, dir string, states []state, entry *invocationLog, progress io.Writer) error {
	n := len(s.Runs)
	var failed []error
	est := newETA(s.Runs, states)
	if left, ok := est.left(s.Runs, states, 0); ok {
		fmt.Fprintf(progress, "%s\n", etaText(left, time.Now()))
	}
	interrupted := func(inv *Invocation) { inv.Interrupted = true }
	for i, r := range s.Runs {
		if err := ctx.Err(); err != nil {
			entry.set(interrupted)
			return fmt.Errorf("interrupted before %s seed %d; rerun gradwire sweep --config %s to continue", r.Variation, r.Seed, s.Path)
		}
		tag := fmt.Sprintf("[%d/%d] %s seed %d", r.Index, n, r.Variation, r.Seed)
		st := states[i]
		if !st.done && !st.unselected && st.copyFrom == "" {
			// Another process (a second sweep over the same results) may
			// be training the run, or have finished or started it since
			// this sweep looked: leave its folder alone, or look again.
			if holder, busy := train.InUse(r.Dir(dir)); busy {
				fmt.Fprintf(progress, "%s: skipped (being trained by another gradwire process, %s)\n", tag, holder)
				continue
			}
			fresh, err := inspect(r, r.Dir(dir))
			if err != nil {
				return err
			}
			st, states[i] = fresh, fresh
		}
		switch {
		case st.done:
			fmt.Fprintf(progress, "%s: skipped (done)\n", tag)
			continue
		case st.copyFrom != "":
			copied, err := copyRun(st.copyFrom, r.Dir(dir), r, s.Name)
			if err != nil {
				return err
			}
			if !copied {
				fmt.Fprintf(progress, "%s: skipped (done)\n", tag)
				continue
			}
			if err := entry.update(func(inv *Invocation) {
				inv.Copied = append(inv.Copied, CopiedRun{Run: r.Variation + "/seed-" + strconv.FormatInt(r.Seed, 10), From: filepath.ToSlash(st.copyFrom)})
			}); err != nil {
				return err
			}
			fmt.Fprintf(progress, "%s: copied from %s (finished there with the same config)\n", tag, filepath.ToSlash(st.copyFrom))
			continue
		case st.unselected:
			fmt.Fprintf(progress, "%s: skipped (not selected by --only)\n", tag)
			continue
		case st.resume:
			fmt.Fprintf(progress, "%s: resumed from %s%s\n", tag, positionText(st.at), st.failedText(true))
		default:
			fmt.Fprintf(progress, "%s: running%s\n", tag, st.failedText(true))
		}
		if err := clearFailure(r.Dir(dir)); err != nil {
			return err
		}
		t0 := time.Now()
		entry.set(func(inv *Invocation) { inv.Trained++ })
		sum, err := runOne(ctx, s, r, r.Dir(dir), st.resume)
		if errors.Is(err, context.Canceled) {
			entry.set(interrupted)
			return fmt.Errorf("interrupted during %s seed %d (checkpointed where it stopped); rerun gradwire sweep --config %s to continue", r.Variation, r.Seed, s.Path)
		}
		if errors.Is(err, train.ErrInUse) {
			// Claimed by another process since the check above: not this
			// invocation's run, and not a failure to record in a folder
			// that process owns.
			if werr := entry.update(func(inv *Invocation) { inv.Trained-- }); werr != nil {
				return werr
			}
			fmt.Fprintf(progress, "%s: skipped, %v\n", tag, err)
			continue
		}
		if werr := entry.update(func(inv *Invocation) {
			if err != nil {
				inv.Failed++
			}
		}); werr != nil {
			return werr
		}
		if err != nil {
			// A diverged run is a result too: note it and go on with the others.
			if werr := writeFailure(r.Dir(dir), err); werr != nil {
				return errors.Join(err, werr)
			}
			failed = append(failed, fmt.Errorf("run %s seed %d failed (log: %s): %w", r.Variation, r.Seed, filepath.Join(r.Dir(dir), "train.log"), err))
			fmt.Fprintf(progress, "%s: failed after %.0f s: %v\n", tag, time.Since(t0).Seconds(), err)
			continue
		}
		took := time.Since(t0).Seconds()
		if !st.resume {
			est.add(r.Variation, took)
		}
		line := fmt.Sprintf("%s: done in %.0f s, %s", tag, took, resultText(sum))
		if left, ok := est.left(s.Runs, states, i+1); ok {
			line += "; " + etaText(left, time.Now())
		}
		fmt.Fprintln(progress, line)
	}
	if len(failed) > 0 {
		return &FailedRuns{Errs: failed}
	}
	return nil
}

// eta estimates a sweep's remaining time from its finished runs: a run is
// expected to take its variation's mean time, or the mean over every
// finished run while its variation has none, and a resumed run the share of
// its epochs still to train (a mid-epoch checkpoint's steps counted once the
// run's steps per epoch are known). Once a run has finished in this
// invocation only this invocation's runs count: earlier ones may have run on
// another machine or beside other work.
type eta struct {
	earlier, recent times
}

// times are finished runs' seconds, by variation and all together.
type times struct {
	byVariation map[string][]float64
	all         []float64
}

func (t *times) add(variation string, seconds float64) {
	if t.byVariation == nil {
		t.byVariation = map[string][]float64{}
	}
	t.byVariation[variation] = append(t.byVariation[variation], seconds)
	t.all = append(t.all, seconds)
}

// newETA starts from the runs finished by earlier invocations.
func newETA(runs []Run, states []state) *eta {
	e := &eta{}
	for i, st := range states {
		if st.done && st.wall > 0 {
			e.earlier.add(runs[i].Variation, st.wall)
		}
	}
	return e
}

// add records a run finished by this invocation.
func (e *eta) add(variation string, seconds float64) { e.recent.add(variation, seconds) }

// left is the expected time of the runs from index from on that are not done;
// false when no run has finished yet or none is left.
func (e *eta) left(runs []Run, states []state, from int) (float64, bool) {
	src := e.recent
	if len(src.all) == 0 {
		src = e.earlier
	}
	if len(src.all) == 0 {
		return 0, false
	}
	total, any := 0.0, false
	for i := from; i < len(runs); i++ {
		st := states[i]
		if st.done || st.unselected || st.copyFrom != "" {
			continue
		}
		seconds := src.byVariation[runs[i].Variation]
		if len(seconds) == 0 {
			seconds = src.all
		}
		t := mean(seconds)
		if epochs := runs[i].Config.Train.Epochs; st.resume && epochs > 0 {
			done := float64(st.at.Epochs)
			if st.at.StepsPerEpoch > 0 {
				done += float64(st.at.StepInEpoch) / float64(st.at.StepsPerEpoch)
			}
			t *= max(float64(epochs)-done, 0) / float64(epochs)
		}
		total += t
		any = true
	}
	return total, any
}

// etaText says how long the rest should take and when it should end.
func etaText(seconds float64, now time.Time) string {
	d := time.Duration(seconds * float64(time.Second))
	if d >= 10*time.Minute {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	return fmt.Sprintf("about %s left (ETA %s)", d, now.Add(d).UTC().Format("2006-01-02 15:04 UTC"))
}

// FailedRuns lists the runs of a sweep that ended with an error (a diverged
// loss, say) while the others completed; a rerun tries them again.
type FailedRuns struct{ Errs []error }

func (f *FailedRuns) Error() string {
	runs := "runs"
	if len(f.Errs) == 1 {
		runs = "run"
	}
	return fmt.Sprintf("%d %s failed:\n%v", len(f.Errs), runs, errors.Join(f.Errs...))
}

// inspectAll inspects every run directory (all of them, so that a changed sweep
// file is caught before anything trains) and marks the runs --only leaves out.
func inspectAll(s *Sweep, dir string, only []string) ([]state, error) {
	selected, err := s.Select(only)
	if err != nil {
		return nil, err
	}
	states := make([]state, len(s.Runs))
	var errs []error
	for i, r := range s.Runs {
		var err error
		if states[i], err = inspectRun(s, r, dir, selected[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return states, errors.Join(errs...)
}

// inspectRun is inspect plus what the sweep makes of it: the finished run of
// the reuse folders that stands in for a run not yet started, and whether a
// run left to train is selected.
func inspectRun(s *Sweep, r Run, dir string, selected bool) (state, error) {
	st, err := inspect(r, r.Dir(dir))
	if err != nil {
		return st, err
	}
	if !st.done && !st.resume && len(s.Reuse) > 0 {
		if st.copyFrom, err = findReusable(r, s.Reuse); err != nil {
			return st, fmt.Errorf("run %s seed %d: looking for a finished run to reuse: %w", r.Variation, r.Seed, err)
		}
	}
	st.unselected = !st.done && st.copyFrom == "" && !selected
	return st, nil
}

// Select reports which runs belong to a variation matched by one of the
// patterns (path.Match syntax); every run when there are none. A malformed
// pattern, or one that matches no variation, is an error: a typo would
// otherwise train nothing and say nothing.
func (s *Sweep) Select(patterns []string) ([]bool, error) {
	sel := make([]bool, len(s.Runs))
	if len(patterns) == 0 {
		for i := range sel {
			sel[i] = true
		}
		return sel, nil
	}
	names := make([]string, len(s.Variations))
	for i, v := range s.Variations {
		names[i] = v.Name
	}
	var errs []error
	for _, p := range patterns {
		matched := false
		for _, name := range names {
			ok, err := path.Match(p, name)
			if err != nil {
				return nil, fmt.Errorf("--only %q: %w (expected a variation name or a pattern such as 'lars-*')", p, err)
			}
			matched = matched || ok
		}
		if !matched {
			errs = append(errs, fmt.Errorf("--only %q matches no variation of %s (variations: %s)", p, s.Path, strings.Join(names, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, r := range s.Runs {
		for _, p := range patterns {
			if ok, _ := path.Match(p, r.Variation); ok {
				sel[i] = true
				break
			}
		}
	}
	return sel, nil
}

// runOne trains one run with its log in the run directory's train.log.
func runOne(ctx context.Context, s *Sweep, r Run, dir string, resume bool) (*train.Summary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Appended to, not written atomically: it is a log, and a resumed run's log
	// continues the interrupted one's.
	f, err := os.OpenFile(filepath.Join(dir, "train.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	log := slog.New(slog.NewTextHandler(f, nil))
	log.Info("sweep", "sweep", s.Name, "variation", r.Variation, "seed", r.Seed, "resume", resume,
		"base", s.BasePath, "set", strings.Join(r.Sets, " "))
	sum, err := train.Run(ctx, r.Config, train.Options{OutDir: dir, Resume: resume, Overwrite: !resume, Log: log})
	if err != nil {
		log.Error("run failed", "err", err)
	}
	return sum, err
}

// resultText is the final metric of a progress line, with the validation
// accuracy when the run held a validation split out.
func resultText(s *train.Summary) string {
	text := fmt.Sprintf("test_loss %.4f", s.TestLoss)
	if s.TestAccuracy != nil {
		text = fmt.Sprintf("test_accuracy %.4f", *s.TestAccuracy)
	}
	if s.ValAccuracy != nil {
		text += fmt.Sprintf(", val_accuracy %.4f", *s.ValAccuracy)
	}
	return text
}

// DryRun writes, for every run, its state and the equivalent gradwire train
// command (base config, every override, run directory), without training.
// Runs --only leaves out show as "not selected".
func DryRun(w io.Writer, s *Sweep, results string, only []string) error {
	dir := s.Dir(results)
	selected, err := s.Select(only)
	if err != nil {
		return err
	}
	var errs []error
	states := make([]state, len(s.Runs))
	fmt.Fprintf(w, "# sweep %s: %d runs in %s\n", s.Name, len(s.Runs), dir)
	for i, r := range s.Runs {
		st, err := inspectRun(s, r, dir, selected[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		states[i] = st
		running := ""
		if holder, ok := train.InUse(r.Dir(dir)); ok {
			running = "; training now, " + holder
		}
		args := []string{"gradwire", "train", "--config", s.BasePath}
		for _, kv := range r.Sets {
			args = append(args, "--set", kv)
		}
		args = append(args, "--out", r.Dir(dir))
		for i, a := range args {
			args[i] = ShellQuote(a)
		}
		fmt.Fprintf(w, "[%d/%d] %s seed %d (%s%s): %s\n", r.Index, len(s.Runs), r.Variation, r.Seed, st, running, strings.Join(args, " "))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The estimate a sweep prints when it starts, from the finished runs' times
	// (a run with a checkpoint, trained now or not, counts the share left).
	if left, ok := newETA(s.Runs, states).left(s.Runs, states, 0); ok {
		fmt.Fprintf(w, "# to train: %s\n", etaText(left, time.Now()))
	}
	return nil
}

// ShellQuote quotes a for a POSIX shell when it holds anything but safe characters.
func ShellQuote(a string) string {
	safe := a != ""
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=,:+@%", c)) {
			safe = false
			break
		}
	}
	if safe {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
