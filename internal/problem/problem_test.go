package problem

import (
	"math"
	"testing"
)

func TestProblemError(t *testing.T) {
	for _, c := range []struct {
		p    Problem
		want string
	}{
		{Problem{"optim.name", "sgx", "must be one of sgd"}, `optim.name: "sgx": must be one of sgd`},
		{Problem{"model.hidden", []int{1, 2}, "x"}, `model.hidden: [1, 2]: x`},
		{Problem{"model.hidden", make([]int, 9), "x"}, `model.hidden: [0, 0, 0, 0, 0, 0, 0, 0, ... (9 values)]: x`},
		{Problem{"data", nil, "a mapping"}, `data: null: a mapping`},
		{Problem{"optim.lr", -0.5, "must be a positive number"}, `optim.lr: -0.5: must be a positive number`},
	} {
		if got := c.p.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestListChecks(t *testing.T) {
	var l List
	l.Positive("a", math.NaN())     // fails
	l.Positive("b", 1)              // passes
	l.NonNegative("c", math.Inf(1)) // fails
	l.Unit("d", 1)                  // fails: 1 is outside [0, 1)
	l.Fraction("e", 1)              // passes: 1 is inside (0, 1]
	l.Within("f", 5, 1, 4)          // fails the upper bound only
	l.OneOf("g", "x", []string{"y", "z"})
	want := []string{
		"a: NaN: must be a positive number",
		"c: +Inf: must be a non-negative number",
		"d: 1: must be in [0, 1)",
		"f: 5: must be at most 4",
		`g: "x": must be one of y, z`,
	}
	if len(l) != len(want) {
		t.Fatalf("got %d problems %v, want %d", len(l), l, len(want))
	}
	for i, p := range l {
		if p.Error() != want[i] {
			t.Errorf("problem %d: %q, want %q", i, p.Error(), want[i])
		}
	}
	if !l.Has("f") || l.Has("b") {
		t.Errorf("Has: f %v (want true), b %v (want false)", l.Has("f"), l.Has("b"))
	}
}
