package models

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestDirectTapeMatchesRunAll trains two nets of the same seed, one through
// directTape and one through Gorgonia's RunAll, and compares losses,
// gradients and evaluation logits bit for bit.
func TestDirectTapeMatchesRunAll(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		in  Input
	}{
		{Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
		{Config{Name: "resnet20"}, Input{Shape: []int{3, 8, 8}, Classes: 10, YLen: 1}},
		{Config{Name: "lstm", Hidden: []int{16}}, Input{Shape: []int{1, 6, 5}, Classes: 4, YLen: 1}},
	} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			const batch = 4
			direct, err := New(c.cfg, c.in, batch, batch, 3)
			if err != nil {
				t.Fatal(err)
			}
			if newDirectTape(direct.tm) == nil || newDirectTape(direct.em) == nil {
				t.Fatal("the fast net's machines are not run directly: has the Gorgonia version changed the tape machine's type?")
			}
			viaRunAll, err := New(c.cfg, c.in, batch, batch, 3)
			if err != nil {
				t.Fatal(err)
			}
			viaRunAll.run, viaRunAll.runEval = viaRunAll.tm.RunAll, viaRunAll.em.RunAll
			for s := range 3 {
				x, y := randomBatch(uint64(s+1), batch, c.in, false)
				var grads [2][]float32
				var losses [2]float64
				for i, n := range []*Net{direct, viaRunAll} {
					if losses[i], err = n.Step(x, y); err != nil {
						t.Fatal(err)
					}
					grads[i] = append([]float32(nil), n.Grad()...)
					for j, g := range grads[i] {
						n.Flat()[j] -= 0.05 * g
					}
				}
				if losses[0] != losses[1] {
					t.Fatalf("step %d: loss %v directly, %v through RunAll", s, losses[0], losses[1])
				}
				for j := range grads[0] {
					if math.Float32bits(grads[0][j]) != math.Float32bits(grads[1][j]) {
						t.Fatalf("step %d: gradient %d is %v directly, %v through RunAll", s, j, grads[0][j], grads[1][j])
					}
				}
			}
			x, _ := randomBatch(9, batch, c.in, false)
			var logits [2][]float32
			for i, n := range []*Net{direct, viaRunAll} {
				logits[i] = make([]float32, batch*c.in.Classes)
				if err := n.Predict(x, logits[i]); err != nil {
					t.Fatal(err)
				}
			}
			for j := range logits[0] {
				if math.Float32bits(logits[0][j]) != math.Float32bits(logits[1][j]) {
					t.Fatalf("logit %d is %v directly, %v through RunAll", j, logits[0][j], logits[1][j])
				}
			}
		})
	}
}

// TestDirectTapeErrors checks that a failing instruction's error comes back
// as RunAll returns it, and that other machines are not wrapped.
func TestDirectTapeErrors(t *testing.T) {
	run := func(direct bool) error {
		g := G.NewGraph()
		a := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("a"), G.WithInit(G.Zeroes()))
		b := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 2), G.WithName("b"), G.WithInit(G.Zeroes()))
		G.Must(G.Mul(a, b))
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		// Reshaping b's value in place, behind the graph's back, makes the
		// product fail at run time.
		if err := b.Value().(*tensor.Dense).Reshape(6, 1); err != nil {
			t.Fatal(err)
		}
		if direct {
			d := newDirectTape(vm)
			if d == nil {
				t.Fatal("a tape machine was not recognised")
			}
			return d.RunAll()
		}
		return vm.RunAll()
	}
	want, got := run(false), run(true)
	if want == nil || got == nil {
		t.Fatalf("errors %v through RunAll and %v directly, expected both to fail", want, got)
	}
	if got.Error() != want.Error() || !strings.Contains(got.Error(), "PC") {
		t.Fatalf("error %q directly, %q through RunAll", got, want)
	}
	g := G.NewGraph()
	G.NewScalar(g, tensor.Float32, G.WithName("s"))
	if newDirectTape(G.NewLispMachine(g)) != nil {
		t.Fatal("a Lisp machine was taken for a tape machine")
	}
}
