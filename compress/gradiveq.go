package compress

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/problem"
)

// gradiVeQ is GradiVeQ (Yu, Lin, Narra, Li, Li, Kim, Schwing, Annavaram,
// Avestimehr, "GradiVeQ: Vector Quantization for Bandwidth-Efficient Gradient
// Aggregation in Distributed CNN Training", NeurIPS 2018, arXiv 1811.03617):
// a linear PCA projection of gradient slices, so that the workers' compressed
// gradients are summed inside the all-reduce without being decompressed.
//
// Each compressed tensor is split into slices of K = compress.gradiveq.slice_size
// consecutive elements of the packed layout (a tensor smaller than K is one
// slice of its own size; the last slice is zero-padded to K, the padding never
// sent or written). One basis U (K x d, orthonormal columns) serves every slice
// of a tensor (the paper's reuse factor s = inf, "one compressor per layer").
// With g_{n,m} worker n's slice m and N workers, a compressed step is
//
//	c_{n,m} = U^T (g_{n,m} - mu_m / N)            (d floats per slice)
//	C_m     = sum_n c_{n,m}                        (all-reduce: summed compressed)
//	ghat_m  = (U C_m + mu_m) / N                   (decoded once, the mean)
//
// Linearity is the point: sum_n c_{n,m} = U^T (sum_n g_{n,m} - mu_m), the
// projection of the summed gradient, so aggregation happens on the compressed
// coefficients and each worker decodes once.
//
// Schedule (paper Sec. 4): warmup_steps uncompressed all-reduce steps, then
// cycles of sample_steps (L_t) uncompressed steps whose aggregated (summed)
// slices are kept as PCA samples, followed by compress_steps (L_c) compressed
// steps. At the end of each sampling phase every worker computes from the
// same summed gradients, with the same float64 arithmetic,
//
//	mu_m = (1/L_t) sum_t S_{m,t}                  (per slice; S = summed slice)
//	C    = (1/(L_t M)) sum_{m,t} (S_{m,t} - mu_m)(S_{m,t} - mu_m)^T
//	U    = the top-d eigenvectors of C (gonum EigenSym), each with its
//	       largest-magnitude entry made positive
//	d    = compress.gradiveq.rank, or, when that is 0, the smallest d with
//	       sum_{k<d} eig_k >= (1 - lambda) sum_k eig_k (the paper's rule)
//
// so every worker holds the same U and mu and no basis is sent. Uncompressed
// steps (warm-up and sampling) put the dense gradient in the all-reduce and
// are counted dense; Steady is false on them, so the steady ratio is that of
// the compressed steps alone (Traffic.Wire over Traffic.Dense is the
// cycle-averaged ratio the paper's comparison needs).
//
// Sources: the algorithm, schedule and defaults follow the paper as
// summarized with its equations in docs ALGORITHMS-COMPRESSORS2.md
// ("GradiVeQ"); the paper's own text could not be read here, and a secondary
// summary (CompML/survey-deep-gradient-compression issue 16) agrees on the
// core: a linear PCA compressor of conv gradients inside ring all-reduce. No
// authors' code was found. The worked examples in gradiveq_test.go use the
// doc's shared inputs with values derived independently (a 2x2 eigenproblem
// in closed form; power iteration in float64). Choices:
//   - Defaults are the paper's: lambda = 0.01, warm-up 2,500 steps, L_t = 100,
//     L_c = 400, K = 768 (its suggestion for a (3,3,16,16) layer). Rank 0 =
//     chosen by lambda; a positive rank fixes d (min(rank, K)).
//   - Slices follow the packed (row-major) layout. The paper flattens a conv
//     gradient with the filters' collocated entries adjacent (Fig. 3a) and picks
//     K a multiple of F*D; that permutation is not applied here.
//   - Every tensor the layer policy compresses is compressed (linear ones
//     too); the paper compresses conv layers only. Keep linear layers dense by
//     raising compress.min_size if needed.
//   - The basis is pooled over all slices of a tensor, each centred on its own
//     mu_m (the paper indexes mu per slice and shares U under reuse; the doc's
//     toy example fits U on slice 0 alone and reuses it). center:
//     false drops mu (c = U^T g, ghat = U C / N): the uncentred second moment.
//   - The basis is computed locally on every worker from identical all-reduced
//     sums (the paper's scheme), not broadcast: no basis traffic.
//   - The PCA accumulators are float64 sums of S and S S^T, streamed over the
//     sampling steps (memory: the tensor plus K^2 per tensor, not L_t copies).
//   - Checkpoints keep no compressor state (State explains why): a resumed
//     run goes dense until its next sampling phase ends; resumed inside one,
//     it fits the basis on the samples taken after the resume.
//   - Error feedback: the paper uses none (default). error_feedback: true asks
//     the exchange for the generic residual, c - (U U^T (c - mu/N) + mu/N).
//   - The coefficients travel as float32 (4d bytes a slice); the paper's
//     optional scalar quantization of the coefficients is not implemented.
//   - The paper's run-time trigger that stops compressing on a large local loss
//     (Eq. 7) is not implemented: L_c is fixed.
type gradiVeQ struct {
	cfg     GradiVeQConfig
	tens    []gvqTensor
	size    int
	workers int

	pay       []float32 // compressed payload buffer
	payLen    int       // current compressed payload length
	denseWire []int64
	compWire  []int64
	sampled   int // sampling steps accumulated in the current phase (since a resume)
}

// gvqTensor is one packed tensor's slicing, basis and PCA accumulators.
type gvqTensor struct {
	off, size int
	k         int // slice length
	slices    int
	rank      int       // d; 0 before the first basis
	basis     []float32 // d columns of length k, one after the other (capacity k*k)
	mu        []float32 // slices*k, the mean summed slice; zero without centring
	sum       []float64 // slices*k, sum of the sampled summed slices
	cov       []float64 // k*k, sum of S S^T over slices and samples
	pay       int       // offset of the coefficients in the payload
}

// gvqPhase is what a step does.
type gvqPhase int

const (
	gvqWarmup   gvqPhase = iota // dense, not sampled
	gvqSample                   // dense, sampled for the PCA
	gvqCompress                 // coefficients
)

func newGradiVeQ(cfg Config, tensors []Tensor, _, workers int, _ int64, _ Hyper) (Compressor, error) {
	gc := cfg.GradiVeQ
	if err := problem.Join(gc.problems()); err != nil {
		return nil, err
	}
	c := &gradiVeQ{cfg: gc, size: packedSize(tensors), workers: workers}
	for _, t := range tensors {
		k := min(gc.SliceSize, t.Size)
		m := (t.Size + k - 1) / k
		c.tens = append(c.tens, gvqTensor{off: t.Offset, size: t.Size, k: k, slices: m,
			basis: make([]float32, 0, k*k), mu: make([]float32, m*k), sum: make([]float64, m*k), cov: make([]float64, k*k)})
		c.denseWire = append(c.denseWire, int64(4*t.Size))
	}
	c.compWire = make([]int64, len(tensors))
	c.layout()
	return c, nil
}

// Needs: the coefficients are summed; the residual, when asked for, is the
// generic one.
func (c *gradiVeQ) Needs() Needs {
	return Needs{Collective: dist.OpAllReduce, Rounds: 1, ErrorFeedback: c.cfg.ErrorFeedback}
}

// phase is the schedule: warm-up, then cycles of L_t sampling and L_c
// compressed steps.
func (c *gradiVeQ) phase(step int) gvqPhase {
	if step < c.cfg.WarmupSteps {
		return gvqWarmup
	}
	if (step-c.cfg.WarmupSteps)%(c.cfg.SampleSteps+c.cfg.CompressSteps) < c.cfg.SampleSteps {
		return gvqSample
	}
	return gvqCompress
}

// Steady reports whether the step sends coefficients.
func (c *gradiVeQ) Steady(info StepInfo) bool { return c.compressing(info.Step) }

// layout places each tensor's coefficients in the payload after a basis change.
func (c *gradiVeQ) layout() {
	c.payLen = 0
	for i := range c.tens {
		t := &c.tens[i]
		t.pay = c.payLen
		c.payLen += t.slices * t.rank
		c.compWire[i] = int64(4 * t.slices * t.rank)
	}
	if cap(c.pay) < c.payLen {
		c.pay = make([]float32, c.payLen)
	}
	c.pay = c.pay[:c.payLen]
}

// slice copies slice m of tensor t from a packed buffer into x (zero-padded).
func (t *gvqTensor) slice(buf []float32, m int, x []float64) {
	lo := t.off + m*t.k
	hi := min(lo+t.k, t.off+t.size)
	for i := range x {
		x[i] = 0
	}
	for i, v := range buf[lo:hi] {
		x[i] = float64(v)
	}
}

func (c *gradiVeQ) Encode(r int, grad []float32, _ Combined, info StepInfo) (Payload, error) {
	switch {
	case r != 0:
		return Payload{}, fmt.Errorf("gradiveq: round %d: only round 0 exists", r)
	case len(grad) != c.size:
		return Payload{}, fmt.Errorf("gradiveq: gradient has %d values, want %d", len(grad), c.size)
	case !c.compressing(info.Step):
		// Uncompressed all-reduce; the gradient is scratch, so it is the payload.
		return Payload{Floats: grad, Wire: int64(4 * c.size), TensorWire: c.denseWire}, nil
	}
	n := float64(max(info.Workers, 1))
	for _, t := range c.tens {
		x := make([]float64, t.k)
		for m := 0; m < t.slices; m++ {
			t.slice(grad, m, x)
			for i := range x {
				x[i] -= float64(t.mu[m*t.k+i]) / n
			}
			for j := 0; j < t.rank; j++ {
				var s float64
				for i, u := range t.basis[j*t.k : (j+1)*t.k] {
					s += float64(u) * x[i]
				}
				c.pay[t.pay+m*t.rank+j] = float32(s)
			}
		}
	}
	return Payload{Floats: c.pay, Wire: int64(4 * c.payLen), TensorWire: c.compWire}, nil
}

// compressing reports whether the step sends coefficients: a compressed step
// of the schedule once a sampling phase has produced a basis (a run resumed
// from a checkpoint has none until its next sampling phase ends).
func (c *gradiVeQ) compressing(step int) bool {
	return c.phase(step) == gvqCompress && len(c.tens) > 0 && c.tens[0].rank > 0
}

// decode adds (U C_m + scale*mu_m) / div for every slice of coefficients
// coef into dst.
func (c *gradiVeQ) decode(coef, dst []float32, muScale, div float64) {
	for _, t := range c.tens {
		y := make([]float64, t.k)
		for m := 0; m < t.slices; m++ {
			for i := range y {
				y[i] = muScale * float64(t.mu[m*t.k+i])
			}
			for j := 0; j < t.rank; j++ {
				cj := float64(coef[t.pay+m*t.rank+j])
				for i, u := range t.basis[j*t.k : (j+1)*t.k] {
					y[i] += float64(u) * cj
				}
			}
			lo := t.off + m*t.k
			hi := min(lo+t.k, t.off+t.size)
			for i := range dst[lo:hi] {
				dst[lo+i] += float32(y[i] / div)
			}
		}
	}
}

// DecodeAdd adds what one worker's payload decodes to: its dense gradient, or
// U c + mu/N, its share of the decoded sum (the oracle and error feedback use
// it; the exchange decodes the summed payload with DecodeMean).
func (c *gradiVeQ) DecodeAdd(p Payload, dst []float32, info StepInfo) error {
	if len(dst) != c.size {
		return fmt.Errorf("gradiveq: decode into %d values, want %d", len(dst), c.size)
	}
	if !c.compressing(info.Step) {
		if len(p.Floats) != c.size {
			return fmt.Errorf("gradiveq: dense payload has %d values, want %d", len(p.Floats), c.size)
		}
		for i, v := range p.Floats {
			dst[i] += v
		}
		return nil
	}
	if len(p.Floats) != c.payLen {
		return fmt.Errorf("gradiveq: payload has %d coefficients, want %d", len(p.Floats), c.payLen)
	}
	c.decode(p.Floats, dst, 1/float64(max(info.Workers, 1)), 1)
	return nil
}

// DecodeMean writes the mean: the summed dense gradient / N (sampled for the
// PCA in a sampling phase, the basis computed after its last step), or
// (U C + mu) / N.
func (c *gradiVeQ) DecodeMean(last Combined, dst []float32, info StepInfo) error {
	n := last.Workers
	if n < 1 || len(dst) != c.size {
		return fmt.Errorf("gradiveq: decode into %d values from %d workers, want %d", len(dst), n, c.size)
	}
	if c.compressing(info.Step) {
		if len(last.Floats) != c.payLen {
			return fmt.Errorf("gradiveq: combined %d coefficients, want %d", len(last.Floats), c.payLen)
		}
		clear(dst)
		c.decode(last.Floats, dst, 1, float64(n))
		return nil
	}
	if len(last.Floats) != c.size {
		return fmt.Errorf("gradiveq: combined %d dense values, want %d", len(last.Floats), c.size)
	}
	if c.phase(info.Step) == gvqSample {
		c.sample(last.Floats, info.Step)
	}
	copy(dst, last.Floats)
	divideSum(dst, n)
	return nil
}

// sample accumulates one step's summed gradient; after the phase's last step
// it computes every tensor's mu and basis.
func (c *gradiVeQ) sample(sum []float32, step int) {
	pos := (step - c.cfg.WarmupSteps) % (c.cfg.SampleSteps + c.cfg.CompressSteps)
	if pos == 0 {
		c.sampled = 0
		for i := range c.tens {
			clear(c.tens[i].sum)
			clear(c.tens[i].cov)
		}
	}
	for i := range c.tens {
		t := &c.tens[i]
		x := make([]float64, t.k)
		for m := 0; m < t.slices; m++ {
			t.slice(sum, m, x)
			s := t.sum[m*t.k : (m+1)*t.k]
			for a, xa := range x {
				s[a] += xa
				if xa == 0 {
					continue
				}
				row := t.cov[a*t.k : (a+1)*t.k]
				for b, xb := range x {
					row[b] += xa * xb
				}
			}
		}
	}
	c.sampled++
	if pos == c.cfg.SampleSteps-1 {
		for i := range c.tens {
			c.tens[i].fit(c.sampled, c.cfg)
		}
		c.layout()
	}
}

// fit computes mu and the basis from L samples (see the type's comment).
func (t *gvqTensor) fit(samples int, cfg GradiVeQConfig) {
	l := float64(samples)
	cov := mat.NewSymDense(t.k, nil)
	for a := 0; a < t.k; a++ {
		for b := a; b < t.k; b++ {
			v := t.cov[a*t.k+b]
			if cfg.Center {
				// sum_{m,t} (S - mu)(S - mu)^T = sum S S^T - L sum_m mu mu^T
				for m := 0; m < t.slices; m++ {
					v -= t.sum[m*t.k+a] * t.sum[m*t.k+b] / l
				}
			}
			cov.SetSym(a, b, v/(l*float64(t.slices)))
		}
	}
	for i := range t.mu {
		t.mu[i] = 0
		if cfg.Center {
			t.mu[i] = float32(t.sum[i] / l)
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(cov, true) {
		// EigenSym fails only on non-finite input; keep the first axes.
		t.setBasis(identityColumns(t.k, max(1, min(cfg.Rank, t.k))))
		return
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	order := make([]int, t.k)
	for i := range order {
		order[i] = i
	}
	// Descending eigenvalues; ties keep gonum's order.
	sort.SliceStable(order, func(i, j int) bool { return vals[order[i]] > vals[order[j]] })
	d := cfg.Rank
	if d == 0 {
		var total, kept float64
		for _, v := range vals {
			total += max(v, 0)
		}
		d = t.k
		for i, o := range order {
			kept += max(vals[o], 0)
			if kept >= (1-cfg.Lambda)*total {
				d = i + 1
				break
			}
		}
	}
	d = max(1, min(d, t.k))
	cols := make([][]float64, d)
	for j := range cols {
		cols[j] = mat.Col(nil, order[j], &vecs)
	}
	t.setBasis(cols)
}

// setBasis stores the columns, each with its largest-magnitude entry made
// positive (the first such entry on ties), so the basis has one spelling.
func (t *gvqTensor) setBasis(cols [][]float64) {
	t.rank = len(cols)
	t.basis = t.basis[:0]
	for _, col := range cols {
		big := 0
		for i, v := range col {
			if math.Abs(v) > math.Abs(col[big]) {
				big = i
			}
		}
		sign := 1.0
		if col[big] < 0 {
			sign = -1
		}
		for _, v := range col {
			t.basis = append(t.basis, float32(sign*v))
		}
	}
}

// identityColumns is the first d unit vectors of length k.
func identityColumns(k, d int) [][]float64 {
	cols := make([][]float64, d)
	for j := range cols {
		cols[j] = make([]float64, k)
		cols[j][j] = 1
	}
	return cols
}

// State is empty: a checkpoint keeps no basis, mu or PCA sums. A basis is
// K x d per tensor, which can exceed the tensor itself (K = 768, d in the
// hundreds, against the checkpoint's bound of twice the parameter count), so a
// resumed run sends dense gradients until its next sampling phase ends (every
// worker resumes from the same checkpoint, so all agree).
func (c *gradiVeQ) State() map[string][]float32 { return nil }

// SetState accepts only the empty state.
func (c *gradiVeQ) SetState(st map[string][]float32) error { return noState("gradiveq", st) }

var (
	_ Compressor      = (*gradiVeQ)(nil)
	_ CombinedDecoder = (*gradiVeQ)(nil)
)
