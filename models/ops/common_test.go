package ops

import "testing"

func TestBackwardOpsAreNotDifferentiated(t *testing.T) {
	var op backwardOp
	if d := op.DiffWRT(3); len(d) != 3 || d[0] || d[1] || d[2] {
		t.Fatalf("DiffWRT(3) = %v, want three false", d)
	}
	if _, err := op.SymDiff(nil, nil, nil); err == nil {
		t.Fatal("SymDiff of a gradient op succeeded")
	}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
