//go:build mpi && cgo

package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/dist/mpitest"
	"github.com/gradwire/gradwire/internal/datatest"
)

// mpiConfig is the run the MPI tests train: 4 logical workers on the synthetic
// data set in root; sets override keys.
func mpiConfig(t *testing.T, root, backend string, sets ...string) configs.Config {
	t.Helper()
	cfg, err := configs.Load("", append([]string{"data.dir=" + root, "model.name=lenet5", "data.batch_size=16",
		"dist.workers=4", "dist.replicas=1", "dist.backend=" + backend, "dist.check_every=3", "train.epochs=2",
		"train.progress=false", "optim.lr=0.05"}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMPITrainingEqualsLocal trains under mpirun -np 2 and -np 4 and compares
// the metrics with the local backend's for the same 4 workers and seed. The
// all-reduce sums in a different order across ranks (MPI's own reduction), so
// the comparison allows float32 rounding, not more.
func TestMPITrainingEqualsLocal(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	local := runCfg(t, mpiConfig(t, root, "local"), t.TempDir(), false)
	for _, np := range []int{2, 4} {
		out := t.TempDir()
		log, err := mpitest.Run(t, np, "TestMPITrainingWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out)
		if err != nil {
			t.Fatalf("mpirun -np %d: %v\n%s", np, err, log)
		}
		got, err := ReadSummary(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatalf("-np %d: %v\n%s", np, err, log)
		}
		if got.Backend != "mpi" || got.Workers != 4 || got.Steps != local.Steps || got.BytesSent != local.BytesSent {
			t.Errorf("-np %d: summary %+v, local %+v", np, got, local)
		}
		sameLosses(t, np, got, local)
		t.Logf("-np %d: test loss %.6f (local %.6f), accuracy %.4f (local %.4f)", np, got.TestLoss, local.TestLoss,
			*got.TestAccuracy, *local.TestAccuracy)
		// Only rank 0 writes the run directory (and holds its lock).
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") && e.Name() != lockName {
				t.Errorf("-np %d: stray file %s in the run directory", np, e.Name())
			}
		}
	}
}

// TestMPIValidationEqualsLocal: with data.validation on, every rank holds
// out the same examples (the split is a function of data.validation and the
// files alone), so the run under mpirun -np 2 trains on the local backend's
// training set and ends with its validation figures, within float32 rounding
// (the all-reduce's order; sameLosses' bounds).
func TestMPIValidationEqualsLocal(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	sets := []string{"data.validation=64"}
	local := runCfg(t, mpiConfig(t, root, "local", sets...), t.TempDir(), false)
	out := t.TempDir()
	log, err := mpitest.Run(t, 2, "TestMPITrainingWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out,
		"GRADWIRE_TEST_SETS="+strings.Join(sets, ";"))
	if err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, log)
	}
	got, err := ReadSummary(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	// 192 training examples in global batches of 64: 3 steps an epoch.
	if got.Steps != local.Steps || got.Steps != 2*3 || got.ValLoss == nil || got.ValAccuracy == nil {
		t.Fatalf("-np 2: %d steps, validation %v %v; local %d steps", got.Steps, got.ValLoss, got.ValAccuracy, local.Steps)
	}
	sameLosses(t, 2, got, local)
	if d := math.Abs(*got.ValLoss-*local.ValLoss) / *local.ValLoss; d > 1e-4 || math.Abs(*got.ValAccuracy-*local.ValAccuracy) > 1.5/64 {
		t.Errorf("-np 2: val_loss %v val_accuracy %v, local backend %v %v", *got.ValLoss, *got.ValAccuracy, *local.ValLoss, *local.ValAccuracy)
	}
	t.Logf("-np 2: val_loss %.6f (local %.6f), val_accuracy %.4f (local %.4f)", *got.ValLoss, *local.ValLoss, *got.ValAccuracy, *local.ValAccuracy)
}

// mpiCompressed are compressed runs of mpiConfig's 8 steps (2 epochs of 4):
// ScaleCom with one epoch of density warm-up, and GradiVeQ (on conv2.w, fc1.w
// and fc2.w, the tensors of at least compress.min_size 1024) with step 0
// warm-up, then cycles of 2 sampled and 2 compressed steps, so steps 3-4 and 7
// send coefficients, with float32 coefficients and with 6-bit levels.
var mpiCompressed = []struct {
	name string
	sets []string
	nps  []int
}{
	{"scalecom", []string{"compress.name=scalecom", "compress.density=0.01", "compress.scalecom.warmup_epochs=1"}, []int{2, 4}},
	{"gradiveq", []string{"compress.name=gradiveq", "compress.gradiveq.slice_size=128", "compress.gradiveq.warmup_steps=1",
		"compress.gradiveq.sample_steps=2", "compress.gradiveq.compress_steps=2"}, []int{2, 4}},
	{"gradiveq-6bit", []string{"compress.name=gradiveq", "compress.gradiveq.slice_size=128", "compress.gradiveq.warmup_steps=1",
		"compress.gradiveq.sample_steps=2", "compress.gradiveq.compress_steps=2", "compress.gradiveq.quantize_bits=6"}, []int{2}},
}

// TestMPICompressedTrainingEqualsLocal trains the compressed runs of
// mpiCompressed under mpirun and compares them with the local backend's for
// the same 4 workers and seed: the same steps, bytes and ratios, and the same
// losses. Top-k selection (ScaleCom's) turns a last-bit difference in a
// gradient sum into other indices, and so a rounding difference into a
// different run (5e-4 in the test loss here), so the losses are compared
// with a local run that sums in the processes' order (sumInProcessOrder: 2
// processes of 2 workers, which is also the order of MPI's recursive
// doubling over 4 ranks), to 1e-6. The compressors must have compressed:
// the whole-run ratio is above 1 (GradiVeQ's warm-up and sampling steps are
// dense, so only its compressed steps can lift it).
func TestMPICompressedTrainingEqualsLocal(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	for _, tc := range mpiCompressed {
		t.Run(tc.name, func(t *testing.T) {
			local := runCfg(t, mpiConfig(t, root, "local", tc.sets...), t.TempDir(), false)
			if local.CompressionRatio <= 1 {
				t.Fatalf("local: compression ratio %v, expected compressed steps", local.CompressionRatio)
			}
			restore := sumInProcessOrder(t, 2)
			inOrder := runCfg(t, mpiConfig(t, root, "local", tc.sets...), t.TempDir(), false)
			restore()
			for _, np := range tc.nps {
				out := t.TempDir()
				log, err := mpitest.Run(t, np, "TestMPITrainingWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out,
					"GRADWIRE_TEST_SETS="+strings.Join(tc.sets, ";"))
				if err != nil {
					t.Fatalf("mpirun -np %d: %v\n%s", np, err, log)
				}
				got, err := ReadSummary(filepath.Join(out, "summary.json"))
				if err != nil {
					t.Fatalf("-np %d: %v\n%s", np, err, log)
				}
				if got.Backend != "mpi" || got.Compressor != local.Compressor || got.Steps != local.Steps || got.BytesSent != local.BytesSent ||
					got.CompressionRatio != local.CompressionRatio || got.CompressionRatioSteady != local.CompressionRatioSteady {
					t.Errorf("-np %d: summary %+v, local %+v", np, got, local)
				}
				sameLossesWithin(t, np, got, inOrder, 1e-6)
				t.Logf("-np %d: %d bytes sent, compression ratio %.3f (steady %.3f), test loss %.8f (local %.8f, summed in the processes' order %.8f)",
					np, got.BytesSent, got.CompressionRatio, got.CompressionRatioSteady, got.TestLoss, local.TestLoss, inOrder.TestLoss)
			}
		})
	}
}

// sameLosses fails t unless the run under mpirun -np np ended like the local
// backend's within float32 rounding: the losses to 1e-4 relative, the
// accuracy within 1.5 of the 64 test examples.
func sameLosses(t *testing.T, np int, got, local *Summary) {
	t.Helper()
	sameLossesWithin(t, np, got, local, 1e-4)
}

// sameLossesWithin is sameLosses with the losses' relative bound tol.
func sameLossesWithin(t *testing.T, np int, got, local *Summary, tol float64) {
	t.Helper()
	if d := math.Abs(got.TestLoss-local.TestLoss) / local.TestLoss; d > tol {
		t.Errorf("-np %d: test loss %v, local backend %v (relative difference %.2g, bound %g)", np, got.TestLoss, local.TestLoss, d, tol)
	}
	if math.Abs(*got.TestAccuracy-*local.TestAccuracy) > 1.5/64 {
		t.Errorf("-np %d: test accuracy %v, local backend %v", np, *got.TestAccuracy, *local.TestAccuracy)
	}
	if d := math.Abs(got.TrainLossFinal-local.TrainLossFinal) / local.TrainLossFinal; d > tol {
		t.Errorf("-np %d: train loss %v, local backend %v (relative difference %.2g, bound %g)", np, got.TrainLossFinal, local.TrainLossFinal, d, tol)
	}
}

func TestMPITrainingWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPITrainingEqualsLocal, TestMPIValidationEqualsLocal and TestMPICompressedTrainingEqualsLocal under mpirun")
	}
	var sets []string
	if s := os.Getenv("GRADWIRE_TEST_SETS"); s != "" {
		sets = strings.Split(s, ";")
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi", sets...)
	if p := os.Getenv("GRADWIRE_TEST_PRECISION"); p != "" {
		cfg.Model.Precision = p
	}
	if _, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")}); err != nil {
		t.Fatal(err)
	}
}

// TestMPIFloat64EqualsLocal: with model.precision float64 every backend sums
// the gradients in rank order, so the run under mpirun -np 2 ends with the
// local backend's parameters bit for bit.
func TestMPIFloat64EqualsLocal(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	cfg := mpiConfig(t, root, "local")
	cfg.Model.Precision = "float64"
	localDir, out := t.TempDir(), t.TempDir()
	runCfg(t, cfg, localDir, false)
	log, err := mpitest.Run(t, 2, "TestMPITrainingWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out,
		"GRADWIRE_TEST_PRECISION=float64")
	if err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, log)
	}
	want := loadNewest(t, cfg, localDir)
	got := loadNewest(t, cfg, out)
	for i, v := range got.Params {
		if math.Float32bits(v) != math.Float32bits(want.Params[i]) {
			t.Fatalf("parameter %d: %v under mpirun, %v with the local backend", i, v, want.Params[i])
		}
	}
}

// TestMPIRankDiesMidRun kills rank 1 in the middle of training: the job must fail
// within seconds, naming the rank, instead of hanging in a collective.
func TestMPIRankDiesMidRun(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	start := time.Now()
	log, err := mpitest.Run(t, 2, "TestMPIRankDiesWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+t.TempDir())
	took := time.Since(start)
	if err == nil {
		t.Fatalf("the job succeeded although rank 1 died:\n%s", log)
	}
	if took > 30*time.Second {
		t.Errorf("the job took %v to fail", took)
	}
	// mpirun names the process that exited: [[jobid,1],1] is rank 1.
	if !strings.Contains(log, ",1],1]") || !strings.Contains(log, "Exit code:    3") {
		t.Errorf("mpirun's output does not name rank 1 and its exit code:\n%s", log)
	}
	t.Logf("failed after %v", took.Round(time.Millisecond))
}

func TestMPIRankDiesWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPIRankDiesMidRun under mpirun")
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi")
	cfg.Train.Epochs = 1000 // would run for minutes
	cfg.Optim.LR = 0.005    // stays finite that long
	if rank, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_RANK")); rank == 1 {
		go func() {
			time.Sleep(2 * time.Second)
			os.Exit(3) // a crash: no MPI_Finalize
		}()
	}
	_, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")})
	t.Fatalf("training returned (%v) instead of being stopped by mpirun", err)
}

// TestMPIWorldSizeMismatch: dist.ranks names the expected world size.
func TestMPIWorldSizeMismatch(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	log, err := mpitest.Run(t, 2, "TestMPIWorldSizeWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+t.TempDir())
	if err == nil || !strings.Contains(log, "dist.ranks: the config expects 4 MPI ranks, but the job has 2") {
		t.Fatalf("expected a world-size error, got %v:\n%s", err, log)
	}
	log, err = mpitest.Run(t, 3, "TestMPIWorldSizeWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+t.TempDir(), "GRADWIRE_TEST_RANKS=0")
	if err == nil || !strings.Contains(log, "dist.workers: 4 logical workers cannot be split evenly over 3 MPI ranks") {
		t.Fatalf("expected an uneven-split error, got %v:\n%s", err, log)
	}
}

func TestMPIWorldSizeWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPIWorldSizeMismatch under mpirun")
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi")
	cfg.Dist.Ranks = 4
	if os.Getenv("GRADWIRE_TEST_RANKS") == "0" {
		cfg.Dist.Ranks = 0
	}
	_, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMPIRanksDisagree starts ranks whose configs differ in one key, each of
// which used to corrupt memory, hang or mis-report: every rank must fail at
// start-up with an error naming the key and which ranks hold which value. A
// hang fails the test at the job's timeout.
func TestMPIRanksDisagree(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	for _, tc := range []struct {
		np          int
		differ      string // rank:key=value
		wantInError string
	}{
		{2, "1:model.name=mlp", "model.name: lenet5 on rank 0, mlp on rank 1"},
		{2, "1:data.batch_size=8", "data.batch_size: 16 on rank 0, 8 on rank 1"},
		{2, "1:dist.check_every=5", "dist.check_every: 3 on rank 0, 5 on rank 1"},
		{2, "0:compress.name=topk", "compress.name: topk on rank 0, none on rank 1"},
		{4, "2:model.name=mlp", "model.name: lenet5 on ranks 0-1,3, mlp on rank 2"},
	} {
		var out bytes.Buffer
		err := mpitest.Job{NP: tc.np, Test: "TestMPIRanksDisagreeWorker", Timeout: time.Minute,
			Env: []string{"GRADWIRE_TEST_ROOT=" + root, "GRADWIRE_TEST_OUT=" + t.TempDir(), "GRADWIRE_TEST_DIFFER=" + tc.differ},
		}.Run(t, &out, &out)
		if err != nil {
			t.Errorf("-np %d, %s: %v\n%s", tc.np, tc.differ, err, out.String())
			continue
		}
		want := "ranks disagree on the run (every rank needs the same config, data and gradwire build): " + tc.wantInError
		for r := range tc.np {
			line := fmt.Sprintf("rank %d refused the run: %s\n", r, want)
			if !strings.Contains(out.String(), line) {
				t.Errorf("-np %d, %s: rank %d did not print\n%s\noutput:\n%s", tc.np, tc.differ, r, line, out.String())
			}
		}
	}
}

func TestMPIRanksDisagreeWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPIRanksDisagree under mpirun")
	}
	rank := os.Getenv("OMPI_COMM_WORLD_RANK")
	var sets []string
	if r, set, _ := strings.Cut(os.Getenv("GRADWIRE_TEST_DIFFER"), ":"); r == rank {
		sets = append(sets, set)
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi", sets...)
	_, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")})
	if err == nil {
		t.Fatalf("rank %s trained although the ranks' configs differ", rank)
	}
	fmt.Printf("rank %s refused the run: %v\n", rank, err)
}

// buildGradwire builds the gradwire command with MPI into a temporary folder.
func buildGradwire(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build gradwire: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gradwire")
	cmd := exec.Command(goTool, "build", "-tags", "mpi", "-o", bin, "github.com/gradwire/gradwire/cmd/gradwire")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// oneJSONDocument decodes stdout as exactly one JSON summary.
func oneJSONDocument(stdout string) (*Summary, error) {
	dec := json.NewDecoder(strings.NewReader(stdout))
	var s *Summary
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("stdout is not a JSON document: %w", err)
	}
	if s == nil {
		return nil, errors.New("stdout starts with null, not a summary")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, fmt.Errorf("stdout holds more than one JSON document (after the first: %.60q, %v)", extra, err)
	}
	return s, nil
}

// logLines are stderr's log lines without their time stamps.
func logLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "time=") {
			_, rest, _ := strings.Cut(l, " ")
			out = append(out, rest)
		}
	}
	return out
}

// TestMPICommandOutput runs gradwire train under mpirun -np 2: stdout is one
// JSON summary (rank 1 prints nothing there) and every log line comes once,
// from rank 0. Without mpirun, the local backend's stdout is one summary too.
func TestMPICommandOutput(t *testing.T) {
	bin := buildGradwire(t)
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	for _, backend := range []string{"mpi", "local"} {
		cfgPath := filepath.Join(t.TempDir(), "run.yaml")
		if err := mpiConfig(t, root, backend).WriteYAML(cfgPath); err != nil {
			t.Fatal(err)
		}
		argv := []string{bin, "train", "--config", cfgPath, "--out", filepath.Join(t.TempDir(), "run")}
		var stdout, stderr bytes.Buffer
		var err error
		if backend == "mpi" {
			err = mpitest.Job{NP: 2, Argv: argv}.Run(t, &stdout, &stderr)
		} else {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
		}
		if err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s", backend, err, stderr.String())
		}
		sum, err := oneJSONDocument(stdout.String())
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s", backend, err, stdout.String())
		}
		if sum.Backend != backend || sum.Workers != 4 || sum.Epochs != 2 {
			t.Errorf("%s: summary of backend %q, %d workers, %d epochs", backend, sum.Backend, sum.Workers, sum.Epochs)
		}
		lines := logLines(stderr.String())
		seen := map[string]bool{}
		for _, l := range lines {
			if seen[l] {
				t.Errorf("%s: log line printed twice: %s", backend, l)
			}
			seen[l] = true
		}
		for _, msg := range []string{"msg=run ", "msg=model ", "msg=workers ", "msg=data ", "msg=epoch epoch=1 ", "msg=epoch epoch=2 "} {
			if n := countPrefix(lines, "level=INFO "+msg); n != 1 {
				t.Errorf("%s: %d log lines start with %q, want 1\nstderr:\n%s", backend, n, msg, stderr.String())
			}
		}
	}
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestMPILocalBackendRefused: gradwire train with the local backend under
// mpirun -np 2 fails on both ranks, saying which setting to add, instead of
// running two trainings into one folder.
func TestMPILocalBackendRefused(t *testing.T) {
	bin := buildGradwire(t)
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	cfgPath := filepath.Join(t.TempDir(), "run.yaml")
	if err := mpiConfig(t, root, "local").WriteYAML(cfgPath); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	err := mpitest.Job{NP: 2, Argv: []string{bin, "train", "--config", cfgPath, "--out", runDir}}.Run(t, &stdout, &stderr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("mpirun: %v, want a non-zero exit\nstderr:\n%s", err, stderr.String())
	}
	for r := range 2 {
		want := fmt.Sprintf("gradwire: dist.backend: local trains in one process, but a launcher started this one as rank %d of 2 "+
			"(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=%d), so every rank would train alone into the same run directory: "+
			"add --set dist.backend=mpi (with gradwire built with -tags mpi) to train as one job, "+
			"or start a single process without the launcher\n", r, r)
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("rank %d's error missing; want\n%s\nstderr:\n%s", r, want, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %q, want nothing", stdout.String())
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("the run directory was created (%v)", err)
	}
}

// mpiCheckpointSets make mid-epoch checkpoints every 3 steps over epochs of 4
// steps (256 examples, 4 workers of 16), so that the count restarts at each
// epoch-end checkpoint.
var mpiCheckpointSets = []string{"train.epochs=3", "train.checkpoint_every=3", "train.keep_checkpoints=20"}

// TestMPICheckpointEveryAcrossEpochs trains under mpirun -np 2 with
// train.checkpoint_every shorter than an epoch: every rank must take the
// mid-epoch checkpoints at the same steps, counted from the epoch-end ones,
// or the ranks meet in different collectives. The run writes the checkpoints
// the local backend writes and ends as it does.
func TestMPICheckpointEveryAcrossEpochs(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 256, 64)
	localDir, out := t.TempDir(), t.TempDir()
	local := runCfg(t, mpiConfig(t, root, "local", mpiCheckpointSets...), localDir, false)
	log, err := mpitest.Run(t, 2, "TestMPICheckpointEveryWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out)
	if err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, log)
	}
	got, err := ReadSummary(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if got.Steps != 12 || got.Steps != local.Steps {
		t.Errorf("%d steps under mpirun, %d with the local backend, expected 12", got.Steps, local.Steps)
	}
	if d := math.Abs(got.TestLoss-local.TestLoss) / local.TestLoss; d > 1e-4 {
		t.Errorf("test loss %v, local backend %v", got.TestLoss, local.TestLoss)
	}
	// Mid-epoch at 3, 7 and 11, at the epoch ends 4, 8 and 12.
	want := []string{"step-00000003.ckpt", "step-00000004.ckpt", "step-00000007.ckpt", "step-00000008.ckpt", "step-00000011.ckpt", "step-00000012.ckpt"}
	for _, dir := range []string{localDir, out} {
		entries, err := os.ReadDir(filepath.Dir(checkpointPath(dir, 0)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: checkpoints %v, expected %v", dir, names, want)
		}
	}
}

func TestMPICheckpointEveryWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPICheckpointEveryAcrossEpochs under mpirun")
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi", mpiCheckpointSets...)
	if _, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")}); err != nil {
		t.Fatal(err)
	}
}

// sumInProcessOrder makes the local backend sum as procs MPI processes do:
// each process's workers in rank order, then the processes' sums. It returns
// the function that restores the flat group.
func sumInProcessOrder(t *testing.T, procs int) (restore func()) {
	t.Helper()
	prev := newLocalGroup
	newLocalGroup = func(workers int) ([]dist.Collective, error) {
		world, err := dist.NewLocal(procs)
		if err != nil {
			return nil, err
		}
		var members []dist.Collective
		for _, w := range world {
			m, err := dist.NewHierarchical(w, workers/procs)
			if err != nil {
				return nil, err
			}
			members = append(members, m...)
		}
		return members, nil
	}
	return func() { newLocalGroup = prev }
}
