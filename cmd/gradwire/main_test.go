package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/train"
)

// run executes the CLI in-process and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// errorCase is a command line that must fail with an error mentioning every want.
type errorCase struct {
	args []string
	want []string
}

func wantErrors(t *testing.T, cases []errorCase) {
	t.Helper()
	// A case that wrongly succeeds writes its default output (experiments/
	// results/..., runs/...) under a temporary folder, not into the source
	// tree; the cases' relative paths are ones that must not be found.
	t.Chdir(t.TempDir())
	for _, tc := range cases {
		_, _, err := run(t, tc.args...)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not mention %q", tc.args, err, w)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "gradwire ") || !strings.Contains(out, "blas ") {
		t.Fatalf("version: %q, %v", out, err)
	}
}

func TestTrainFlagErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("optim:\n  learning_rate: 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	neg := filepath.Join(t.TempDir(), "neg.yaml")
	if err := os.WriteFile(neg, []byte("optim:\n  lr: -0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typed := filepath.Join(t.TempDir(), "typed.yaml")
	if err := os.WriteFile(typed, []byte("train:\n  epochs: five\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErrors(t, []errorCase{
		{[]string{"train"}, []string{"--config FILE is required"}},
		{[]string{"train", "--resume", "x", "--config", "y"}, []string{"do not combine"}},
		{[]string{"train", "--config", bad}, []string{bad, `"optim.learning_rate"`, `"optim.lr"`}},
		{[]string{"train", "--config", neg}, []string{neg, "optim.lr", "-0.1"}},
		{[]string{"train", "--config", typed}, []string{typed, "train.epochs", "five"}},
		{[]string{"train", "--config", bad + ".missing"}, []string{bad + ".missing"}},
		{[]string{"train", "--set", "model.name=vgg"}, []string{"--config FILE is required"}},
		{[]string{"train", "--resume", t.TempDir()}, []string{"config.yaml"}},
		{[]string{"data", "fetch", "imagenet", "--dir", t.TempDir()}, []string{"imagenet", "fashion-mnist"}},
		{[]string{"train", "--epochs", "3"}, []string{"unknown flag"}},
		{[]string{"train", "--resume", "x", "--overwrite"}, []string{"do not combine"}},
		{[]string{"train", "--config", bad, "--allow-change", "optim.lr"}, []string{"--resume only"}},
		{[]string{"train", "--resume", "x", "--allow-change", "optim.lrr"}, []string{"optim.lrr", "not a config key"}},
	})
	// A key given twice takes its last value, with a warning.
	_, stderr, err := run(t, "train", "--config", neg, "--set", "optim.lr=0.1", "--set", "seed=2", "--set", "Optim.LR=-0.2")
	if err == nil || !strings.Contains(err.Error(), "-0.2") || strings.Contains(err.Error(), "-0.1") {
		t.Errorf("optim.lr set to 0.1, then -0.2: error %v, expected the last value's", err)
	}
	if want := `gradwire: warning: --set optim.lr given 2 times ("0.1", "-0.2"): the last value is used`; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
}

// TestArgumentErrors: a group command refuses an unknown subcommand (and shows
// its help without one); measure and influence refuse a missing or wrong run
// directory before any work, saying what they expect.
func TestArgumentErrors(t *testing.T) {
	notRun := t.TempDir()
	aFile := filepath.Join(notRun, "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantErrors(t, []errorCase{
		{[]string{"data", "chek"}, []string{`unknown command "chek" for "gradwire data"`, "fetch, list"}},
		{[]string{"timemodel", "fitt"}, []string{`unknown command "fitt"`, `did you mean "fit"?`}},
		{[]string{"measure"}, []string{"at least one run directory"}},
		{[]string{"measure", notRun}, []string{notRun, "holds no config.yaml", "run directory"}},
		{[]string{"measure", filepath.Join(notRun, "missing")}, []string{"missing is not a folder"}},
		{[]string{"measure", notRun, notRun + "/"}, []string{notRun + "/ names the run " + notRun + " again"}},
		{[]string{"measure", notRun, "--batch", "0"}, []string{"--batch 0: expected >= 1"}},
		{[]string{"measure", notRun, "--examples", "10", "--batch", "256"}, []string{"--examples 10 is fewer than one --batch of 256"}},
		{[]string{"influence"}, []string{"one argument, a run directory", "got 0"}},
		{[]string{"influence", notRun}, []string{notRun, "holds no config.yaml"}},
		{[]string{"influence", notRun, "--top", "0.1,0.2,0.1"}, []string{"--top 0.1", "given twice"}},
		{[]string{"influence", notRun, "--test", "3,3"}, []string{"--test 3", "given twice"}},
		{[]string{"train", "configs/mlp-fashion.yaml"}, []string{`train takes no arguments (got "configs/mlp-fashion.yaml")`, "--config FILE"}},
		{[]string{"timemodel", "predict", notRun}, []string{"timemodel predict takes no arguments", "--run DIR"}},
		{[]string{"timemodel", "predict", "--run", notRun}, []string{"--run " + notRun + ": no summary.json there: expected the directory of a finished run"}},
		{[]string{"data", "fetch"}, []string{"the data set's name (got 0)", "fashion-mnist"}},
		{[]string{"data", "fetch", "mnist", "--dir", aFile}, []string{"--dir " + aFile + " is a file: expected a folder"}},
		{[]string{"sweep", "--config", "x.yaml", "--results", aFile}, []string{"--results " + aFile + " is a file: expected a folder"}},
	})
	out, _, err := run(t, "data")
	if err != nil || !strings.Contains(out, "fetch") {
		t.Errorf("data without a subcommand: %v, output %q; want its help", err, out)
	}
	out, _, err = run(t, "measure", notRun)
	if err == nil || out != "" {
		t.Errorf("measure of a folder that is no run: printed %q before the error %v", out, err)
	}
}

func TestHelpNamesEveryFlag(t *testing.T) {
	out, _, err := run(t, "train", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--config", "--set", "--out", "--resume", "--overwrite", "--allow-change", "summary.json", "metrics.jsonl"} {
		if !strings.Contains(out, f) {
			t.Errorf("train --help does not mention %s", f)
		}
	}
}

func TestInterruptedHint(t *testing.T) {
	with := &train.Interrupted{Dir: "runs/a b", Checkpoint: "runs/a b/checkpoints/step-00000007.ckpt", Epoch: 1, Step: 7, Cause: context.Canceled}
	if got := interruptedHint(with, "runs/a b").Error(); !strings.HasSuffix(got, "continue with: gradwire train --resume 'runs/a b'") {
		t.Errorf("with a checkpoint: %q", got)
	}
	without := &train.Interrupted{Dir: "r", Epoch: 1, Step: 7, Cause: context.Canceled}
	if got := interruptedHint(without, "r").Error(); !strings.Contains(got, "cannot be continued") || strings.Contains(got, "--resume") {
		t.Errorf("without a checkpoint: %q", got)
	}
	if got := interruptedHint(context.Canceled, "r").Error(); !strings.Contains(got, "before training started") {
		t.Errorf("during set-up: %q", got)
	}
}
