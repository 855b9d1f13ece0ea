//go:build mpi && cgo

package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist/mpitest"
	"github.com/gradwire/gradwire/internal/datatest"
)

// mpiConfig is the run the MPI tests train: 4 logical workers on the synthetic
// data set in root.
func mpiConfig(t *testing.T, root, backend string) configs.Config {
	t.Helper()
	cfg, err := configs.Load("", []string{"data.dir=" + root, "model.name=lenet5", "data.batch_size=16",
		"dist.workers=4", "dist.replicas=1", "dist.backend=" + backend, "dist.check_every=3", "train.epochs=2",
		"train.progress=false", "optim.lr=0.05"})
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
		if d := math.Abs(got.TestLoss-local.TestLoss) / local.TestLoss; d > 1e-4 {
			t.Errorf("-np %d: test loss %v, local backend %v", np, got.TestLoss, local.TestLoss)
		}
		if math.Abs(*got.TestAccuracy-*local.TestAccuracy) > 1.5/64 {
			t.Errorf("-np %d: test accuracy %v, local backend %v", np, *got.TestAccuracy, *local.TestAccuracy)
		}
		if d := math.Abs(got.TrainLossFinal-local.TrainLossFinal) / local.TrainLossFinal; d > 1e-4 {
			t.Errorf("-np %d: train loss %v, local backend %v", np, got.TrainLossFinal, local.TrainLossFinal)
		}
		t.Logf("-np %d: test loss %.6f (local %.6f), accuracy %.4f (local %.4f)", np, got.TestLoss, local.TestLoss,
			*got.TestAccuracy, *local.TestAccuracy)
		// Only rank 0 writes the run directory.
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("-np %d: stray file %s in the run directory", np, e.Name())
			}
		}
	}
}

func TestMPITrainingWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPITrainingEqualsLocal under mpirun")
	}
	cfg := mpiConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi")
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
	want, err := loadCheckpoint(latestPath(t, localDir), cfgLayout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadCheckpoint(latestPath(t, out), cfgLayout(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
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
