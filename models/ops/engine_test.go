package ops

import (
	"testing"

	"gorgonia.org/tensor"
)

func f32Tensor(eng bool, vals ...float32) *tensor.Dense {
	opts := []tensor.ConsOpt{tensor.WithShape(len(vals)), tensor.WithBacking(append([]float32(nil), vals...))}
	if eng {
		opts = append(opts, tensor.WithEngine(fastEngine{split: true}))
	}
	return tensor.New(opts...)
}

// TestFastEngineAdd: tensor.Add on a fast op's output takes the vector path
// for the calls Gorgonia makes when it sums gradients (into a reuse tensor,
// or unsafe into the first operand) and gives a + b; increments, new
// results, views and float64 go to StdEng, with the same values.
func TestFastEngineAdd(t *testing.T) {
	n := addSplitMin + 37 // split over the helpers, with a vector tail
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(i%13)-6.5, float32(i%7)*0.25
	}
	check := func(name string, got tensor.Tensor, want func(i int) float32) {
		t.Helper()
		g := got.(*tensor.Dense).Float32s()
		for i := range g {
			if g[i] != want(i) {
				t.Fatalf("%s: element %d = %v, want %v", name, i, g[i], want(i))
			}
		}
	}
	sum := func(i int) float32 { return av[i] + bv[i] }

	// Reuse: the fast path writes into the reuse tensor.
	a, b, r := f32Tensor(true, av...), f32Tensor(false, bv...), f32Tensor(false, make([]float32, n)...)
	if fastAdd(a, b, []tensor.FuncOpt{tensor.WithReuse(r)}, true) == nil {
		t.Fatal("reuse: not taken by the fast path")
	}
	check("reuse", r, sum)
	check("reuse leaves a", a, func(i int) float32 { return av[i] })
	got, err := tensor.Add(a, b, tensor.WithReuse(r))
	if err != nil || got != r {
		t.Fatalf("tensor.Add with reuse: %v, %v; want the reuse tensor", got, err)
	}
	check("tensor.Add reuse", r, sum)

	// Unsafe: into a.
	a = f32Tensor(true, av...)
	if got, err = tensor.Add(a, b, tensor.UseUnsafe()); err != nil || got != a {
		t.Fatalf("unsafe: %v, %v; want a", got, err)
	}
	check("unsafe", a, sum)

	// Cases left to StdEng: same values all the same.
	a = f32Tensor(true, av...)
	if fastAdd(a, b, nil, true) != nil {
		t.Error("a safe add without reuse (a new result) took the fast path")
	}
	got, err = tensor.Add(a, b)
	if err != nil || got == a {
		t.Fatalf("safe add: %v, %v", got, err)
	}
	check("safe", got, sum)
	inc := f32Tensor(false, make([]float32, n)...)
	for i := range n {
		inc.Float32s()[i] = 1
	}
	if fastAdd(a, b, []tensor.FuncOpt{tensor.WithIncr(inc)}, true) != nil {
		t.Error("an increment took the fast path")
	}
	if _, err = tensor.Add(a, b, tensor.WithIncr(inc)); err != nil {
		t.Fatal(err)
	}
	check("incr", inc, func(i int) float32 { return 1 + sum(i) })
	short := f32Tensor(false, bv[:n-1]...)
	if fastAdd(a, short, []tensor.FuncOpt{tensor.UseUnsafe()}, true) != nil {
		t.Error("operands of different shapes took the fast path")
	}
	d64 := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}), tensor.WithEngine(fastEngine{}))
	if got, err = tensor.Add(d64, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 1, 1})), tensor.UseUnsafe()); err != nil {
		t.Fatal(err)
	}
	if v := got.(*tensor.Dense).Float64s(); v[0] != 2 || v[2] != 4 {
		t.Errorf("float64 add: %v", v)
	}
}
