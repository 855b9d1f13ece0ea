package train

import (
	"path/filepath"
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestLeNetLearnsFashionMNIST trains the shipped quickstart config on the real
// data for 150 steps; 9600 images are enough for well above chance (10%).
func TestLeNetLearnsFashionMNIST(t *testing.T) {
	dir := filepath.Dir(datatest.Dir(t, "fashion-mnist"))
	cfg, err := configs.Load("../../configs/quickstart.yaml", []string{"data.dir=" + dir,
		"train.max_steps=150", "train.eval_limit=2000", "train.progress=false"})
	if err != nil {
		t.Fatal(err)
	}
	sum := runCfg(t, cfg, t.TempDir(), false)
	if *sum.TestAccuracy < 0.65 {
		t.Fatalf("test accuracy %.3f after 150 steps, expected > 0.65", *sum.TestAccuracy)
	}
	t.Logf("test accuracy %.3f, %.0f samples/s", *sum.TestAccuracy, sum.SamplesPerSecond)
}

// TestCharLSTMLearnsShakespeare checks that the language model gets well below the
// uniform loss ln(65) = 4.17 nats per character within 60 steps.
func TestCharLSTMLearnsShakespeare(t *testing.T) {
	dir := filepath.Dir(datatest.Dir(t, "tinyshakespeare"))
	cfg, err := configs.Load("../../configs/charlstm-shakespeare.yaml", []string{"data.dir=" + dir,
		"train.epochs=1", "train.max_steps=60", "train.eval_limit=64", "train.progress=false"})
	if err != nil {
		t.Fatal(err)
	}
	sum := runCfg(t, cfg, t.TempDir(), false)
	if sum.TestLoss > 3.3 {
		t.Fatalf("validation loss %.3f nats after 60 steps, expected < 3.3", sum.TestLoss)
	}
	t.Logf("validation loss %.3f nats, %.3f bits per character", sum.TestLoss, *sum.ValBPC)
}
