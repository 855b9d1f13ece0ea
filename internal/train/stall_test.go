package train

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestStallCounting: epochs count as stalled after the warm-up while their
// training loss is at least 0.99 x ln(classes); a better epoch ends the run of
// stalled epochs, and the error names them.
func TestStallCounting(t *testing.T) {
	bound := 0.99 * math.Log(10)
	if bound < 2.2795 || bound > 2.2797 {
		t.Fatalf("bound %v", bound)
	}
	hist := []EpochResult{{Epoch: 1, TrainLoss: 2.31}, {Epoch: 2, TrainLoss: 2.31}, {Epoch: 3, TrainLoss: 2.30}, {Epoch: 4, TrainLoss: 1.9}, {Epoch: 5, TrainLoss: 2.2797}}
	s := newStall(2, 2, 10, hist)
	if err := s.check(); err != nil {
		t.Fatalf("one stalled epoch since epoch 4's 1.9: %v", err)
	}
	err := s.afterEpoch(&epochDone{pos: position{epoch: 6}, trainLoss: 2.2795})
	if err != nil {
		t.Fatalf("2.2795 is below the bound %v: %v", bound, err)
	}
	_ = s.afterEpoch(&epochDone{pos: position{epoch: 7}, trainLoss: 2.4})
	err = s.afterEpoch(&epochDone{pos: position{epoch: 8}, trainLoss: math.NaN()})
	if err != nil {
		t.Fatalf("a NaN loss is divergence's, not a stall: %v", err)
	}
	_ = s.afterEpoch(&epochDone{pos: position{epoch: 9}, trainLoss: 2.5})
	err = s.afterEpoch(&epochDone{pos: position{epoch: 10}, trainLoss: 2.3026})
	if err == nil || !strings.Contains(err.Error(), "stalled: epochs 9-10 after the learning-rate warm-up had a mean training loss of 2.5000, 2.3026, at or above 2.2796 = 0.99 x ln(10 classes)") {
		t.Fatalf("err = %v", err)
	}
	// Epochs within the warm-up (here 2.5 of them) never count.
	s = newStall(1, 2.5, 10, []EpochResult{{Epoch: 1, TrainLoss: 3}, {Epoch: 2, TrainLoss: 3}})
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	if err := s.afterEpoch(&epochDone{pos: position{epoch: 3}, trainLoss: 3}); err == nil {
		t.Fatal("epoch 3 is past a 2.5-epoch warm-up")
	}
}

// TestStalledRunStops: a run whose learning rate is too small to move the loss
// stops after train.stall_epochs epochs past its warm-up, with those epochs
// recorded and checkpointed; resuming it stops at once, and a run that
// learns is not stopped.
func TestStalledRunStops(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(t, "mlp", "model.hidden=32", "optim.lr=1e-9", "train.epochs=6", "schedule.warmup_epochs=1", "train.stall_epochs=2")
	_, err := Run(context.Background(), cfg, Options{OutDir: dir})
	if err == nil || !strings.Contains(err.Error(), "stalled: epochs 2-3 ") || !strings.Contains(err.Error(), "train.stall_epochs 2") {
		t.Fatalf("err = %v, want a stall at epochs 2-3", err)
	}
	if n := len(readEpochs(t, dir)); n != 3 {
		t.Fatalf("%d epoch records, want the 3 trained", n)
	}
	_, err = Run(context.Background(), cfg, Options{OutDir: dir, Resume: true})
	if err == nil || !strings.Contains(err.Error(), "stalled: epochs 2-3 ") {
		t.Fatalf("resumed: err = %v, want the same stall before any training", err)
	}
	if n := len(readEpochs(t, dir)); n != 3 {
		t.Fatalf("resumed: %d epoch records, want still 3", n)
	}

	cfg = smallConfig(t, "mlp", "model.hidden=32", "train.epochs=4", "schedule.warmup_epochs=1", "train.stall_epochs=1")
	runCfg(t, cfg, t.TempDir(), false)
}
