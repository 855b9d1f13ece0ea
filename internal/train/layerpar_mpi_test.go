//go:build mpi && cgo

package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gradwire/gradwire/dist/mpitest"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestMPILayerParallelEqualsLocal runs the layer-parallel method with one
// rank per stage (mpirun -np 2) and in one process: the parallel rounds do
// the same arithmetic, the serial epoch differs by the all-reduce's order, so
// the final test loss agrees within float32 rounding; the traffic counts are
// the same.
func TestMPILayerParallelEqualsLocal(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 96, 32)
	local := runCfg(t, layerParallelConfig(t, root, "local"), t.TempDir(), false)
	out := t.TempDir()
	log, err := mpitest.Run(t, 2, "TestMPILayerParallelWorker", "GRADWIRE_TEST_ROOT="+root, "GRADWIRE_TEST_OUT="+out)
	if err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, log)
	}
	got, err := ReadSummary(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if got.LayerParallel == nil || got.LayerParallel.AuxBytes != local.LayerParallel.AuxBytes ||
		got.LayerParallel.InitBytes != local.LayerParallel.InitBytes {
		t.Errorf("mpi %+v, local %+v", got.LayerParallel, local.LayerParallel)
	}
	if d := math.Abs(got.TestLoss - local.TestLoss); d > 1e-3*math.Abs(local.TestLoss) {
		t.Errorf("test loss: mpi %.6f, local %.6f", got.TestLoss, local.TestLoss)
	}
	t.Logf("test loss mpi %.6f local %.6f", got.TestLoss, local.TestLoss)
}

func TestMPILayerParallelWorker(t *testing.T) {
	if !mpitest.Worker() {
		t.Skip("run by TestMPILayerParallelEqualsLocal under mpirun")
	}
	cfg := layerParallelConfig(t, os.Getenv("GRADWIRE_TEST_ROOT"), "mpi")
	if _, err := Run(context.Background(), cfg, Options{OutDir: os.Getenv("GRADWIRE_TEST_OUT")}); err != nil {
		t.Fatal(err)
	}
}
