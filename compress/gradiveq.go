package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
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
// Quantized coefficients (compress.gradiveq.quantize_bits = b in [2, 16]; 0,
// the default, sends float32 coefficients). With s = 2^(b-1) - 1 magnitude
// levels, a compressed step takes two rounds (Needs.RoundOps):
//
//	round 0  all-gather: worker n sends a_{n,t} = max_j |c_{n,j}| over tensor
//	         t's coefficients (one float32 per tensor); every worker takes the
//	         same A_t = max_n a_{n,t}
//	round 1  all-reduce of integer levels: x = s |c_{n,j}| / A_t in [0, s],
//	         l = floor(x), q_{n,j} = sgn(c_{n,j}) (l + 1 with probability
//	         x - l, else l), so q in {-s, ..., s} and E[q_{n,j}] = s c_{n,j} / A_t
//	decode   C_j = A_t Q_j / s with Q_j = sum_n q_{n,j}: E[C_j] = sum_n c_{n,j},
//	         the float32 coefficient sum, unbiased; then ghat as above.
//
// The levels stay summable because every worker rounds to the same grid
// (A_t / s). Their sum is exact: every partial sum of the all-reduce, in any
// order, is an integer of magnitude at most N s, and float32 holds every
// integer up to 2^24 exactly; the builder refuses N s > 2^24 (b = 16 allows
// N <= 512, b <= 13 any N up to dist.workers' limit of 4096). A worker's
// bytes on a compressed step are 4 per tensor (round 0) plus b bits per
// coefficient (round 1: the level offset by s, in [0, 2s] < 2^b, per tensor
// ceil(b n_t / 8) bytes, least significant bit first, each tensor's stream
// byte-aligned). That is the contribution's encoded size; the all-reduce here
// carries it as float32, as it carries compress.dense_fp16's float16 values,
// and a ring forwarding partial sums would need b + ceil(log2 N) bits.
// Uncompressed steps make both rounds too (the rounds a compressor needs are
// fixed); their round 0 is empty and costs no bytes.
//
// Sources: the algorithm, schedule and defaults follow the paper as
// summarized with its equations in docs ALGORITHMS-COMPRESSORS2.md
// ("GradiVeQ"); the paper's own text could not be read here, and a secondary
// summary (CompML/survey-deep-gradient-compression issue 16) agrees on the
// core: a linear PCA compressor of conv gradients inside ring all-reduce. No
// authors' code was found. The worked examples in gradiveq_test.go use the
// doc's shared inputs with values derived independently (a 2x2 eigenproblem
// in closed form; power iteration in float64). The paper pairs GradiVeQ with
// QSGD-style scalar quantization; the docs do not give its form for the
// coefficients, so the quantizer above is QSGD's stochastic rounding with a
// max norm (qsgd.go; Alistarh et al. 2017) made summable by a scale shared by
// all workers. Choices:
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
//   - The PCA accumulators are float64 sums of S and of the upper triangle of
//     S S^T (all fit reads), streamed over the sampling steps (memory: the
//     tensor plus K^2 per tensor, not L_t copies).
//   - Checkpoints keep what the next steps read, so a resumed run equals the
//     uninterrupted one bit for bit (State): inside a sampling phase the
//     samples taken and the float64 accumulators, outside one the ranks, U and
//     mu. That is larger than twice the tensors (StateValues says how much).
//   - Error feedback: the paper uses none (default). error_feedback: true asks
//     the exchange for the generic residual, c - (U U^T (c - mu/N) + mu/N)
//     (with quantized coefficients, of the decoded levels).
//   - Quantization: the shared scale is agreed by an all-gather of one float32
//     per tensor (the collectives have no max all-reduce); A_t = 0 (every
//     coefficient 0) sends level 0; a non-finite A_t (a non-finite gradient on
//     some worker) is an error naming the tensor on every worker, since no
//     level describes it. Draws u ~ U[0,1) come from a PCG stream per (seed,
//     worker, step, tensor), one per coefficient in order, rounding up when
//     u < x - l, like qsgd.go: runs and resumed runs are bit-identical and no
//     generator state is checkpointed. Sampling steps stay dense float32 (the
//     docs' option of QSGD-quantized sampling steps is not implemented).
//   - The paper's run-time trigger that stops compressing on a large local loss
//     (Eq. 7) is not implemented: L_c is fixed.
type gradiVeQ struct {
	cfg     GradiVeQConfig
	tens    []gvqTensor
	size    int
	workers int
	worker  int
	seed    int64

	pay       []float32 // coefficients; when quantizing, overwritten by their levels in round 1
	payLen    int       // current compressed payload length
	denseWire []int64
	compWire  []int64 // coefficient bytes per tensor (4 each, or b bits when quantizing)
	sampled   int     // sampling steps accumulated in the current phase (since a resume); 0 outside one

	// Quantization (cfg.QuantizeBits > 0).
	levels    int       // s = 2^(b-1) - 1
	maxes     Encoder   // round 0's payload: this worker's max |c| per tensor
	scaleWire []int64   // round 0's bytes per tensor
	scales    []float32 // this step's shared scale A_t per tensor
	mult      []float64 // per tensor, what a summed payload value is worth in coefficients: 1, or A_t / s
	pcg       rand.PCG
	rng       *rand.Rand
}

// gvqTensor is one packed tensor's slicing, basis and PCA accumulators.
type gvqTensor struct {
	name      string
	off, size int
	k         int // slice length
	slices    int
	rank      int       // d; 0 before the first basis
	basis     []float32 // d columns of length k, one after the other (capacity k*k)
	mu        []float32 // slices*k, the mean summed slice; zero without centring
	sum       []float64 // slices*k, sum of the sampled summed slices
	cov       []float64 // k*k, sum of S S^T over slices and samples (upper triangle, a <= b)
	pay       int       // offset of the coefficients in the payload
}

// gvqPhase is what a step does.
type gvqPhase int

const (
	gvqWarmup   gvqPhase = iota // dense, not sampled
	gvqSample                   // dense, sampled for the PCA
	gvqCompress                 // coefficients
)

// gvqExactSum is the largest magnitude up to which float32 holds every integer.
const gvqExactSum = 1 << 24

func newGradiVeQ(cfg Config, tensors []Tensor, worker, workers int, seed int64, _ Hyper) (Compressor, error) {
	gc := cfg.GradiVeQ
	if err := problem.Join(gc.problems()); err != nil {
		return nil, err
	}
	c := &gradiVeQ{cfg: gc, size: packedSize(tensors), workers: workers, worker: worker, seed: seed}
	if b := gc.QuantizeBits; b > 0 {
		c.levels = 1<<(b-1) - 1
		if int64(workers)*int64(c.levels) > gvqExactSum {
			return nil, fmt.Errorf("compress.gradiveq.quantize_bits: %d with %d workers: the summed levels reach %d x %d, beyond 2^24 = %d, "+
				"the largest integer a float32 sum holds exactly; expected at most %d bits for %d workers",
				b, workers, workers, c.levels, gvqExactSum, gvqMaxBits(workers), workers)
		}
		c.rng = rand.New(&c.pcg)
	}
	for _, t := range tensors {
		k := min(gc.SliceSize, t.Size)
		m := (t.Size + k - 1) / k
		c.tens = append(c.tens, gvqTensor{name: t.Name, off: t.Offset, size: t.Size, k: k, slices: m,
			basis: make([]float32, 0, k*k), mu: make([]float32, m*k), sum: make([]float64, m*k), cov: make([]float64, k*k)})
		c.denseWire = append(c.denseWire, int64(4*t.Size))
		c.scaleWire = append(c.scaleWire, 4)
	}
	c.compWire = make([]int64, len(tensors))
	c.scales = make([]float32, len(tensors))
	c.mult = make([]float64, len(tensors))
	c.layout()
	return c, nil
}

// gvqMaxBits is the most quantize_bits whose level sums over n workers stay
// exact in float32 (at least 1 when none does).
func gvqMaxBits(n int) int {
	b := gvqMaxQuantizeBits
	for b > 1 && int64(n)*int64(1<<(b-1)-1) > gvqExactSum {
		b--
	}
	return b
}

// Needs: the coefficients (or their levels) are summed; quantized steps first
// all-gather the per-tensor maxima. The residual, when asked for, is the
// generic one.
func (c *gradiVeQ) Needs() Needs {
	if c.levels > 0 {
		return Needs{Collective: dist.OpAllReduce, Rounds: 2, RoundOps: []dist.Op{dist.OpAllGather, dist.OpAllReduce},
			ErrorFeedback: c.cfg.ErrorFeedback}
	}
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
		n := t.slices * t.rank
		c.payLen += n
		c.compWire[i] = int64(4 * n)
		if c.levels > 0 {
			c.compWire[i] = int64((c.cfg.QuantizeBits*n + 7) / 8)
		}
		c.mult[i] = 1
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

func (c *gradiVeQ) Encode(r int, grad []float32, prev Combined, info StepInfo) (Payload, error) {
	last := c.Needs().Rounds - 1
	switch {
	case r < 0 || r > last:
		return Payload{}, fmt.Errorf("gradiveq: round %d: only rounds 0 to %d exist", r, last)
	case len(grad) != c.size:
		return Payload{}, fmt.Errorf("gradiveq: gradient has %d values, want %d", len(grad), c.size)
	case !c.compressing(info.Step) && r < last:
		return Payload{}, nil // a quantizing compressor's round 0 on a dense step: nothing to agree on
	case !c.compressing(info.Step):
		// Uncompressed all-reduce; the gradient is scratch, so it is the payload.
		return Payload{Floats: grad, Wire: int64(4 * c.size), TensorWire: c.denseWire}, nil
	case r == 0:
		c.project(grad, info)
		if c.levels > 0 {
			return c.encodeMaxes(), nil
		}
		return Payload{Floats: c.pay, Wire: int64(4 * c.payLen), TensorWire: c.compWire}, nil
	}
	return c.quantize(prev, info)
}

// project writes every slice's coefficients U^T (g - mu/N) into c.pay.
func (c *gradiVeQ) project(grad []float32, info StepInfo) {
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
}

// encodeMaxes is round 0 of a quantized step: max |c| per tensor (NaN when a
// coefficient is NaN: the builtin max keeps it).
func (c *gradiVeQ) encodeMaxes() Payload {
	c.maxes.Reset()
	for _, t := range c.tens {
		var a float32
		for _, v := range c.pay[t.pay : t.pay+t.slices*t.rank] {
			a = max(a, float32(math.Abs(float64(v))))
		}
		c.maxes.Float32s([]float32{a})
	}
	return Payload{Bytes: c.maxes.Bytes(), Wire: int64(c.maxes.Len()), TensorWire: c.scaleWire}
}

// quantize is round 1 of a quantized step: it agrees on A_t from every
// worker's maxima and replaces the coefficients in c.pay by their levels.
func (c *gradiVeQ) quantize(prev Combined, info StepInfo) (Payload, error) {
	if len(prev.Bytes) != info.Workers || info.Workers < 1 {
		return Payload{}, fmt.Errorf("gradiveq: %d scale payloads for %d workers", len(prev.Bytes), info.Workers)
	}
	clear(c.scales)
	a := make([]float32, len(c.tens))
	for w, b := range prev.Bytes {
		if len(b) != 4*len(c.tens) {
			return Payload{}, fmt.Errorf("gradiveq: worker %d sent %d scale bytes, want %d (4 per tensor)", w, len(b), 4*len(c.tens))
		}
		NewDecoder(b).Float32s(a)
		for i, v := range a {
			c.scales[i] = max(c.scales[i], v)
		}
	}
	s := float64(c.levels)
	for ti, t := range c.tens {
		scale := c.scales[ti]
		if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
			return Payload{}, fmt.Errorf("gradiveq: tensor %s: coefficient scale %v is not finite (a non-finite gradient on some worker)", t.name, scale)
		}
		c.mult[ti] = float64(scale) / s
		q := c.pay[t.pay : t.pay+t.slices*t.rank]
		if scale == 0 {
			clear(q) // every coefficient of every worker is 0
			continue
		}
		c.pcg.Seed(dgcMix(uint64(c.seed), uint64(c.worker)), dgcMix(uint64(info.Step), uint64(ti)))
		for j, v := range q {
			x := min(s*math.Abs(float64(v))/float64(scale), s)
			l := math.Floor(x)
			if c.rng.Float64() < x-l {
				l++
			}
			if v < 0 {
				l = -l
			}
			q[j] = float32(l)
		}
	}
	var wire int64
	for _, b := range c.compWire {
		wire += b
	}
	return Payload{Floats: c.pay, Wire: wire, TensorWire: c.compWire}, nil
}

// compressing reports whether the step sends coefficients: a compressed step
// of the schedule once a sampling phase has produced a basis (a run resumed
// from a checkpoint without GradiVeQ state has none until its next sampling
// phase ends).
func (c *gradiVeQ) compressing(step int) bool {
	return c.phase(step) == gvqCompress && len(c.tens) > 0 && c.tens[0].rank > 0
}

// decode adds (U C_m + scale*mu_m) / div for every slice of coefficients
// coef (payload values times the tensor's c.mult) into dst.
func (c *gradiVeQ) decode(coef, dst []float32, muScale, div float64) {
	for ti, t := range c.tens {
		mult := c.mult[ti]
		y := make([]float64, t.k)
		for m := 0; m < t.slices; m++ {
			for i := range y {
				y[i] = muScale * float64(t.mu[m*t.k+i])
			}
			for j := 0; j < t.rank; j++ {
				cj := float64(coef[t.pay+m*t.rank+j]) * mult
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
				for b := a; b < t.k; b++ {
					row[b] += xa * x[b]
				}
			}
		}
	}
	c.sampled++
	if pos == c.cfg.SampleSteps-1 {
		for i := range c.tens {
			c.tens[i].fit(c.sampled, c.cfg)
		}
		c.sampled = 0 // the accumulators are spent: State keeps the basis instead
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

// State buffers. Outside a sampling phase the compressor's future reads the
// ranks, U and mu; inside one, the samples taken so far and the float64
// accumulators (U and mu are rewritten when the phase ends). State keeps
// exactly one of the two sets.
const (
	gvqStateRank    = "rank"    // d per tensor, in layout order
	gvqStateBasis   = "basis"   // every tensor's d columns of length k, in layout order
	gvqStateMu      = "mu"      // every tensor's slices*k mean values
	gvqStateSamples = "samples" // [sampling steps accumulated in the phase]
	gvqStatePCA     = "pca"     // per tensor: sum (slices*k), then cov's upper triangle row by row, 3 words a float64
)

// gvqWords is the number of float32 words a float64 is stored in: its 64
// bits as three integers below 2^22, each exact in a float32. Two words
// holding the raw bits would be smaller, but some of those words would be
// NaN or infinite, which JSON cannot carry and arithmetic on the way may
// change; small integers survive any carrier of float32 values.
const gvqWords = 3

// gvqPutF64 stores v's bits in w[0:3] (22, 22 and 20 bits, low first).
func gvqPutF64(w []float32, v float64) {
	u := math.Float64bits(v)
	w[0], w[1], w[2] = float32(u&(1<<22-1)), float32(u>>22&(1<<22-1)), float32(u>>44)
}

// gvqGetF64 reads gvqPutF64's words; ok is false unless each is an integer of
// its width.
func gvqGetF64(w []float32) (v float64, ok bool) {
	var u uint64
	for i, lim := range [gvqWords]float32{1 << 22, 1 << 22, 1 << 20} {
		x := w[i]
		if !(x >= 0 && x < lim) || x != float32(uint32(x)) {
			return 0, false
		}
		u |= uint64(x) << (22 * i)
	}
	return math.Float64frombits(u), true
}

// pcaValues is the length of the "pca" buffer: every tensor's sum and the
// upper triangle of its cov, gvqWords each.
func (c *gradiVeQ) pcaValues() int {
	n := 0
	for _, t := range c.tens {
		n += t.slices*t.k + t.k*(t.k+1)/2
	}
	return gvqWords * n
}

// maxRank is the most components a basis of t can have.
func (c *gradiVeQ) maxRank(t gvqTensor) int {
	if c.cfg.Rank > 0 {
		return min(c.cfg.Rank, t.k)
	}
	return t.k
}

// StateValues is the larger of State's two forms at their largest: ranks,
// full-rank bases and mu, or the sample count and the accumulators.
func (c *gradiVeQ) StateValues() int {
	basis := len(c.tens)
	for _, t := range c.tens {
		basis += t.k*c.maxRank(t) + t.slices*t.k
	}
	return max(basis, 1+c.pcaValues())
}

// State is what the next steps read, so that a resumed run equals the
// uninterrupted one bit for bit: inside a sampling phase "samples" and "pca"
// (the float64 accumulators, losslessly in gvqWords words each), outside one
// "rank", "basis" and "mu".
func (c *gradiVeQ) State() map[string][]float32 {
	if c.sampled > 0 {
		w := make([]float32, c.pcaValues())
		o := 0
		for _, t := range c.tens {
			for _, v := range t.sum {
				gvqPutF64(w[o:], v)
				o += gvqWords
			}
			for a := 0; a < t.k; a++ {
				for _, v := range t.cov[a*t.k+a : (a+1)*t.k] {
					gvqPutF64(w[o:], v)
					o += gvqWords
				}
			}
		}
		return map[string][]float32{gvqStateSamples: {float32(c.sampled)}, gvqStatePCA: w}
	}
	st := map[string][]float32{gvqStateRank: make([]float32, len(c.tens)), gvqStateBasis: {}, gvqStateMu: {}}
	for i, t := range c.tens {
		st[gvqStateRank][i] = float32(t.rank)
		st[gvqStateBasis] = append(st[gvqStateBasis], t.basis...)
		st[gvqStateMu] = append(st[gvqStateMu], t.mu...)
	}
	return st
}

// SetState restores State's buffers after checking every size and value it
// depends on; on error nothing changes. An empty state is a compressor
// without basis or samples (checkpoints written before GradiVeQ kept state:
// such a run sends dense gradients until its next sampling phase ends).
func (c *gradiVeQ) SetState(st map[string][]float32) error {
	for k := range st {
		switch k {
		case gvqStateRank, gvqStateBasis, gvqStateMu, gvqStateSamples, gvqStatePCA:
		default:
			return fmt.Errorf("gradiveq: unknown state buffer %q (expected rank, basis and mu, or samples and pca)", k)
		}
	}
	_, sampling := st[gvqStateSamples]
	if _, pca := st[gvqStatePCA]; pca {
		sampling = true
	}
	switch {
	case len(st) == 0:
		c.restore(nil, nil)
		return nil
	case sampling:
		return c.setSampling(st)
	}
	return c.setBasis(st)
}

// setSampling restores a state taken inside a sampling phase.
func (c *gradiVeQ) setSampling(st map[string][]float32) error {
	for _, k := range []string{gvqStateRank, gvqStateBasis, gvqStateMu} {
		if _, ok := st[k]; ok {
			return fmt.Errorf("gradiveq: state buffer %q next to \"samples\" and \"pca\" (expected one of the two sets)", k)
		}
	}
	n, ok := st[gvqStateSamples]
	if !ok || len(n) != 1 {
		return fmt.Errorf("gradiveq: state buffer \"samples\" has %d values, want 1", len(n))
	}
	if hi := c.cfg.SampleSteps - 1; !(n[0] >= 1 && n[0] <= float32(hi)) || n[0] != float32(int(n[0])) {
		return fmt.Errorf("gradiveq: state buffer \"samples\" holds %v, want an integer in [1, %d] (compress.gradiveq.sample_steps - 1)", n[0], hi)
	}
	w, ok := st[gvqStatePCA]
	if want := c.pcaValues(); !ok || len(w) != want {
		return fmt.Errorf("gradiveq: state buffer \"pca\" has %d values, want %d (%d float64 sums, %d words each)", len(w), want, want/gvqWords, gvqWords)
	}
	for i := 0; i < len(w); i += gvqWords {
		if _, ok := gvqGetF64(w[i:]); !ok {
			return fmt.Errorf("gradiveq: state buffer \"pca\" value %d (words %v) is not a float64 in %d words", i/gvqWords, w[i:i+gvqWords], gvqWords)
		}
	}
	c.restore(nil, nil)
	o := 0
	get := func() float64 { v, _ := gvqGetF64(w[o:]); o += gvqWords; return v }
	for _, t := range c.tens {
		for i := range t.sum {
			t.sum[i] = get()
		}
		for a := 0; a < t.k; a++ {
			for b := a; b < t.k; b++ {
				t.cov[a*t.k+b] = get()
			}
		}
	}
	c.sampled = int(n[0])
	return nil
}

// setBasis restores a state taken outside a sampling phase.
func (c *gradiVeQ) setBasis(st map[string][]float32) error {
	ranks, ok := st[gvqStateRank]
	if !ok || len(ranks) != len(c.tens) {
		return fmt.Errorf("gradiveq: state buffer \"rank\" has %d values, want %d (one per compressed tensor)", len(ranks), len(c.tens))
	}
	basis, mu := 0, 0
	for i, t := range c.tens {
		d, hi := ranks[i], c.maxRank(t)
		lo := 1
		if ranks[0] == 0 {
			lo, hi = 0, 0 // no basis yet: none has one
		}
		if !(d >= float32(lo) && d <= float32(hi)) || d != float32(int(d)) {
			return fmt.Errorf("gradiveq: state buffer \"rank\" value %d (tensor %s) is %v, want an integer in [%d, %d]", i, t.name, d, lo, hi)
		}
		basis += t.k * int(d)
		mu += t.slices * t.k
	}
	if b, ok := st[gvqStateBasis]; !ok || len(b) != basis {
		return fmt.Errorf("gradiveq: state buffer \"basis\" has %d values, want %d (the ranks' columns)", len(b), basis)
	}
	if m, ok := st[gvqStateMu]; !ok || len(m) != mu {
		return fmt.Errorf("gradiveq: state buffer \"mu\" has %d values, want %d (every slice of every tensor)", len(m), mu)
	}
	c.restore(ranks, st)
	return nil
}

// restore sets the ranks, bases and mu (nil: none, zero) and empties the
// accumulators.
func (c *gradiVeQ) restore(ranks []float32, st map[string][]float32) {
	b, m := st[gvqStateBasis], st[gvqStateMu]
	for i := range c.tens {
		t := &c.tens[i]
		clear(t.sum)
		clear(t.cov)
		t.rank, t.basis = 0, t.basis[:0]
		clear(t.mu)
		if ranks == nil {
			continue
		}
		t.rank = int(ranks[i])
		t.basis = append(t.basis, b[:t.k*t.rank]...)
		b = b[t.k*t.rank:]
		m = m[copy(t.mu, m):]
	}
	c.sampled = 0
	c.layout()
}

var (
	_ Compressor      = (*gradiVeQ)(nil)
	_ CombinedDecoder = (*gradiVeQ)(nil)
	_ StateSizer      = (*gradiVeQ)(nil)
)
