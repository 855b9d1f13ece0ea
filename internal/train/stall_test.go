package train

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestStallCounting: an epoch after the warm-up counts as stalled when its
// training loss is at least 0.99 x ln(classes); the run stops when more than
// half of the last train.stall_epochs epochs stalled (with 2, both), and the
// error names the window's epochs and losses.
func TestStallCounting(t *testing.T) {
	bound := 0.99 * math.Log(10)
	if bound < 2.2795 || bound > 2.2797 {
		t.Fatalf("bound %v", bound)
	}
	hist := []EpochResult{{Epoch: 1, TrainLoss: 2.31}, {Epoch: 2, TrainLoss: 2.31}, {Epoch: 3, TrainLoss: 2.30}, {Epoch: 4, TrainLoss: 1.9}, {Epoch: 5, TrainLoss: 2.2797}}
	s := newStall(2, 2, 10, 0, hist)
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
	if err == nil || !strings.Contains(err.Error(), "stalled: epochs 9-10 after the learning-rate warm-up had mean training losses of 2.5000, 2.3026, 2 of 2 at or above 2.2796 = 0.99 x ln(10 classes)") ||
		!strings.Contains(err.Error(), "(train.stall_epochs 2: more than half of the last 2 epochs)") {
		t.Fatalf("err = %v", err)
	}
	// Epochs within the warm-up (here 2.5 of them) never count.
	s = newStall(1, 2.5, 10, 0, []EpochResult{{Epoch: 1, TrainLoss: 3}, {Epoch: 2, TrainLoss: 3}})
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	if err := s.afterEpoch(&epochDone{pos: position{epoch: 3}, trainLoss: 3}); err == nil {
		t.Fatal("epoch 3 is past a 2.5-epoch warm-up")
	}

	// With 3, two stalled epochs of the last three stop the run: a network
	// that diverged after an 8-epoch warm-up and wanders around 2.30 (LAMB at
	// lr 0.15 on ResNet-20 at batch 8192: 1.59, 2.12, 3.09, 2.26, 3.89 in
	// epochs 13-17).
	s = newStall(3, 8, 10, 0, nil)
	for i, l := range []float64{0.74, 0.97, 1.08, 1.41, 1.59, 2.12} {
		if err := s.afterEpoch(&epochDone{pos: position{epoch: 9 + i}, trainLoss: l}); err != nil {
			t.Fatalf("epoch %d: %v", 9+i, err)
		}
	}
	if err := s.afterEpoch(&epochDone{pos: position{epoch: 15}, trainLoss: 3.09}); err != nil {
		t.Fatalf("epoch 15: one of 1.59, 2.12, 3.09 stalled: %v", err)
	}
	if err := s.afterEpoch(&epochDone{pos: position{epoch: 16}, trainLoss: 2.26}); err != nil {
		t.Fatalf("epoch 16: one of 2.12, 3.09, 2.26 stalled: %v", err)
	}
	err = s.afterEpoch(&epochDone{pos: position{epoch: 17}, trainLoss: 3.89})
	if err == nil || !strings.Contains(err.Error(), "stalled: epochs 15-17 after the learning-rate warm-up had mean training losses of 3.0900, 2.2600, 3.8900, 2 of 3 at or above 2.2796") {
		t.Fatalf("epoch 17: err = %v", err)
	}
	// One epoch at a uniform guess's loss among good ones is not a stall, nor
	// is a window not yet full, nor one that reaches back into the warm-up.
	s = newStall(3, 1, 10, 0, []EpochResult{{Epoch: 1, TrainLoss: 9}, {Epoch: 2, TrainLoss: 5}, {Epoch: 3, TrainLoss: 2.4}})
	if err := s.check(); err != nil {
		t.Fatalf("epochs 2-3 are two epochs of a window of 3: %v", err)
	}
	s = newStall(3, 1, 10, 0, []EpochResult{{Epoch: 1, TrainLoss: 9}, {Epoch: 2, TrainLoss: 1.1}, {Epoch: 3, TrainLoss: 2.4}})
	for i, l := range []float64{1.0, 1.0, 5.0, 1.0, 1.0} {
		if err := s.afterEpoch(&epochDone{pos: position{epoch: 4 + i}, trainLoss: l}); err != nil {
			t.Fatalf("epoch %d: %v", 4+i, err)
		}
	}
	// Resumed from that history the same window counts the same.
	hist = []EpochResult{{Epoch: 1, TrainLoss: 0.5}, {Epoch: 2, TrainLoss: 2.4}, {Epoch: 3, TrainLoss: 1.2}, {Epoch: 4, TrainLoss: 2.9}}
	if err := newStall(3, 1, 10, 0, hist).check(); err == nil || !strings.Contains(err.Error(), "epochs 2-4 ") {
		t.Fatalf("resumed history 2.4, 1.2, 2.9 after the warm-up: err = %v", err)
	}
}

// TestStallBoundWithLabelSmoothing: with smoothing 0.95 over 10 classes the
// targets are 0.145 on the label and 0.095 elsewhere, entropy
// -0.145 ln 0.145 - 9 x 0.095 ln 0.095 = 0.2800 + 2.0126 = 2.2926 (worked by
// hand), above 0.99 x ln 10 = 2.2796: a run that fits its targets perfectly
// must not count as stalled. The bound is 0.99 of the way from that entropy
// to ln 10 = 2.302585.
func TestStallBoundWithLabelSmoothing(t *testing.T) {
	h := -0.145*math.Log(0.145) - 9*0.095*math.Log(0.095)
	if got := targetEntropy(10, 0.95); math.Abs(got-h) > 1e-12 || math.Abs(h-2.2926) > 1e-4 {
		t.Fatalf("targetEntropy(10, 0.95) = %v, want %v (2.2926)", got, h)
	}
	if targetEntropy(10, 0) != 0 {
		t.Fatal("one-hot targets have entropy 0")
	}
	s := newStall(1, 0, 10, 0.95, nil)
	if want := h + 0.99*(math.Log(10)-h); math.Abs(s.bound-want) > 1e-12 {
		t.Fatalf("bound %v, want %v", s.bound, want)
	}
	if err := s.afterEpoch(&epochDone{pos: position{epoch: 1}, trainLoss: h + 1e-3}); err != nil {
		t.Fatalf("a loss near the targets' entropy is learning, not a stall: %v", err)
	}
	err := s.afterEpoch(&epochDone{pos: position{epoch: 2}, trainLoss: math.Log(10)})
	if err == nil || !strings.Contains(err.Error(), "0.99 of the way from the label-smoothed targets' entropy 2.2926 to ln(10 classes)") {
		t.Fatalf("a uniform guess's loss: err = %v", err)
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
