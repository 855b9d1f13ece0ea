package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestFastEmbeddingOneHot pins the sparse product on one-hot rows: each
// output row is the table row of its token, bit for bit, and the table
// gradient adds each output gradient to its token's row.
func TestFastEmbeddingOneHot(t *testing.T) {
	const n, vocab, dim = 7, 4, 3
	ids := []int{2, 0, 3, 2, 2, 1, 0}
	x := make([]float32, n*vocab)
	for r, c := range ids {
		x[r*vocab+c] = 1
	}
	rng := rand.New(rand.NewPCG(3, 3))
	e, dy := make([]float32, vocab*dim), make([]float32, n*dim)
	for i := range e {
		e[i] = float32(rng.NormFloat64())
	}
	for i := range dy {
		dy[i] = float32(rng.NormFloat64())
	}
	st := &embedState{ws: NewWorkspace(0)}
	for range 2 { // the second pass reuses the lists
		y := make([]float32, n*dim)
		embedIndex(st, x, n, vocab)
		embedForward(st, e, y, dim)
		for r, c := range ids {
			if !slices.Equal(y[r*dim:(r+1)*dim], e[c*dim:(c+1)*dim]) {
				t.Fatalf("row %d = %v, expected table row %d = %v", r, y[r*dim:(r+1)*dim], c, e[c*dim:(c+1)*dim])
			}
		}
	}
	de := make([]float32, vocab*dim)
	embedTableGrad(st, dy, [][]float32{de}, dim)
	want := make([]float32, vocab*dim)
	for r, c := range ids {
		for j := range dim {
			want[c*dim+j] += dy[r*dim+j]
		}
	}
	if !slices.Equal(de, want) {
		t.Fatalf("table gradient %v, expected %v", de, want)
	}
}

// TestFastLSTMOpsReuseBuffers runs the LSTM and embedding ops' Do methods
// directly, forward and backward: after the first call they return the same
// buffers every time and allocate only small headers and their workers'
// goroutines.
func TestFastLSTMOpsReuseBuffers(t *testing.T) {
	const b, steps, in, hidden, vocab = 6, 12, 16, 16, 7
	rnd := func(shape ...int) *tensor.Dense {
		v := make([]float32, numel(shape))
		for i := range v {
			v[i] = float32(math.Sin(float64(3*i + len(shape))))
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	onehot := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(b*steps, vocab))
	for r := range b * steps {
		onehot.Float32s()[r*vocab+r%vocab] = 1
	}
	table := rnd(vocab, in)
	wx, wh, bias := rnd(in, 4*hidden), rnd(hidden, 4*hidden), rnd(4*hidden)
	ws := NewWorkspace(2)
	for _, last := range []bool{false, true} {
		st := &lstmState{id: nextOpID(), dims: lstmDims{b, steps, in, hidden}, last: last, needDX: true, ws: ws}
		es := &embedState{id: nextOpID(), ws: ws, needDX: true}
		do := func(op G.Op, in ...G.Value) *tensor.Dense {
			v, err := op.Do(in...)
			if err != nil {
				t.Fatal(err)
			}
			return v.(*tensor.Dense)
		}
		// One forward and backward pass; returns the data of every output.
		run := func() (outs []*float32) {
			e := do(&embedOp{plainOp{}, es}, onehot, table)
			x := e.ShallowClone() // the reshape between the two ops
			if err := x.Reshape(b, steps, in); err != nil {
				t.Fatal(err)
			}
			y := do(&lstmOp{plainOp{}, st}, x, wx, wh, bias)
			db := do(&lstmBackOp{backwardOp{}, st}, x, wx, wh, y, y)
			outs = append(outs, &e.Float32s()[0], &y.Float32s()[0], &db.Float32s()[0])
			var dx *tensor.Dense
			for which := range 3 {
				g := do(&lstmGradOp{backwardOp{}, st, which}, db)
				outs = append(outs, &g.Float32s()[0])
				if which == 0 {
					dx = g.ShallowClone()
				}
			}
			if err := dx.Reshape(b*steps, in); err != nil {
				t.Fatal(err)
			}
			de := do(&embedTableGradOp{backwardOp{}, es, table.Shape()}, dx)
			dxe := do(&embedDataGradOp{backwardOp{}, es, onehot.Shape()}, table, dx)
			return append(outs, &de.Float32s()[0], &dxe.Float32s()[0])
		}
		first := run()
		var before, after runtime.MemStats
		const calls = 20
		runtime.ReadMemStats(&before)
		for range calls {
			if outs := run(); !slices.Equal(outs, first) {
				t.Fatalf("last %v: output buffers %v, first call's %v", last, outs, first)
			}
		}
		runtime.ReadMemStats(&after)
		perCall := (after.TotalAlloc - before.TotalAlloc) / calls
		// Objects of 4 KiB and more: the state buffers (the gates take 18
		// KiB, the cells, their tanh and the hidden states 4.5 KiB each); a
		// reallocated one would come back every call. The counts are the
		// whole process's (the runtime allocates now and then on its own, so
		// the bytes per call move between about 3.3 and 4.4 KiB): fewer large
		// objects than calls means no op reallocates one per call.
		var large uint64
		for i, c := range after.BySize {
			if c.Size >= 4<<10 {
				large += c.Mallocs - before.BySize[i].Mallocs
			}
		}
		t.Logf("last %v: %d bytes, %d objects per forward and backward, %d objects of 4 KiB or more in %d calls",
			last, perCall, (after.Mallocs-before.Mallocs)/calls, large, calls)
		if large >= calls {
			t.Errorf("last %v: %d objects of 4 KiB or more in %d calls: an op reallocates a state buffer", last, large, calls)
		}
	}
}

// TestTransposeTo checks the tiled transpose on shapes that leave partial
// tiles and columns outside the groups of four, with strides wider than the
// matrices.
func TestTransposeTo(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {3, 5}, {33, 70}, {64, 7}, {40, 64}} {
		rows, cols := sz[0], sz[1]
		lds, ldd := cols+3, rows+2
		src := make([]float64, rows*lds)
		for i := range src {
			src[i] = float64(i)
		}
		dst := make([]float64, cols*ldd)
		for i := range dst {
			dst[i] = -1
		}
		transposeTo(dst, ldd, src, lds, rows, cols)
		for j := range cols {
			for i := range ldd {
				want := -1.0
				if i < rows {
					want = src[i*lds+j]
				}
				if got := dst[j*ldd+i]; got != want {
					t.Fatalf("%dx%d: dst[%d, %d] = %v, expected %v", rows, cols, j, i, got, want)
				}
			}
		}
	}
}
