package ops

import (
	"github.com/gradwire/gradwire/internal/par"
	"gorgonia.org/tensor"
)

// fastEngine is the tensor engine of the fast ops' outputs: tensor.StdEng
// with its Add replaced for float32 tensors. Gorgonia sums the gradients of a
// node that feeds several ops (the input of every residual block) with
// tensor.Add, which runs on its first operand's engine; StdEng's is a serial
// scalar loop, a few percent of a ResNet-20 step with the other core idle.
// Here the sum is split over the helper goroutines and vectorised. An
// element's sum is a + b either way, so the bits do not change.
type fastEngine struct {
	tensor.StdEng
	split bool // sums of addSplitMin values and more are split over the helpers
}

// Engine is the engine of the fast ops' tensors, for the tape machine that
// runs them (gorgonia.WithEngine): the gradient sums Gorgonia inserts run on
// the engine of tensors the machine allocates. They are split over the
// helper goroutines when the workspace's ops split their work (ws.Workers()
// > 1): a replica whose ops run on one goroutine shares the cores with
// other replicas.
func Engine(ws *Workspace) tensor.Engine { return fastEngine{split: ws.workers > 1} }

// addSplitMin is the smallest sum split over the helpers.
const addSplitMin = 1 << 14

// Add computes a + b into the reuse tensor of opts, or into a when opts make
// it unsafe, for float32 tensors of one shape laid out contiguously; every
// other case (increments, new results, views, float64) is StdEng's.
func (e fastEngine) Add(a, b tensor.Tensor, opts ...tensor.FuncOpt) (tensor.Tensor, error) {
	if out := fastAdd(a, b, opts, e.split); out != nil {
		return out, nil
	}
	return e.StdEng.Add(a, b, opts...)
}

// fastAdd is Add's fast path; nil when the call is not one it takes.
func fastAdd(a, b tensor.Tensor, opts []tensor.FuncOpt, split bool) tensor.Tensor {
	da, ok1 := a.(*tensor.Dense)
	db, ok2 := b.(*tensor.Dense)
	if !ok1 || !ok2 || !plainF32(da) || !plainF32(db) || !da.Shape().Eq(db.Shape()) {
		return nil
	}
	fo := tensor.ParseFuncOpts(opts...)
	if fo.Incr() != nil {
		return nil
	}
	dst := da
	if r := fo.Reuse(); r != nil {
		dr, ok := r.(*tensor.Dense)
		if !ok || !plainF32(dr) || !dr.Shape().Eq(da.Shape()) {
			return nil
		}
		dst = dr
	} else if fo.Safe() {
		return nil
	}
	addInto(dst.Float32s(), da.Float32s(), db.Float32s(), split)
	return dst
}

// plainF32: a float32 tensor that owns a contiguous backing (not a view).
func plainF32(t *tensor.Dense) bool {
	return t.Dtype() == tensor.Float32 && !t.IsView() && !t.IsScalar() && t.DataSize() == t.Shape().TotalSize()
}

// addInto writes y = a + b (y may be a or b), split over the helper
// goroutines when split is set, y is long and they are idle.
func addInto(y, a, b []float32, split bool) {
	n := len(y)
	a, b = a[:n], b[:n]
	w := 1
	if split && n >= addSplitMin {
		w = par.Default().Workers()
	}
	par.Default().RunIfIdle(n, w, func(_, lo, hi int) {
		if hi <= lo {
			return
		}
		if loopsAVX512 {
			add3AVX512(&y[lo], &a[lo], &b[lo], hi-lo)
			return
		}
		for i := lo; i < hi; i++ {
			y[i] = a[i] + b[i]
		}
	})
}
