package compress

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/problem"
)

// lgc is LGC, learned gradient compression: Abrahamyan, Chen, Bekoulis,
// Deligiannis, "Learned Gradient Compression for Distributed Deep Learning",
// IEEE TNNLS 2021, arXiv 2103.08870. Sources and what each settles, tagged
// below: [abstract] the paper's abstract, the only part of the paper checked:
// two instances, one for a parameter server (PS) and one for ring all-reduce
// (RAR); an autoencoder trained during the first stages of training captures
// the information common to the nodes' gradients; it is lightweight.
// [reimpl] a third-party PyTorch reimplementation, read for structure only
// (the design notes, ALGORITHMS-COMPRESSORS2.md "LGC", summarise it). [own]
// a choice made here where both are silent or where this code departs.
//
// Stages, by global step (StepInfo.Step):
//
//	1  step < dense_steps                 dense all-reduce [reimpl]
//	2  step < dense_steps + train_steps   values at the master's top-k
//	                                      indices; the autoencoder trains [reimpl, own: whose indices]
//	3  afterwards                         latent + innovations [reimpl]
//
// Defaults dense_steps = 200, train_steps = 300 are the reimplementation's
// stage boundaries (rounds 200 and 500); on a 10-epoch LeNet-5 run of 234
// steps an epoch they put stage 3 at step 500 (early in epoch 3, 79% of the
// run); on LeNet-5's gradients the autoencoder was still improving at 300
// training steps (see Measured). Stages 1 and 2 are the warm-up: Steady is
// true in stage 3 only.
//
// Per tensor k = ceil(numel x compress.density), at least 1 (as topk);
// K = sum of k over the compressed tensors, the length of a node's value
// vector v (the tensors' top-k values concatenated in layout order
// [reimpl]); latent L = ceil(K x latent_ratio) (default 1/4: the
// reimplementation's encoder makes about K/4 values); innovation k' =
// ceil(K x innovation_ratio) (default 0.01 = its 1e-5/1e-3), at least 1.
// The master is rank 0, every step [reimpl].
//
// Step t on node n (p = g + residual, the compensated gradient):
//
//	master:  I = per tensor, the k indices of the largest |p| (ties to the
//	         lower index), s = RMS of p[I] (1 if all zero)
//	all:     v_n = p_n[I] (K values); residual = p_n with the entries at I zeroed
//	stage 2  mean at I = (1/N) sum_n v_n, exact; every worker takes one
//	         optimizer step of the autoencoder on u_n = v_n / s
//	stage 3  PS:  z = enc(u_master); node n's values v^_n = s dec_n(z, inno_n)
//	              with its k' innovation entries taken as sent; mean_n v^_n at I
//	         RAR: z_n = enc(u_n) summed by the all-reduce; dec(sum / N) s at I
//
// inno_n, the innovation, is node n's k' largest |v_n| [reimpl: the node's
// own top-k'; here within its K values at I, own]: sent as (position in
// [0, K), value) pairs, fed to the decoder as a K-vector of zeros but
// v_n / s at those positions, and written over the decoded values [own,
// as in the notes' worked example: the exact values are known].
//
// Whose indices in stage 2 [own, departing from the reimplementation]: the
// reimplementation trains on each node's own top-k values and in stage 3
// reconstructs the values at the master's indices, vectors it never trained
// on. Here stage 2 already sends every node's values at the master's I (the
// leader broadcast of scalecom.go), so the autoencoder trains on exactly the
// vectors it reconstructs in stage 3; a side effect is that stage 2's
// aggregate is ScaleCom's with beta = 1 (exact mean at a shared I).
//
// Scale [own]: gradients are ~1e-3, and an MSE on raw values gives the
// autoencoder almost nothing to learn from; every vector is divided by one
// scale shared by all nodes, the master's RMS s, sent with I (4 bytes), and
// decoded values are multiplied back.
//
// Error feedback [reimpl: residual = compensated gradient with the sent
// entries zeroed]: after stage 1 the residual is p with the entries at I
// zeroed, what the node meant to send; the stage-3 reconstruction error is
// not fed back. Stage 1 sends everything (residual 0). The compressor keeps
// the residual itself (Needs.ErrorFeedback is false: the generic one would
// decode a payload on its own) and reports it as an ErrorFeedback whose Sent
// is what the node meant to send.
//
// Momentum correction [own, after the "top-k or DGC-style" and DGC
// (Lin et al. 2018)]: compress.lgc.momentum_correction (default true) makes
// LGC apply the optimizer's momentum and weight decay itself, as DGC does
// (momentumAccumulate: u = m*u + g + wd*w, v += u; p = v, the residual is
// v), with momentum factor masking (u = 0 at I, compress.lgc.factor_masking,
// default true); the optimizer then takes plain SGD steps on the compressed
// tensors (Needs.OwnsMomentum). Stage 1 sends all of v and keeps u, which is
// momentum SGD. The default follows DGC, the project's method for sparse
// momentum SGD, not a sweep: on the LeNet-5 sweep's base (lr 0.1, momentum
// 0.9, density 0.1%) stage 2 did not train either way (training loss to
// ln(10) without it, as plain topk there; NaN or ln(10) with it).
//
// The autoencoder (lgc_net.go), built and trained with Gorgonia, float32:
//
//	encoder  K -> H -> L: x W1 + b1, LeakyReLU (slope 0.01), W2 + b2
//	PS       one decoder per node: [z, inno] (L + K) -> H -> K, LeakyReLU between
//	RAR      one shared decoder L -> H -> K
//
// [own: the reimplementation's encoder is four stride-2 1-D convolutions
// (kernel 3) and a 1x1 convolution, its decoders transposed convolutions
// with a final 1x1 over [decoded, innovation]; Gorgonia has no transposed
// convolution, so both are small MLPs of hidden width H = hidden (default
// 64). Its weights grow as K x H x (N + 1) in the PS instance.] Weights
// start from PyTorch's default linear initialisation, U(+-1/sqrt(fan_in)),
// drawn from a generator seeded by the run's seed, identical on every worker.
//
// Loss [reimpl], one optimizer step per stage-2 step, on the normalised
// values U (N x K, row n = u_n) with Z = enc(U):
//
//	PS   lambda1 sum_n MSE(u_n, dec_n(z_master, inno_n)) + lambda2 sum_{i != j} MSE(z_i, z_j)
//	RAR  lambda1 MSE(mean_n u_n, dec(mean_n z_n))        + lambda2 sum_{i != j} MSE(z_i, z_j)
//
// with lambda1 = lambda2 = 0.5 [reimpl], the pairs ordered (each unordered
// pair twice). The reimplementation decodes every node from a random node's
// latent; here from the master's [own], the latent stage 3 decodes from.
// Optimizer [own]: Adam (beta 0.9, 0.999, eps 1e-8), lr 1e-3; the
// reimplementation's plain SGD at lr 1e-3 did not learn within 300 steps
// (per-node reconstruction 0.74 against 1.0 for predicting zeros on the
// synthetic correlated vectors of lgc_test.go, Adam 0.026); optimizer: sgd
// remains available.
//
// Where the autoencoder lives [own]: the exchange has no server process. In
// the PS instance the stage-2 values are all-gathered, so every worker holds
// every node's v_n and trains an identical replica of the server's
// autoencoder with identical float32 arithmetic (the same data in rank
// order, the same ops; Gorgonia's gonum kernels are deterministic); in stage
// 3 every worker decodes all nodes and averages, so all apply the same
// update. No weights travel and none are counted. A real PS deployment would
// ship the encoder to the master once at the start of stage 3:
// EncoderBytes, 4 (K H + H + H L + L) bytes, 20,800 B for LeNet-5 at density
// 0.001 (K = 64, H = 64, L = 16), reported, not added to the traffic.
//
// RAR instance [own; the paper's RAR construction is unverified]: the
// master broadcasts I and s; stage 2 all-gathers the values at I to train
// the shared encoder and decoder with the RAR loss; in stage 3 every node
// sends z_n = enc(v_n / s) into an all-reduce (4L bytes, the same on every
// node: all-reduce compatible, independent of N) and every worker decodes
// dec(sum / N) x s as the mean at I. No innovation.
//
// Rounds (Needs is fixed for life; a stage leaves a round's payloads empty,
// which costs nothing):
//
//	round 0  all-gather: the master's s (float32) and I (int32, per tensor
//	         increasing, layout order); every other payload is empty
//	round 1  all-gather: stage 2 every node's K float32 values; stage 3 PS the
//	         master's z (L float32), then every node's k' int32 positions and
//	         k' float32 values
//	round 2  all-reduce: stage 1 the dense compensated gradient; stage 3 RAR
//	         z_n (L float32)
//
// Bytes a step, as encoded: stage 1 4 numel; stage 2 master 4 + 8K, others
// 4K; stage 3 PS master 4 + 4K + 4L + 8k', others 8k'; stage 3 RAR master
// 4 + 4K + 4L, others 4L. The stage-2 payloads are the autoencoder's
// training traffic and are counted as the compressor's. Latent bytes are
// booked to the tensors in proportion to their k, an innovation entry to
// the tensor it falls in.
//
// State: the residual, the weights and Adam's moments ("residual",
// "lgc.weights", "lgc.adam_m", "lgc.adam_v"): a resumed run equals an
// uninterrupted one bit for bit (Adam's step count is the step's place in
// stage 2). The weights can exceed twice the model's size (LeNet-5 with 8
// workers: 79,952 weights, three buffers of them with Adam, against 61,706
// parameters), hence StateValues. The number of workers is part of the
// autoencoder (one PS decoder per node) and cannot change.
//
// Measured (LeNet-5 on Fashion-MNIST, configs/lenet5-fashion.yaml, 8
// workers x batch 32, 2 epochs, density 0.001, every weight tensor
// compressed, dense_steps 100, train_steps 150; one run each on a shared
// 2-core machine): test accuracy PS 76.6%, RAR 63.8%, topk 74.7%, dense
// 87.1%; compression ratio PS 4.6x whole run, 249x steady (992 B a worker
// step, 944 of them the dense biases; the compressed tensors alone 5,070x);
// RAR 4.6x and 237x. The reconstruction term at the end of stage 2 stays
// close to predicting zeros on these vectors: 0.94 of it after 150 steps
// (PS; RAR 0.97) and 0.85 after 300: top-k values at indices that move from
// step to step share little structure a K/4 latent can carry. One exchange
// step of 8 workers (BenchmarkLGCExchange, 2 cores): topk 4 ms; PS stage 2
// 19 ms (8 replicas each training 8 decoders), stage 3 4.5 ms; RAR stage 2
// 4.9 ms, stage 3 2.6 ms; a LeNet-5 step takes about 130 ms here.
type lgc struct {
	cfg      LGCConfig
	hyper    Hyper     // momentum and weight decay, applied here with momentum correction
	u        []float32 // momentum per packed element (momentum correction only)
	tensors  []Tensor
	size     int
	worker   int
	workers  int
	ks, koff []int // top-k per tensor and its offset in the concatenated vector
	k        int   // K = sum of ks
	kInno    int   // k': innovation entries per node
	latent   int   // L
	net      *lgcNet
	sel      selector

	residual []float32 // error feedback: what was not meant to be sent
	comp     []float32 // this step's compensated gradient
	sent     []float32 // Sent()'s buffer, allocated on first use

	// This step's values, kept between rounds.
	stage lgcStage
	step  int
	idx   []int32   // I: the master's indices, per tensor at koff (tensor-local)
	scale float32   // s: the RMS of the master's values at I
	v     []float32 // this node's values at I (K)
	jpos  []int32   // this node's innovation positions in [0, K) (k')
	jval  []float32 // its values there (raw, not normalised)
	mean  []float32 // the decoded mean at I (K)
	z     []float32 // a latent (L)

	pos               [][]int32   // N x k': every node's innovation positions (stage 3, PS)
	vals              [][]float32 // N x k': their values
	rows, innos, outs [][]float32 // N x K scratch: normalised values, innovation vectors, decoder outputs
	enc0, enc1        Encoder     // rounds 0 and 1 payloads (round 1's readers may still read round 0's)
	tw0, tw1, tw2     []int64     // bytes per tensor of each round's payload
	denseWire         []int64
}

// lgcStage is LGC's stage of a step.
type lgcStage int

const (
	lgcDense      lgcStage = iota + 1 // stage 1: dense all-reduce
	lgcTrain                          // stage 2: values at the master's indices; the autoencoder trains
	lgcCompressed                     // stage 3: latent and innovations
)

// lgcMaxWeights bounds the autoencoder (512 MiB of float32 weights; its
// gradients, Adam's moments and the graphs' copies take several times that).
const lgcMaxWeights = 1 << 27

// lgcMaster is the rank of the master node (the reimplementation's rank 0).
const lgcMaster = 0

var (
	_ Compressor      = (*lgc)(nil)
	_ CombinedDecoder = (*lgc)(nil)
	_ ErrorFeedback   = (*lgc)(nil)
	_ StateSizer      = (*lgc)(nil)
)

func newLGC(cfg Config, tensors []Tensor, worker, workers int, seed int64, hyper Hyper) (Compressor, error) {
	lc := cfg.LGC
	if err := problem.Join(lc.problems()); err != nil {
		return nil, err
	}
	if err := checkDensity(cfg.Density); err != nil {
		return nil, err
	}
	if err := checkIndexable(tensors); err != nil {
		return nil, err
	}
	if workers < 1 || worker < 0 || worker >= workers {
		return nil, fmt.Errorf("lgc: worker %d of %d", worker, workers)
	}
	c := &lgc{cfg: lc, hyper: hyper, tensors: tensors, size: packedSize(tensors), worker: worker, workers: workers}
	for _, t := range tensors {
		k := sparseK(t.Size, cfg.Density)
		c.ks, c.koff = append(c.ks, k), append(c.koff, c.k)
		c.k += k
		c.denseWire = append(c.denseWire, int64(4*t.Size))
	}
	c.residual, c.comp = make([]float32, c.size), make([]float32, c.size)
	if lc.MomentumCorrection {
		c.u = make([]float32, c.size)
	}
	c.tw0, c.tw1, c.tw2 = make([]int64, len(tensors)), make([]int64, len(tensors)), make([]int64, len(tensors))
	if c.k == 0 {
		return c, nil // no tensor: nothing to learn (Config.OwnsMomentum builds one so)
	}
	c.latent, c.kInno = sparseK(c.k, lc.LatentRatio), sparseK(c.k, lc.InnovationRatio)
	shape := lgcShape{rar: lc.Variant == "rar", k: c.k, latent: c.latent, hidden: lc.Hidden, nodes: workers}
	if w := shape.weightCount(); w > lgcMaxWeights {
		return nil, Problem{Key: "compress.lgc.hidden", Value: lc.Hidden, Want: fmt.Sprintf(
			"the autoencoder would have %d weights (K = %d, L = %d, %d workers), more than %d: lower compress.lgc.hidden, compress.lgc.latent_ratio or compress.density",
			w, c.k, c.latent, workers, lgcMaxWeights)}
	}
	var err error
	if c.net, err = newLGCNet(shape, lc, seed); err != nil {
		return nil, err
	}
	c.idx, c.v, c.mean, c.z = make([]int32, c.k), make([]float32, c.k), make([]float32, c.k), make([]float32, c.latent)
	c.jpos, c.jval = make([]int32, c.kInno), make([]float32, c.kInno)
	for range workers {
		c.rows = append(c.rows, make([]float32, c.k))
		c.innos = append(c.innos, make([]float32, c.k))
		c.outs = append(c.outs, make([]float32, c.k))
		c.pos = append(c.pos, make([]int32, c.kInno))
		c.vals = append(c.vals, make([]float32, c.kInno))
	}
	return c, nil
}

// Needs: round 0 gathers the master's indices and scale (the others send
// nothing), round 1 every node's values (stage 2) or latent and innovations
// (stage 3, PS), round 2 sums the dense gradient (stage 1) or the latents
// (stage 3, RAR). A round a stage does not use carries empty payloads.
func (c *lgc) Needs() Needs {
	return Needs{Collective: dist.OpAllGather, Rounds: 3,
		RoundOps:     []dist.Op{dist.OpAllGather, dist.OpAllGather, dist.OpAllReduce},
		OwnsMomentum: c.cfg.MomentumCorrection}
}

// stageAt is the stage of a step.
func (c *lgc) stageAt(step int) lgcStage {
	switch {
	case step < c.cfg.DenseSteps:
		return lgcDense
	case step < c.cfg.DenseSteps+c.cfg.TrainSteps:
		return lgcTrain
	}
	return lgcCompressed
}

// Steady: only stage 3 is LGC's compression; stages 1 and 2 are its warm-up.
func (c *lgc) Steady(info StepInfo) bool { return c.stageAt(info.Step) == lgcCompressed }

func (c *lgc) rar() bool { return c.cfg.Variant == "rar" }

func (c *lgc) Encode(r int, grad []float32, prev Combined, info StepInfo) (Payload, error) {
	if len(grad) != c.size {
		return Payload{}, fmt.Errorf("lgc: gradient has %d values, want %d", len(grad), c.size)
	}
	if info.Workers != c.workers {
		return Payload{}, fmt.Errorf("lgc: %d workers, but the autoencoder was built for %d", info.Workers, c.workers)
	}
	switch r {
	case 0:
		return c.round0(grad, info)
	case 1:
		return c.round1(grad, prev)
	case 2:
		return c.round2(grad, prev)
	}
	return Payload{}, fmt.Errorf("lgc: round %d: only rounds 0-2 exist", r)
}

// round0 compensates (p = g + residual, in grad) and, on the master after
// stage 1, selects I and sends s and I.
func (c *lgc) round0(grad []float32, info StepInfo) (Payload, error) {
	c.stage, c.step = c.stageAt(info.Step), info.Step
	if c.u != nil {
		// DGC's momentum correction: u = m*u + g + wd*w, v += u; the residual
		// is v, and p = v.
		for _, t := range c.tensors {
			lo, hi := t.Offset, t.Offset+t.Size
			var w []float32
			if c.hyper.WeightDecay != 0 {
				if len(info.Params) < t.FlatOffset+t.Size {
					return Payload{}, fmt.Errorf("lgc: weight decay needs the parameters: have %d values, tensor %s reaches %d", len(info.Params), t.Name, t.FlatOffset+t.Size)
				}
				w = info.Params[t.FlatOffset : t.FlatOffset+t.Size]
			}
			momentumAccumulate(grad[lo:hi], w, c.u[lo:hi], c.residual[lo:hi], 1, c.hyper)
		}
		copy(grad, c.residual)
		copy(c.comp, grad)
	} else {
		for i, e := range c.residual {
			grad[i] += e
			c.comp[i] = grad[i]
		}
	}
	c.enc0.Reset()
	if c.stage == lgcDense {
		clear(c.residual) // everything is sent
	}
	if c.stage == lgcDense || c.worker != lgcMaster {
		clear(c.tw0)
		return Payload{Bytes: c.enc0.Bytes(), TensorWire: c.tw0}, nil
	}
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		c.sel.topK(grad[t.Offset:t.Offset+t.Size], k, c.idx[o:o+k])
		c.tw0[ti] = int64(4 * k)
	}
	c.gather(grad)
	c.scale = lgcRMS(c.v)
	c.enc0.Uint32(math.Float32bits(c.scale))
	c.enc0.Int32s(c.idx)
	return Payload{Bytes: c.enc0.Bytes(), Wire: int64(c.enc0.Len()), TensorWire: c.tw0}, nil
}

// gather copies the compensated values at I into v.
func (c *lgc) gather(p []float32) {
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		for j, i := range c.idx[o : o+k] {
			c.v[o+j] = p[t.Offset+int(i)]
		}
	}
}

// lgcRMS is the root mean square of v, the scale the autoencoder's values
// are divided by; 1 when v is all zeros (nothing to scale).
func lgcRMS(v []float32) float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return 1
	}
	return float32(math.Sqrt(s / float64(len(v))))
}

// round1 reads the master's s and I, takes this node's values at I, keeps the
// rest as the residual, and sends the values (stage 2) or, in stage 3 of the
// PS instance, the innovation (and on the master the latent).
func (c *lgc) round1(grad []float32, prev Combined) (Payload, error) {
	c.enc1.Reset()
	clear(c.tw1)
	if c.stage == lgcDense {
		return Payload{Bytes: c.enc1.Bytes(), TensorWire: c.tw1}, nil
	}
	if err := c.readIndices(prev); err != nil {
		return Payload{}, err
	}
	c.gather(grad)
	copy(c.residual, grad)
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		for _, i := range c.idx[o : o+k] {
			c.residual[t.Offset+int(i)] = 0 // p minus what this node meant to send
			if c.u != nil && c.cfg.FactorMasking {
				c.u[t.Offset+int(i)] = 0 // momentum factor masking
			}
		}
	}
	switch {
	case c.stage == lgcTrain:
		c.enc1.Float32s(c.v)
		for ti, k := range c.ks {
			c.tw1[ti] = int64(4 * k)
		}
	case !c.rar():
		c.sel.topK(c.v, c.kInno, c.jpos)
		for j, i := range c.jpos {
			c.jval[j] = c.v[i]
		}
		if c.worker == lgcMaster {
			c.normalise(c.v, c.rows[0])
			if err := c.net.infer.encode(c.rows[0], c.z); err != nil {
				return Payload{}, err
			}
			c.enc1.Float32s(c.z)
			c.apportion(c.tw1, 4*c.latent)
		}
		c.enc1.Int32s(c.jpos)
		c.enc1.Float32s(c.jval)
		for _, j := range c.jpos {
			c.tw1[c.tensorOf(int(j))] += 8
		}
	}
	return Payload{Bytes: c.enc1.Bytes(), Wire: int64(c.enc1.Len()), TensorWire: c.tw1}, nil
}

// readIndices decodes the master's round-0 payload into s and I, checking
// that nobody else sent anything and that I is increasing within each tensor.
func (c *lgc) readIndices(prev Combined) error {
	if len(prev.Bytes) != c.workers {
		return fmt.Errorf("lgc: %d index payloads for %d workers", len(prev.Bytes), c.workers)
	}
	for w, b := range prev.Bytes {
		want := 0
		if w == lgcMaster {
			want = 4 + 4*c.k
		}
		if len(b) != want {
			return fmt.Errorf("lgc: worker %d sent %d index bytes, want %d (master %d)", w, len(b), want, lgcMaster)
		}
	}
	d := NewDecoder(prev.Bytes[lgcMaster])
	c.scale = math.Float32frombits(d.Uint32())
	d.Int32s(c.idx)
	if err := d.Done(); err != nil {
		return err
	}
	if !(c.scale > 0) || math.IsInf(float64(c.scale), 0) {
		return fmt.Errorf("lgc: the master's scale %v is not a positive finite number (a non-finite gradient?)", c.scale)
	}
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		if err := increasingWithin(c.idx[o:o+k], t.Size); err != nil {
			return fmt.Errorf("lgc: tensor %s: %w", t.Name, err)
		}
	}
	return nil
}

// increasingWithin checks that idx increases strictly within [0, n).
func increasingWithin(idx []int32, n int) error {
	last := int32(-1)
	for _, i := range idx {
		if i <= last || int(i) >= n {
			return fmt.Errorf("index %d after %d is not increasing within [0, %d)", i, last, n)
		}
		last = i
	}
	return nil
}

// normalise writes v / s into u.
func (c *lgc) normalise(v, u []float32) {
	for i, x := range v {
		u[i] = x / c.scale
	}
}

// tensorOf is the tensor whose top-k block holds position j of the
// concatenated vector.
func (c *lgc) tensorOf(j int) int {
	ti, _ := slices.BinarySearch(c.koff, j+1)
	return ti - 1
}

// apportion sets tw to bytes split over the tensors in proportion to their
// k (a latent stands for all K values), the remainder to the last tensor.
func (c *lgc) apportion(tw []int64, bytes int) {
	left := int64(bytes)
	for ti, k := range c.ks {
		tw[ti] = int64(bytes) * int64(k) / int64(c.k)
		left -= tw[ti]
	}
	tw[len(tw)-1] += left
}

// round2 sums the dense compensated gradient (stage 1) or the latents (stage
// 3, RAR); in stage 2 it trains the autoencoder on the gathered values and in
// stage 3 (PS) decodes every node, before an empty all-reduce.
func (c *lgc) round2(grad []float32, prev Combined) (Payload, error) {
	clear(c.tw2)
	switch {
	case c.stage == lgcDense:
		return Payload{Floats: grad, Wire: int64(4 * c.size), TensorWire: c.denseWire}, nil
	case c.stage == lgcTrain:
		if err := c.train(prev); err != nil {
			return Payload{}, err
		}
		return Payload{Floats: []float32{}, TensorWire: c.tw2}, nil
	case !c.rar():
		if err := c.decodePS(prev); err != nil {
			return Payload{}, err
		}
		return Payload{Floats: []float32{}, TensorWire: c.tw2}, nil
	}
	c.normalise(c.v, c.rows[0])
	if err := c.net.infer.encode(c.rows[0], c.z); err != nil {
		return Payload{}, err
	}
	c.apportion(c.tw2, 4*c.latent)
	return Payload{Floats: c.z, Wire: int64(4 * c.latent), TensorWire: c.tw2}, nil
}

// train reads every node's values at I, keeps their mean (the step's exact
// aggregate at I) and takes one optimizer step of the autoencoder on them,
// normalised by s; every worker does the same with the same data.
func (c *lgc) train(prev Combined) error {
	if len(prev.Bytes) != c.workers {
		return fmt.Errorf("lgc: %d value payloads for %d workers", len(prev.Bytes), c.workers)
	}
	clear(c.mean)
	for w, b := range prev.Bytes {
		if len(b) != 4*c.k {
			return fmt.Errorf("lgc: worker %d sent %d value bytes, want %d", w, len(b), 4*c.k)
		}
		d := NewDecoder(b)
		d.Float32s(c.outs[w])
		for i, x := range c.outs[w] {
			c.mean[i] += x
		}
		c.normalise(c.outs[w], c.rows[w])
		c.innovation(c.outs[w], c.innos[w])
	}
	divideSum(c.mean, c.workers)
	return c.net.step(c.rows, c.innos, c.trainStep()+1)
}

// trainStep counts this step's place in stage 2 from 0 (Adam's step count).
func (c *lgc) trainStep() int { return c.step - c.cfg.DenseSteps }

// innovation writes node values v's innovation vector into inno: zeros but at
// the k' largest |v|, where it holds v / s.
func (c *lgc) innovation(v, inno []float32) {
	clear(inno)
	for _, i := range c.sel.topK(v, c.kInno, c.jpos) {
		inno[i] = v[i] / c.scale
	}
}

// decodePS reads the master's latent and every node's innovation, decodes
// each node's values, dec_n(z, inno_n) x s with the innovation entries taken
// as sent, and keeps their mean.
func (c *lgc) decodePS(prev Combined) error {
	if len(prev.Bytes) != c.workers {
		return fmt.Errorf("lgc: %d payloads for %d workers", len(prev.Bytes), c.workers)
	}
	for w, b := range prev.Bytes {
		want := 8 * c.kInno
		if w == lgcMaster {
			want += 4 * c.latent
		}
		if len(b) != want {
			return fmt.Errorf("lgc: worker %d sent %d bytes, want %d", w, len(b), want)
		}
	}
	pos, vals := c.pos, c.vals
	for w, b := range prev.Bytes {
		d := NewDecoder(b)
		if w == lgcMaster {
			d.Float32s(c.z)
		}
		d.Int32s(pos[w])
		d.Float32s(vals[w])
		if err := d.Done(); err != nil {
			return err
		}
		if err := increasingWithin(pos[w], c.k); err != nil {
			return fmt.Errorf("lgc: worker %d's innovation: %w", w, err)
		}
		clear(c.innos[w])
		for j, i := range pos[w] {
			c.innos[w][i] = vals[w][j] / c.scale
		}
	}
	if err := c.net.infer.decode(c.z, c.innos, c.outs); err != nil {
		return err
	}
	clear(c.mean)
	for w, out := range c.outs {
		for i, x := range out {
			out[i] = x * c.scale
		}
		for j, i := range pos[w] {
			out[i] = vals[w][j] // sent exactly
		}
		for i, x := range out {
			c.mean[i] += x
		}
	}
	divideSum(c.mean, c.workers)
	return nil
}

// DecodeAdd is not defined for LGC: a node's stage-3 payload decodes only
// with the master's latent and indices (DecodeMean).
func (c *lgc) DecodeAdd(Payload, []float32, StepInfo) error {
	return fmt.Errorf("lgc: a payload cannot be decoded on its own")
}

// DecodeMean writes the mean: the summed dense gradient / N (stage 1), or
// the mean values at I scattered (stage 2: exact; stage 3, PS: decoded in
// round 2; RAR: dec(sum of latents / N) x s).
func (c *lgc) DecodeMean(last Combined, dst []float32, info StepInfo) error {
	n := last.Workers
	if n != c.workers || len(dst) != c.size || c.stageAt(info.Step) != c.stage {
		return fmt.Errorf("lgc: decode step %d into %d values from %d workers, want %d values from %d", info.Step, len(dst), n, c.size, c.workers)
	}
	if c.stage == lgcDense {
		if len(last.Floats) != c.size {
			return fmt.Errorf("lgc: combined %d dense values, want %d", len(last.Floats), c.size)
		}
		copy(dst, last.Floats)
		divideSum(dst, n)
		return nil
	}
	if c.stage == lgcCompressed && c.rar() {
		if len(last.Floats) != c.latent {
			return fmt.Errorf("lgc: combined %d latent values, want %d", len(last.Floats), c.latent)
		}
		for i, x := range last.Floats {
			c.z[i] = x / float32(n)
		}
		if err := c.net.infer.decode(c.z, nil, c.outs[:1]); err != nil {
			return err
		}
		for i, x := range c.outs[0] {
			c.mean[i] = x * c.scale
		}
	} else if len(last.Floats) != 0 {
		return fmt.Errorf("lgc: combined %d values, want none", len(last.Floats))
	}
	clear(dst)
	for ti, t := range c.tensors {
		o, k := c.koff[ti], c.ks[ti]
		for j, i := range c.idx[o : o+k] {
			dst[t.Offset+int(i)] = c.mean[o+j]
		}
	}
	return nil
}

// Compensated is the step's gradient plus the previous residual (aliased).
func (c *lgc) Compensated() []float32 { return c.comp }

// Residual is the compensated gradient with the entries at I zeroed
// (aliased; zero after a dense step).
func (c *lgc) Residual() []float32 { return c.residual }

// Sent is what this node meant to send: its compensated values at I (all of
// them in stage 1), computed on demand. In stage 3 the others receive a
// reconstruction of it; the reconstruction error is not fed back.
func (c *lgc) Sent() []float32 {
	if c.sent == nil {
		c.sent = make([]float32, c.size)
	}
	for i, x := range c.comp {
		c.sent[i] = x - c.residual[i] // x or 0: exact
	}
	return c.sent
}

// EncoderBytes is the size of the encoder's float32 weights: what a
// parameter-server deployment ships to the master once, at the start of
// stage 3. Here every worker trains its own replica from the values it
// receives, so no weights travel and the exchange does not count them.
func (c *lgc) EncoderBytes() int64 {
	if c.net == nil {
		return 0
	}
	return int64(4 * c.net.s.encoderWeights())
}

// State is the residual and the autoencoder's weights (and Adam's moments):
// copies.
func (c *lgc) State() map[string][]float32 {
	st := map[string][]float32{"residual": slices.Clone(c.residual)}
	if c.u != nil {
		st["lgc.momentum"] = slices.Clone(c.u)
	}
	if c.net != nil {
		st["lgc.weights"] = slices.Clone(c.net.w)
		if c.net.m != nil {
			st["lgc.adam_m"], st["lgc.adam_v"] = slices.Clone(c.net.m), slices.Clone(c.net.v)
		}
	}
	return st
}

// stateBuffers names the state's buffers with the live slices they restore.
func (c *lgc) stateBuffers() map[string][]float32 {
	st := map[string][]float32{"residual": c.residual}
	if c.u != nil {
		st["lgc.momentum"] = c.u
	}
	if c.net != nil {
		st["lgc.weights"] = c.net.w
		if c.net.m != nil {
			st["lgc.adam_m"], st["lgc.adam_v"] = c.net.m, c.net.v
		}
	}
	return st
}

// StateValues is the residual plus the weights (three times with Adam).
func (c *lgc) StateValues() int {
	n := 0
	for _, b := range c.stateBuffers() {
		n += len(b)
	}
	return n
}

// SetState restores State's buffers; on error nothing changes.
func (c *lgc) SetState(st map[string][]float32) error {
	want := c.stateBuffers()
	for k, v := range st {
		w, ok := want[k]
		if !ok {
			return fmt.Errorf("lgc: unknown state buffer %q", k)
		}
		if len(v) != len(w) {
			return fmt.Errorf("lgc: state buffer %q has %d values, want %d", k, len(v), len(w))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := st[k]; !ok {
			return fmt.Errorf("lgc: state has no %q buffer", k)
		}
	}
	for k, w := range want {
		copy(w, st[k])
	}
	return nil
}
