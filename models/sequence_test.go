package models

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/optim"
)

// TestSliceHashCollision pins the Gorgonia bug that sequence.go works around:
// slices 256 steps apart hash alike and are merged into one node. If this test
// fails, Gorgonia hashes slices correctly and the chunking can go.
func TestSliceHashCollision(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 300, 2), G.WithName("x"))
	a := must(G.Slice(x, nil, G.S(0)))
	b := must(G.Slice(x, nil, G.S(256)))
	if a != b {
		t.Fatal("G.Slice at steps 0 and 256 gave distinct nodes: the chunking in sequence.go may be unnecessary")
	}
}

// TestStackUnstackLong checks unstack and stack across the chunk boundaries,
// values and gradients, on a sequence long enough for colliding slice hashes:
// the loss sum(stack(unstack(p)) * r) has gradient exactly r.
func TestStackUnstackLong(t *testing.T) {
	const batch, steps, dim = 2, 2*sliceSpan + 1, 3 // the last chunk has one step
	buildMu.Lock()
	b := newBuilder(withDefaults(Config{}), tensor.Float64, true, 0)
	var p, out, r, loss *G.Node
	var xs []*G.Node
	func() {
		defer func() {
			if e := recover(); e != nil {
				buildMu.Unlock()
				t.Fatal(e)
			}
		}()
		p = b.param("p", optim.KindLinear, nil, batch, steps, dim)
		xs = b.unstack(p)
		out = b.stack(xs)
		r = b.input("r", batch, steps, dim)
		loss = must(G.Sum(must(G.HadamardProd(out, r))))
	}()
	if _, err := G.Grad(loss, p); err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	vals := make([]float64, batch*steps*dim)
	rv := make([]float64, len(vals))
	for i := range vals {
		vals[i], rv[i] = float64(i), float64(3*i+1)
	}
	if err := G.Let(p, tensor.New(tensor.WithShape(batch, steps, dim), tensor.WithBacking(vals))); err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	if err := G.Let(r, tensor.New(tensor.WithShape(batch, steps, dim), tensor.WithBacking(rv))); err != nil {
		buildMu.Unlock()
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(b.g, G.BindDualValues(p))
	buildMu.Unlock()
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	if len(xs) != steps {
		t.Fatalf("unstack gave %d steps, expected %d", len(xs), steps)
	}
	for s, x := range xs {
		d := x.Value().Data().([]float64)
		for i := range batch {
			for j := range dim {
				if want := vals[(i*steps+s)*dim+j]; d[i*dim+j] != want {
					t.Fatalf("step %d [%d,%d] = %v, expected %v", s, i, j, d[i*dim+j], want)
				}
			}
		}
	}
	for i, v := range out.Value().Data().([]float64) {
		if v != vals[i] {
			t.Fatalf("stack(unstack(p))[%d] = %v, expected %v", i, v, vals[i])
		}
	}
	gv, err := p.Grad()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range gv.Data().([]float64) {
		if v != rv[i] {
			t.Fatalf("gradient[%d] = %v, expected %v", i, v, rv[i])
		}
	}
}
