package train

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// epochEnd is a checkpoint of testLayout at the end of epoch e of 10 steps,
// whose epoch records have the given test losses (one per epoch, len >= e).
func epochEnd(e int, losses []float64) *checkpoint {
	c := fullCheckpoint(testLayout())
	c.Epoch, c.GlobalStep, c.StepInEpoch, c.LossSum, c.EpochSeconds, c.ReplicaBuffers = e, 10*e, 0, 0, 0, nil
	c.Epochs = nil
	for i := range e {
		c.Epochs = append(c.Epochs, EpochResult{Kind: "epoch", Epoch: i + 1, Step: 10 * (i + 1), TestLoss: losses[i]})
	}
	return c
}

func writeCkpt(t *testing.T, dir string, c *checkpoint) string {
	t.Helper()
	path := checkpointPath(dir, c.GlobalStep)
	if err := saveCheckpoint(path, c); err != nil {
		t.Fatal(err)
	}
	return path
}

// ckptNames lists the file names in dir/checkpoints.
func ckptNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, checkpointDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestCheckpointNamesSortByStep(t *testing.T) {
	dir := t.TempDir()
	if got := filepath.Base(checkpointPath(dir, 1234)); got != "step-00001234.ckpt" {
		t.Fatalf("name %q, expected step-00001234.ckpt", got)
	}
	if !(checkpointPath(dir, 99) < checkpointPath(dir, 100)) {
		t.Fatal("names do not sort by step")
	}
	cdir := filepath.Join(dir, checkpointDir)
	if err := os.MkdirAll(filepath.Join(cdir, "step-00000007.ckpt"), 0o755); err != nil { // a folder, not a checkpoint
		t.Fatal(err)
	}
	for _, name := range []string{"step-00000005.ckpt", "step-123456789.ckpt", "step-00000100.ckpt", "step-x.ckpt", "step-.ckpt",
		"epoch-0003.ckpt", "00000400.ckpt", ".step-00000200.ckpt.tmp123", "step-00000300.ckpt.bak", "step-99999999999999999999999.ckpt"} {
		if err := os.WriteFile(filepath.Join(cdir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := listCheckpoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, f := range files {
		steps = append(steps, f.step)
	}
	if !slices.Equal(steps, []int{123456789, 100, 5}) {
		t.Fatalf("steps %v, expected 123456789, 100, 5 (newest first, other names ignored)", steps)
	}
	if files, err := listCheckpoints(t.TempDir()); err != nil || files != nil {
		t.Fatalf("a run directory without checkpoints: %v, %v", files, err)
	}
}

func TestLatestCheckpointSkipsDamaged(t *testing.T) {
	l := testLayout()
	dir := t.TempDir()
	losses := []float64{3, 2, 1}
	writeCkpt(t, dir, epochEnd(1, losses))
	p2 := writeCkpt(t, dir, epochEnd(2, losses))
	p3 := writeCkpt(t, dir, epochEnd(3, losses))

	c, path, skipped, err := latestCheckpoint(dir, l)
	if err != nil || path != p3 || c.Epoch != 3 || len(skipped) != 0 {
		t.Fatalf("latest: %s epoch %v, skipped %v, error %v; expected %s", path, c, skipped, err, p3)
	}
	raw, _ := os.ReadFile(p3)
	raw[len(raw)/2] ^= 1
	os.WriteFile(p3, raw, 0o644)
	raw, _ = os.ReadFile(p2)
	os.WriteFile(p2, raw[:len(raw)/3], 0o644)
	c, path, skipped, err = latestCheckpoint(dir, l)
	if err != nil || c.Epoch != 1 || path != checkpointPath(dir, 10) {
		t.Fatalf("with the two newest damaged: %s, error %v; expected the epoch 1 checkpoint", path, err)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0].Error(), p3) || !strings.Contains(skipped[0].Error(), "corrupt or truncated (CRC-32") ||
		!strings.Contains(skipped[1].Error(), p2) {
		t.Fatalf("skipped %v, expected %s and %s with the reason", skipped, p3, p2)
	}
	os.WriteFile(checkpointPath(dir, 10), []byte("GWCK"), 0o644)
	_, _, skipped, err = latestCheckpoint(dir, l)
	if err == nil || len(skipped) != 3 || !strings.Contains(err.Error(), "no usable checkpoint in "+dir) ||
		!strings.Contains(err.Error(), p3) || !strings.Contains(err.Error(), checkpointPath(dir, 10)+": corrupt or truncated (4 bytes") {
		t.Fatalf("all damaged: error %v, skipped %d", err, len(skipped))
	}
}

// A newest checkpoint that verifies but does not fit the run stops the search:
// the older ones of the same run would not fit either.
func TestLatestCheckpointStopsAtMismatch(t *testing.T) {
	dir := t.TempDir()
	losses := []float64{3, 2}
	writeCkpt(t, dir, epochEnd(1, losses))
	writeCkpt(t, dir, epochEnd(2, losses))
	l := testLayout()
	l.model = "lenet5"
	_, _, skipped, err := latestCheckpoint(dir, l)
	if err == nil || len(skipped) != 0 || !strings.Contains(err.Error(), checkpointPath(dir, 20)) || !strings.Contains(err.Error(), `field Model: "mlp", but the config builds "lenet5"`) {
		t.Fatalf("error %v, skipped %v", err, skipped)
	}
}

func TestLatestCheckpointRefusesFormat1(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, checkpointDir), 0o755)
	old := filepath.Join(dir, checkpointDir, "epoch-0003.ckpt")
	os.WriteFile(old, frame([]byte("GWCKPT01gob")), 0o644)
	_, _, _, err := latestCheckpoint(dir, testLayout())
	if err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), "older version of gradwire") {
		t.Fatalf("error %v, expected %s to be refused as written by an older version", err, old)
	}
	_, _, _, err = latestCheckpoint(t.TempDir(), testLayout())
	if err == nil || !strings.Contains(err.Error(), "no checkpoint in") || !strings.Contains(err.Error(), "step-NNNNNNNN.ckpt") {
		t.Fatalf("error %v for an empty run directory", err)
	}
}

func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	writeCkpt(t, dir, epochEnd(1, []float64{1}))
	stale := []string{filepath.Join(dir, ".summary.json.tmp4242"), filepath.Join(dir, checkpointDir, ".step-00000020.ckpt.tmp17")}
	for _, p := range append(stale, filepath.Join(dir, "metrics.jsonl"), filepath.Join(dir, ".keep.tmp")) {
		os.WriteFile(p, []byte("x"), 0o644)
	}
	removed, err := removeStaleTemps(dir)
	if err != nil || !slices.Equal(removed, stale) {
		t.Fatalf("removed %q (%v), expected %q", removed, err, stale)
	}
	for _, p := range []string{checkpointPath(dir, 10), filepath.Join(dir, "metrics.jsonl"), filepath.Join(dir, ".keep.tmp")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	// A fresh run directory has no checkpoints folder yet.
	if removed, err := removeStaleTemps(t.TempDir()); err != nil || removed != nil {
		t.Fatalf("fresh directory: %v, %v", removed, err)
	}
}

func TestPruneCheckpoints(t *testing.T) {
	dir := t.TempDir()
	losses := []float64{0.9, 0.5, 0.7, 0.6, 0.8, 0.95}
	for e := 1; e <= 6; e++ {
		writeCkpt(t, dir, epochEnd(e, losses))
		if e == 2 {
			// Mid-epoch after epoch 2: its last record is epoch 2's (the
			// lowest loss), but its parameters are not epoch 2's.
			c := epochEnd(2, losses)
			c.GlobalStep, c.StepInEpoch, c.LossSum = 25, 5, 2.5
			writeCkpt(t, dir, c)
		}
	}
	// Damaged (older than the kept ones) and of another format: the first goes,
	// the second is left alone.
	damaged := checkpointPath(dir, 5)
	os.WriteFile(damaged, []byte("GWCKPT06 and not much else"), 0o644)
	foreign := checkpointPath(dir, 7)
	os.WriteFile(foreign, frame([]byte("GWCKPT07 a later format")), 0o644)

	if err := pruneCheckpoints(dir, 2); err != nil {
		t.Fatal(err)
	}
	want := []string{"step-00000007.ckpt", "step-00000020.ckpt", "step-00000050.ckpt", "step-00000060.ckpt"}
	if got := ckptNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("kept %q, expected %q (the newest two, the best epoch end, the foreign file)", got, want)
	}
	// Idempotent, and keep 1 drops the second newest.
	if err := pruneCheckpoints(dir, 1); err != nil {
		t.Fatal(err)
	}
	if got := ckptNames(t, dir); !slices.Equal(got, []string{"step-00000007.ckpt", "step-00000020.ckpt", "step-00000060.ckpt"}) {
		t.Fatalf("kept %q after keep=1", got)
	}
	if err := pruneCheckpoints(dir, 0); err == nil || !strings.Contains(err.Error(), "keep 0, expected at least 1 (train.keep_checkpoints)") {
		t.Fatalf("error %v for keep 0", err)
	}
}

// When the newest checkpoints are damaged, pruning keeps the newest ones that
// verify; when none verifies, it deletes nothing.
// TestPruneKeepsBestOnValidation: with validation figures in the records
// (data.validation), the kept best epoch end is the one with the lowest
// validation loss, not the lowest test loss.
func TestPruneKeepsBestOnValidation(t *testing.T) {
	dir := t.TempDir()
	test := []float64{0.9, 0.5, 0.7, 0.6, 0.8}
	val := []float64{0.9, 0.8, 0.4, 0.6, 0.7}
	for e := 1; e <= 5; e++ {
		c := epochEnd(e, test)
		for i := range c.Epochs {
			c.Epochs[i].ValLoss, c.Epochs[i].ValAccuracy = ptr(val[i]), ptr(0.5)
		}
		writeCkpt(t, dir, c)
	}
	if err := pruneCheckpoints(dir, 1); err != nil {
		t.Fatal(err)
	}
	// Epoch 3 (step 30) has the lowest validation loss; epoch 2 the lowest test loss.
	if got, want := ckptNames(t, dir), []string{"step-00000030.ckpt", "step-00000050.ckpt"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, expected %q (the newest, and the best on validation)", got, want)
	}
}

func TestPruneKeepsNewestValid(t *testing.T) {
	dir := t.TempDir()
	losses := []float64{1, 2, 3, 4}
	for e := 1; e <= 4; e++ {
		writeCkpt(t, dir, epochEnd(e, losses))
	}
	for _, step := range []int{30, 40} {
		raw, _ := os.ReadFile(checkpointPath(dir, step))
		os.WriteFile(checkpointPath(dir, step), raw[:len(raw)-1], 0o644)
	}
	// The newest passes the CRC but holds a position that does not load.
	crafted := epochEnd(5, []float64{1, 2, 3, 4, 5})
	crafted.MetricsOffset = 1 << 40
	os.WriteFile(checkpointPath(dir, 50), encodeRaw(t, crafted), 0o644)
	if _, kind, err := scanCheckpoint(checkpointPath(dir, 50)); kind != scanBad || !strings.Contains(err.Error(), "field MetricsOffset") {
		t.Fatalf("scan of a crafted file: kind %d, error %v", kind, err)
	}
	if err := pruneCheckpoints(dir, 1); err != nil {
		t.Fatal(err)
	}
	// Epoch 2 is the newest valid one; epoch 1 has the lowest loss.
	if got := ckptNames(t, dir); !slices.Equal(got, []string{"step-00000010.ckpt", "step-00000020.ckpt"}) {
		t.Fatalf("kept %q", got)
	}
	for _, step := range []int{10, 20} {
		os.WriteFile(checkpointPath(dir, step), []byte("GWCKPT02"), 0o644)
	}
	if err := pruneCheckpoints(dir, 1); err != nil {
		t.Fatal(err)
	}
	if got := ckptNames(t, dir); len(got) != 2 {
		t.Fatalf("kept %q, expected both damaged files left when none verifies", got)
	}
}

func TestNewestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if pos, ok, err := NewestCheckpoint(dir); pos != (CheckpointPosition{}) || ok || err != nil {
		t.Fatalf("empty directory: %+v, %v, %v", pos, ok, err)
	}
	losses := []float64{3, 2, 1}
	writeCkpt(t, dir, epochEnd(1, losses))
	writeCkpt(t, dir, epochEnd(2, losses))
	mid := epochEnd(2, losses)
	mid.GlobalStep, mid.StepInEpoch = 24, 4
	writeCkpt(t, dir, mid)
	os.WriteFile(checkpointPath(dir, 30), []byte("GWCKPT02 cut"), 0o644)
	if pos, ok, err := NewestCheckpoint(dir); pos != (CheckpointPosition{Epochs: 2, StepInEpoch: 4, StepsPerEpoch: 10}) || !ok || err != nil {
		t.Fatalf("got %+v, %v, %v; expected 2 epochs and 4 steps (of 10 an epoch) from the mid-epoch checkpoint at step 24", pos, ok, err)
	}
	// Fields no run could write (90 steps into an epoch of (100-90)/2 = 5):
	// the position stands, the count is unknown.
	odd := t.TempDir()
	bad := epochEnd(2, losses)
	bad.GlobalStep, bad.StepInEpoch = 100, 90
	writeCkpt(t, odd, bad)
	if pos, ok, err := NewestCheckpoint(odd); pos != (CheckpointPosition{Epochs: 2, StepInEpoch: 90}) || !ok || err != nil {
		t.Fatalf("inconsistent step fields: %+v, %v, %v; expected no steps per epoch", pos, ok, err)
	}
	legacy := t.TempDir()
	os.MkdirAll(filepath.Join(legacy, checkpointDir), 0o755)
	os.WriteFile(filepath.Join(legacy, checkpointDir, "epoch-0002.ckpt"), nil, 0o644)
	if _, ok, err := NewestCheckpoint(legacy); ok || err == nil || !strings.Contains(err.Error(), "older version") {
		t.Fatalf("format 1 directory: %v, %v", ok, err)
	}
}
