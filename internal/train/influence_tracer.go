package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Proponents and opponents (Pruthi et al. 2020, section 4): the TracInCP
// influence of a training example z on a test example z' is
// sum over checkpoints t of lr_t grad l(z; w_t) . grad l(z'; w_t), the test
// example under its true label, the training example under the label the run
// trained on. Exactly, each training gradient is dotted with every test
// gradient of its checkpoint. With a random projection (the paper's appendix;
// Captum's TracInCPFastRandProj), every gradient g is replaced by G^T g,
// G of the gradient's length x d with i.i.d. N(0, 1/d) entries: the dot
// products are then of length d, unbiased, with variance
// (||a||^2 ||b||^2 + (a.b)^2) / d each. One G serves every checkpoint (an
// unbiased sum still; independent draws per checkpoint would cost a G each).
// Projecting costs the gradient's length x d per example and saves the
// gradient's length less d per test example: it pays when the test examples
// outnumber d.

// maxProjection bounds the projection matrix (values), 1 GiB of float32.
const maxProjection = 1 << 28

// randomProjection is a Johnson-Lindenstrauss map from R^n to R^d: x -> G^T x
// with G n x d, entries i.i.d. N(0, 1/d) from a seeded generator, so that
// E[G G^T] = I and E[(G^T a).(G^T b)] = a.b.
type randomProjection struct {
	n, d int
	g    []float32 // row-major n x d
}

func newRandomProjection(n, d int, seed uint64) *randomProjection {
	r := rand.New(rand.NewPCG(seed, 0x6a6c)) // "jl"
	scale := 1 / math.Sqrt(float64(d))
	g := make([]float32, n*d)
	for i := range g {
		g[i] = float32(r.NormFloat64() * scale)
	}
	return &randomProjection{n: n, d: d, g: g}
}

// apply writes the projections of rows vectors (a, rows x n, row-major) to
// out (rows x d).
func (p *randomProjection) apply(rows int, a, out []float32) {
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: rows, Cols: p.n, Stride: p.n, Data: a[:rows*p.n]},
		blas32.General{Rows: p.n, Cols: p.d, Stride: p.d, Data: p.g},
		0, blas32.General{Rows: rows, Cols: p.d, Stride: p.d, Data: out[:rows*p.d]})
}

// projectBatch is how many training gradients are projected together (one
// matrix product).
const projectBatch = 64

// tracer accumulates the TracInCP scores of the scored training examples on
// the chosen test examples, checkpoint by checkpoint.
type tracer struct {
	width  int               // gradient length (every parameter, or the last layer's)
	proj   *randomProjection // nil: exact dot products
	opts   InfluenceOptions
	test   [][]float32 // per test example: its gradient (exact) or projection at this checkpoint
	scores [][]float64 // per test example, per scored training example
	lr     float64     // this checkpoint's weight
	buf    []float32   // training gradients waiting for projection
	bufK   []int       // their positions among the scored examples
	out    []float32
}

// newTracer is nil when no test example was chosen.
func newTracer(o InfluenceOptions, width, n int) *tracer {
	if len(o.Test) == 0 {
		return nil
	}
	t := &tracer{width: width, opts: o, test: make([][]float32, len(o.Test)), scores: make([][]float64, len(o.Test))}
	for j := range t.scores {
		t.scores[j] = make([]float64, n)
	}
	return t
}

// prepare refuses a projection matrix, or test gradients and scores, too
// large to hold, then draws the projection.
func (t *tracer) prepare() error {
	if t.opts.Project > 0 && int64(t.width)*int64(t.opts.Project) > maxProjection {
		return fmt.Errorf("influence: projection to %d dimensions of %d gradient values needs a %d x %d matrix, over the %d values allowed: expected at most %d dimensions (or the last layer)",
			t.opts.Project, t.width, t.width, t.opts.Project, maxProjection, maxProjection/t.width)
	}
	// Each test example keeps its gradient (or its projection) and a score
	// per training example; thousands of test examples of a large model would
	// otherwise end the process in the allocator.
	dim := t.width
	if t.opts.Project > 0 {
		dim = t.opts.Project
	}
	need := float64(len(t.test)) * (4*float64(dim) + 8*float64(len(t.scores[0])))
	if avail, source, ok, err := availableMemory(); err != nil {
		return err
	} else if ok && need > float64(avail) {
		return fmt.Errorf("influence: %d test examples need about %.1f GiB for their gradients (%d values each) and scores (%d each), more than the %.1f GiB available (%s): expected fewer --test examples, --project, or the last layer",
			len(t.test), need/(1<<30), dim, len(t.scores[0]), float64(avail)/(1<<30), source)
	}
	if t.opts.Project == 0 {
		return nil
	}
	t.proj = newRandomProjection(t.width, t.opts.Project, t.opts.ProjectSeed)
	t.buf = make([]float32, projectBatch*t.width)
	t.out = make([]float32, projectBatch*t.opts.Project)
	return nil
}

// setTest records test example j's gradient at the current checkpoint.
func (t *tracer) setTest(j int, g []float32) {
	if t.proj == nil {
		t.test[j] = append(t.test[j][:0], g...)
		return
	}
	t.test[j] = slices.Grow(t.test[j][:0], t.proj.d)[:t.proj.d]
	t.proj.apply(1, g, t.test[j])
}

// startCheckpoint sets the weight lr_t of the checkpoint whose gradients
// follow.
func (t *tracer) startCheckpoint(lr float64) { t.lr = lr }

// addTrain adds scored training example k's gradient at the current
// checkpoint.
func (t *tracer) addTrain(k int, g []float32) {
	if t.proj == nil {
		for j, tg := range t.test {
			t.scores[j][k] += t.lr * dot32(g, tg)
		}
		return
	}
	r := len(t.bufK)
	copy(t.buf[r*t.width:(r+1)*t.width], g)
	t.bufK = append(t.bufK, k)
	if len(t.bufK) == projectBatch {
		t.flush()
	}
}

// flush projects the waiting training gradients and adds their scores.
func (t *tracer) flush() {
	if t.proj == nil || len(t.bufK) == 0 {
		return
	}
	d := t.proj.d
	t.proj.apply(len(t.bufK), t.buf, t.out)
	for r, k := range t.bufK {
		for j, tp := range t.test {
			t.scores[j][k] += t.lr * dot32(t.out[r*d:(r+1)*d], tp)
		}
	}
	t.bufK = t.bufK[:0]
}

// extremes returns test example j's proponents (up to k positive scores,
// highest first) and opponents (up to k negative scores, lowest first); info
// describes a scored training example.
func (t *tracer) extremes(j, k int, info func(int) Influencer) (pro, opp []Influencer) {
	s := t.scores[j]
	order := make([]int, len(s))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case s[a] > s[b]:
			return -1
		case s[a] < s[b]:
			return 1
		}
		return 0
	})
	for _, i := range order[:min(k, len(order))] {
		if s[i] > 0 {
			e := info(i)
			e.Score = s[i]
			pro = append(pro, e)
		}
	}
	for n := len(order) - 1; n >= max(0, len(order)-k); n-- {
		if i := order[n]; s[i] < 0 {
			e := info(i)
			e.Score = s[i]
			opp = append(opp, e)
		}
	}
	return pro, opp
}

// dot32 is a float32 dot product summed in float64.
func dot32(a, b []float32) float64 {
	var s float64
	for i, x := range a {
		s += float64(x) * float64(b[i])
	}
	return s
}
