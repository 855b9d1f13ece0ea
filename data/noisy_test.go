package data_test

import (
	"testing"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestNoisyLabels: 10% of 200 fake examples get another class, the same ones
// for the same seed, and the others keep theirs.
func TestNoisyLabels(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 200, 10)
	ds, err := data.Open(data.Options{Name: "fashion-mnist", Dir: root}, "train")
	if err != nil {
		t.Fatal(err)
	}
	a, err := data.NewNoisyLabels(ds, 0.1, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := data.NewNoisyLabels(ds, 0.1, 7)
	if a.Count() != 20 {
		t.Fatalf("%d flipped, want 20", a.Count())
	}
	x := make([]float32, 28*28)
	clean, noisy, again := make([]int32, 1), make([]int32, 1), make([]int32, 1)
	flipped := 0
	for i := range ds.Len() {
		ds.Fill([]int{i}, x, clean)
		a.Fill([]int{i}, x, noisy)
		b.Fill([]int{i}, x, again)
		if noisy[0] != again[0] {
			t.Fatalf("example %d: labels %d and %d for the same seed", i, noisy[0], again[0])
		}
		if a.Flipped(i) {
			flipped++
			if noisy[0] == clean[0] || noisy[0] < 0 || noisy[0] >= int32(ds.Classes()) {
				t.Fatalf("example %d: flipped from %d to %d", i, clean[0], noisy[0])
			}
		} else if noisy[0] != clean[0] {
			t.Fatalf("example %d changed label without being flipped", i)
		}
	}
	if flipped != 20 {
		t.Fatalf("%d examples report a flip, want 20", flipped)
	}
	if _, err := data.NewNoisyLabels(ds, 1, 7); err == nil {
		t.Error("fraction 1 gave no error")
	}
}
