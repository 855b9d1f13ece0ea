package train

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/datatest"
)

// layerParallelConfig is a small train.mode layer_parallel run of ResNet-20
// on the synthetic Fashion-MNIST in root: K = dist.workers stages, 3 epochs,
// the last serial.
func layerParallelConfig(t *testing.T, root, backend string, sets ...string) configs.Config {
	t.Helper()
	cfg, err := configs.Load("", append([]string{"data.dir=" + root, "model.name=resnet20", "data.global_batch=32",
		"dist.workers=2", "dist.backend=" + backend, "train.epochs=3", "train.progress=false", "train.checkpoint=false",
		"train.mode=layer_parallel", "layer_parallel.serial_epochs=1", "layer_parallel.rho=0.003",
		"layer_parallel.u_curvature=0.03", "optim.lr=0.05"}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLayerParallelRun trains 2 parallel rounds and 1 serial epoch and checks
// the run's records and its layer_parallel summary.
func TestLayerParallelRun(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	datatest.WriteFakeFashion(t, root, 96, 32)
	sum := runCfg(t, layerParallelConfig(t, root, "local"), dir, false)
	lp := sum.LayerParallel
	if lp == nil {
		t.Fatal("no layer_parallel section in the summary")
	}
	if lp.Stages != 2 || lp.ParallelRounds != 2 || lp.SerialEpochs != 1 || len(lp.StageSecondsPerExample) != 2 {
		t.Errorf("summary %+v", lp)
	}
	// Boundary after block 4 (s2b1): 32x14x14, filtered to 32x7x7, 2 bytes a value.
	if len(lp.BoundaryBytesPerExample) != 1 || lp.BoundaryBytesPerExample[0] != 32*7*7*2 {
		t.Errorf("boundary bytes %v, want [%d]", lp.BoundaryBytesPerExample, 32*7*7*2)
	}
	if want := int64(2 * 96 * 32 * 7 * 7 * 2); lp.AuxBytesPerRound != want || lp.AuxBytes != 2*want {
		t.Errorf("aux bytes per round %d (want %d), in all %d (want %d)", lp.AuxBytesPerRound, want, lp.AuxBytes, 2*want)
	}
	if lp.PredictedSpeedup <= 0 || lp.ParallelSeconds <= 0 || lp.SerialSeconds <= 0 {
		t.Errorf("times and prediction %+v", lp)
	}
	if sum.Steps != 3*3 || sum.Epochs != 3 {
		t.Errorf("steps %d epochs %d, want 9 and 3", sum.Steps, sum.Epochs)
	}
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	epochs := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		var r struct{ Kind string }
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "epoch" {
			epochs++
		}
	}
	if epochs != 3 {
		t.Errorf("%d epoch records, want 3", epochs)
	}
}

// TestLayerParallelConfigErrors: the rules train.mode layer_parallel adds name
// the key and the value.
func TestLayerParallelConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"model.name=lenet5"}, `model.name: "lenet5": with train.mode layer_parallel needs a CIFAR ResNet`},
		{[]string{"dist.workers=10"}, "dist.workers: 10: with train.mode layer_parallel is the number of stages K: must be in [1, 9]"},
		{[]string{"layer_parallel.serial_epochs=3"}, "layer_parallel.serial_epochs: 3: must be below train.epochs (3)"},
		{[]string{"compress.name=topk"}, `compress.name: "topk": with train.mode layer_parallel needs compress.name none`},
		{[]string{"train.stall_epochs=3"}, "train.stall_epochs: 3: with train.mode layer_parallel needs train.stall_epochs 0"},
		{[]string{"train.mode=pipeline"}, `train.mode: "pipeline": must be one of serial, layer_parallel`},
		{[]string{"layer_parallel.method=admm"}, `layer_parallel.method: "admm": must be one of penalty, augmented_lagrangian`},
	} {
		_, err := configs.Load("", append([]string{"model.name=resnet20", "dist.workers=2", "train.epochs=3",
			"train.mode=layer_parallel"}, tc.sets...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.sets, err, tc.want)
		}
	}
}
