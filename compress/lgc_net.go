package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LGC's autoencoder is the one part of package compress built on Gorgonia:
// this file alone imports it.

// lgcBuildMu serialises building LGC's Gorgonia graphs: building graphs,
// G.Grad and NewTapeMachine race on Gorgonia's global counters (GORGONIA.md),
// and the workers' compressors may be built from several goroutines. Running
// the built machines concurrently is safe.
var lgcBuildMu sync.Mutex

// lgcLeak is the LeakyReLU slope on negative inputs (PyTorch's default; the
// reimplementation's layer choice is not carried over, see lgc.go).
const lgcLeak = 0.01

// lgcShape is the autoencoder's architecture (lgc.go explains it).
type lgcShape struct {
	rar    bool // ring all-reduce instance: one shared decoder from the mean latent
	k      int  // K: values per node (the concatenated top-k over the tensors)
	latent int  // L
	hidden int  // H
	nodes  int  // N: one decoder per node in the PS instance
}

// lgcLayer is one weight tensor in the flat weight buffer: a rows x cols
// matrix, or a bias vector of cols values when rows is 0.
type lgcLayer struct {
	name       string
	rows, cols int
	off        int
}

func (l lgcLayer) size() int { return max(l.rows, 1) * l.cols }

// layers lists the weight tensors in their order in the flat buffer: the
// encoder, then the decoders (PS: node 0's, node 1's, ...). A forward pass
// computes x W + b (x a row).
func (s lgcShape) layers() []lgcLayer {
	var out []lgcLayer
	off := 0
	add := func(name string, rows, cols int) {
		l := lgcLayer{name: name, rows: rows, cols: cols, off: off}
		out = append(out, l)
		off += l.size()
	}
	k, l, h := s.k, s.latent, s.hidden
	add("enc.w1", k, h)
	add("enc.b1", 0, h)
	add("enc.w2", h, l)
	add("enc.b2", 0, l)
	decoder := func(p string, innovation bool) {
		add(p+".wz", l, h)
		if innovation {
			add(p+".wi", k, h)
		}
		add(p+".b1", 0, h)
		add(p+".w2", h, k)
		add(p+".b2", 0, k)
	}
	if s.rar {
		decoder("dec", false)
	} else {
		for n := range s.nodes {
			decoder("dec"+strconv.Itoa(n), true)
		}
	}
	return out
}

// weights is the number of float32 weights of the whole autoencoder.
func (s lgcShape) weights() int {
	ls := s.layers()
	last := ls[len(ls)-1]
	return last.off + last.size()
}

// weightCount is weights() in int64, for the bound check before layers
// whose int offsets could overflow a 32-bit int are laid out.
func (s lgcShape) weightCount() int64 {
	k, l, h := int64(s.k), int64(s.latent), int64(s.hidden)
	enc := k*h + h + h*l + l
	dec := l*h + h + h*k + k // the rar decoder
	if s.rar {
		return enc + dec
	}
	return enc + int64(s.nodes)*(dec+k*h) // each PS decoder also reads the innovation
}

// encoderWeights is the number of the encoder's weights (what a parameter
// server would ship to the master once).
func (s lgcShape) encoderWeights() int {
	return s.k*s.hidden + s.hidden + s.hidden*s.latent + s.latent
}

// initLGCWeights fills w with PyTorch's default initialisation of a linear
// layer, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases (fan_in =
// the rows of the layer's matrix; a PS decoder's first layer has fan_in L+K
// over its two matrices), drawn in layout order from a generator seeded by
// the run's seed alone, so every worker starts from the same weights.
func initLGCWeights(s lgcShape, seed int64, w []float32) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x4c4743)) // "LGC": a stream of its own
	for _, l := range s.layers() {
		bound := 1 / math.Sqrt(float64(lgcFanIn(s, l)))
		for i := range l.size() {
			w[l.off+i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
}

// lgcFanIn is the number of inputs of the layer a weight tensor belongs to.
func lgcFanIn(s lgcShape, l lgcLayer) int {
	k, lat, h := s.k, s.latent, s.hidden
	switch suffix := l.name[len(l.name)-2:]; {
	case l.name == "enc.w1" || l.name == "enc.b1":
		return k
	case l.name == "enc.w2" || l.name == "enc.b2":
		return h
	case suffix == "w2" || suffix == "b2":
		return h
	case s.rar:
		return lat
	default:
		return lat + k
	}
}

// lgcGraph is one Gorgonia graph over the autoencoder's weights: the weight
// nodes are bound to views of a flat buffer shared by all of a net's graphs,
// so updating the buffer updates every graph.
type lgcGraph struct {
	s      lgcShape
	dt     tensor.Dtype
	g      *G.ExprGraph
	params []*G.Node
	byName map[string]*G.Node
	inputs map[*G.Node]*tensor.Dense
	tm     G.VM
}

// newLGCGraph binds the weights in flat ([]float32 or []float64) to a new graph.
func newLGCGraph(s lgcShape, dt tensor.Dtype, flat any) (*lgcGraph, error) {
	lg := &lgcGraph{s: s, dt: dt, g: G.NewGraph(), byName: map[string]*G.Node{}, inputs: map[*G.Node]*tensor.Dense{}}
	for _, l := range s.layers() {
		var n *G.Node
		shape := []int{l.cols}
		if l.rows > 0 {
			shape = []int{l.rows, l.cols}
			n = G.NewMatrix(lg.g, dt, G.WithShape(shape...), G.WithName(l.name))
		} else {
			n = G.NewVector(lg.g, dt, G.WithShape(shape...), G.WithName(l.name))
		}
		var t *tensor.Dense
		lo, hi := l.off, l.off+l.size()
		switch f := flat.(type) {
		case []float32:
			t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f[lo:hi:hi]))
		case []float64:
			t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f[lo:hi:hi]))
		default:
			return nil, fmt.Errorf("lgc: weights of type %T", flat)
		}
		if err := G.Let(n, t); err != nil {
			return nil, err
		}
		lg.params = append(lg.params, n)
		lg.byName[l.name] = n
	}
	return lg, nil
}

// input declares a rows x cols input with a buffer of its own.
func (lg *lgcGraph) input(name string, rows, cols int) *G.Node {
	n := G.NewMatrix(lg.g, lg.dt, G.WithShape(rows, cols), G.WithName(name))
	t := tensor.New(tensor.Of(lg.dt), tensor.WithShape(rows, cols))
	if err := G.Let(n, t); err != nil {
		panic(lgcBuildError{err})
	}
	lg.inputs[n] = t
	return n
}

// set writes values (float32, converted for a float64 graph) into an input.
func (lg *lgcGraph) set(n *G.Node, v []float32) {
	switch d := lg.inputs[n].Data().(type) {
	case []float32:
		copy(d, v)
	case []float64:
		for i, x := range v {
			d[i] = float64(x)
		}
	}
}

// setConst writes constants, rounded once to the graph's dtype.
func (lg *lgcGraph) setConst(n *G.Node, v []float64) {
	switch d := lg.inputs[n].Data().(type) {
	case []float32:
		for i, x := range v {
			d[i] = float32(x)
		}
	case []float64:
		copy(d, v)
	}
}

// read copies a node's value (float32 or float64) into out as float32.
func lgcRead(n *G.Node, out []float32) {
	switch d := n.Value().Data().(type) {
	case []float32:
		copy(out, d)
	case []float64:
		for i, x := range d {
			out[i] = float32(x)
		}
	}
}

// scalar is a constant of the graph's dtype.
func (lg *lgcGraph) scalar(x float64) *G.Node {
	if lg.dt == tensor.Float64 {
		return G.NewConstant(x)
	}
	return G.NewConstant(float32(x))
}

type lgcBuildError struct{ err error }

func lgcMust(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(lgcBuildError{err})
	}
	return n
}

// affine is x W + b for the named layer (x a batch of rows).
func (lg *lgcGraph) affine(x *G.Node, w, b string) *G.Node {
	return lgcMust(G.BroadcastAdd(lgcMust(G.Mul(x, lg.byName[w])), lg.byName[b], nil, []byte{0}))
}

func (lg *lgcGraph) leaky(x *G.Node) *G.Node { return lgcMust(G.LeakyRelu(x, lgcLeak)) }

// encode is the encoder on a batch of rows u (B x K): B x L latents.
func (lg *lgcGraph) encode(u *G.Node) *G.Node {
	return lg.affine(lg.leaky(lg.affine(u, "enc.w1", "enc.b1")), "enc.w2", "enc.b2")
}

// decodePS is node n's decoder on the master's latent z (1 x L) and node n's
// innovation vector (1 x K): z Wz + inno Wi + b1, LeakyReLU, then W2, b2 (the
// first layer is one affine map of the concatenation [z, inno]).
func (lg *lgcGraph) decodePS(z, inno *G.Node, n int) *G.Node {
	p := "dec" + strconv.Itoa(n)
	pre := lgcMust(G.Add(lgcMust(G.Mul(z, lg.byName[p+".wz"])), lgcMust(G.Mul(inno, lg.byName[p+".wi"]))))
	h := lg.leaky(lgcMust(G.BroadcastAdd(pre, lg.byName[p+".b1"], nil, []byte{0})))
	return lg.affine(h, p+".w2", p+".b2")
}

// decodeRAR is the shared decoder on a latent (1 x L).
func (lg *lgcGraph) decodeRAR(z *G.Node) *G.Node {
	return lg.affine(lg.leaky(lg.affine(z, "dec.wz", "dec.b1")), "dec.w2", "dec.b2")
}

// mse is the mean of (a - b)^2 over all elements.
func (lg *lgcGraph) mse(a, b *G.Node) *G.Node {
	return lgcMust(G.Mean(lgcMust(G.Square(lgcMust(G.Sub(a, b))))))
}

// build runs f, turning the panics of lgcMust into an error, under the build
// mutex.
func lgcBuild(f func() error) (err error) {
	lgcBuildMu.Lock()
	defer lgcBuildMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(lgcBuildError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("lgc: building the autoencoder: %w", be.err)
		}
	}()
	return f()
}

// lgcTrainGraph is the training loss and its gradient w.r.t. every weight.
//
// PS:  lambda1 sum_n MSE(u_n, dec_n(z_0, inno_n)) + lambda2 sim(Z)
// RAR: lambda1 MSE(mean_n u_n, dec(mean_n z_n))  + lambda2 sim(Z)
//
// with Z = enc(U) (N x L, row n = z_n), z_0 the master's (rank 0's) latent
// and sim(Z) = sum_{i != j} MSE(z_i, z_j) over ordered pairs, computed as
// (2N/L) ||C Z||^2 with the centring matrix C = I - 1/N (the sum over ordered
// pairs of squared distances is 2N times the squared distances to the mean;
// the centred form avoids the cancellation of N sum ||z||^2 - ||sum z||^2
// when the latents agree, which is what the term asks for).
type lgcTrainGraph struct {
	*lgcGraph
	u       *G.Node   // N x K: every node's normalised values
	targets []*G.Node // PS: u_n (1 x K); RAR: one, mean_n u_n
	innos   []*G.Node // PS: inno_n (1 x K)
	loss    *G.Node
	rec     *G.Node // the reconstruction term before lambda1
}

func newLGCTrainGraph(s lgcShape, dt tensor.Dtype, flat any, lambda1, lambda2 float64) (*lgcTrainGraph, error) {
	var tg *lgcTrainGraph
	err := lgcBuild(func() error {
		lg, err := newLGCGraph(s, dt, flat)
		if err != nil {
			return err
		}
		tg = &lgcTrainGraph{lgcGraph: lg}
		n := s.nodes
		tg.u = lg.input("u", n, s.k)
		z := lg.encode(tg.u)
		// Row selectors as constant inputs: the master's row, the mean row,
		// the centring matrix.
		pick := lg.input("pick0", 1, n)
		mean := lg.input("mean", 1, n)
		centre := lg.input("centre", n, n)
		sel, avg, cm := make([]float64, n), make([]float64, n), make([]float64, n*n)
		sel[0] = 1
		for i := range n {
			avg[i] = 1 / float64(n)
			for j := range n {
				cm[i*n+j] = -1 / float64(n)
			}
			cm[i*n+i] += 1
		}
		lg.setConst(pick, sel)
		lg.setConst(mean, avg)
		lg.setConst(centre, cm)
		if s.rar {
			t := lg.input("target", 1, s.k)
			tg.targets = []*G.Node{t}
			tg.rec = lg.mse(lg.decodeRAR(lgcMust(G.Mul(mean, z))), t)
		} else {
			z0 := lgcMust(G.Mul(pick, z))
			for i := range n {
				t := lg.input("target"+strconv.Itoa(i), 1, s.k)
				in := lg.input("inno"+strconv.Itoa(i), 1, s.k)
				tg.targets, tg.innos = append(tg.targets, t), append(tg.innos, in)
				term := lg.mse(lg.decodePS(z0, in, i), t)
				if tg.rec == nil {
					tg.rec = term
				} else {
					tg.rec = lgcMust(G.Add(tg.rec, term))
				}
			}
		}
		zc := lgcMust(G.Mul(centre, z))
		sim := lgcMust(G.Mul(lgcMust(G.Sum(lgcMust(G.Square(zc)))), lg.scalar(2*float64(n)/float64(s.latent))))
		tg.loss = lgcMust(G.Add(lgcMust(G.Mul(tg.rec, lg.scalar(lambda1))), lgcMust(G.Mul(sim, lg.scalar(lambda2)))))
		if _, err := G.Grad(tg.loss, lg.params...); err != nil {
			return err
		}
		tg.tm = G.NewTapeMachine(lg.g, G.BindDualValues(lg.params...))
		return nil
	})
	return tg, err
}

// run computes the loss and the reconstruction term for rows u (N rows of
// K normalised values) and, for PS, innovation vectors inno, and writes the
// gradient into grad ([]float32 or []float64, laid out like the weights),
// zeroing Gorgonia's copy (gradients accumulate across runs).
func (tg *lgcTrainGraph) run(u, inno [][]float32, grad any) (loss, rec float64, err error) {
	s := tg.s
	flatU := make([]float32, 0, s.nodes*s.k)
	for _, r := range u {
		flatU = append(flatU, r...)
	}
	tg.set(tg.u, flatU)
	if s.rar {
		// The target is mean_n u_n, summed in rank order.
		m := make([]float32, s.k)
		for _, r := range u {
			for i, v := range r {
				m[i] += v
			}
		}
		for i := range m {
			m[i] /= float32(s.nodes)
		}
		tg.set(tg.targets[0], m)
	} else {
		for n := range s.nodes {
			tg.set(tg.targets[n], u[n])
			tg.set(tg.innos[n], inno[n])
		}
	}
	defer tg.tm.Reset()
	if err := tg.tm.RunAll(); err != nil {
		return 0, 0, fmt.Errorf("lgc: training step: %w", err)
	}
	for i, l := range s.layers() {
		gv, err := tg.params[i].Grad()
		if err != nil {
			return 0, 0, fmt.Errorf("lgc: gradient of %s: %w", l.name, err)
		}
		switch d := gv.Data().(type) {
		case []float32:
			copy(grad.([]float32)[l.off:l.off+l.size()], d)
			clear(d)
		case []float64:
			copy(grad.([]float64)[l.off:l.off+l.size()], d)
			clear(d)
		}
	}
	return lgcScalar(tg.loss.Value()), lgcScalar(tg.rec.Value()), nil
}

func lgcScalar(v G.Value) float64 {
	switch x := v.Data().(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

// lgcInferGraph is the stage-3 forward passes: the encoder on one row, and
// the decoder(s) (PS: every node's, on the master's latent and the node's
// innovation; RAR: the shared one on the mean latent).
type lgcInferGraph struct {
	*lgcGraph
	u, z     *G.Node   // encoder: 1 x K in, 1 x L out
	zin      *G.Node   // decoders' latent input, 1 x L
	innos    []*G.Node // PS: 1 x K each
	decoded  []*G.Node // PS: one per node; RAR: one
	enc, dec G.VM
	encG     *lgcGraph
}

func newLGCInferGraph(s lgcShape, flat []float32) (*lgcInferGraph, error) {
	ig := &lgcInferGraph{}
	err := lgcBuild(func() error {
		eg, err := newLGCGraph(s, tensor.Float32, flat)
		if err != nil {
			return err
		}
		ig.encG = eg
		ig.u = eg.input("u", 1, s.k)
		ig.z = eg.encode(ig.u)
		ig.enc = G.NewTapeMachine(eg.g)
		dg, err := newLGCGraph(s, tensor.Float32, flat)
		if err != nil {
			return err
		}
		ig.lgcGraph = dg
		ig.zin = dg.input("z", 1, s.latent)
		if s.rar {
			ig.decoded = []*G.Node{dg.decodeRAR(ig.zin)}
		} else {
			for n := range s.nodes {
				in := dg.input("inno"+strconv.Itoa(n), 1, s.k)
				ig.innos = append(ig.innos, in)
				ig.decoded = append(ig.decoded, dg.decodePS(ig.zin, in, n))
			}
		}
		ig.dec = G.NewTapeMachine(dg.g)
		return nil
	})
	return ig, err
}

// encode writes enc(u) into z.
func (ig *lgcInferGraph) encode(u, z []float32) error {
	ig.encG.set(ig.u, u)
	defer ig.enc.Reset()
	if err := ig.enc.RunAll(); err != nil {
		return fmt.Errorf("lgc: encoder: %w", err)
	}
	lgcRead(ig.z, z)
	return nil
}

// decode writes the decoders' outputs into out (PS: out[n] = dec_n(z,
// inno[n]); RAR: out[0] = dec(z)).
func (ig *lgcInferGraph) decode(z []float32, inno [][]float32, out [][]float32) error {
	ig.set(ig.zin, z)
	for n, in := range ig.innos {
		ig.set(in, inno[n])
	}
	defer ig.dec.Reset()
	if err := ig.dec.RunAll(); err != nil {
		return fmt.Errorf("lgc: decoder: %w", err)
	}
	for n, d := range ig.decoded {
		lgcRead(d, out[n])
	}
	return nil
}

// lgcNet is one worker's replica of the autoencoder: its weights, their
// optimizer and its graphs.
type lgcNet struct {
	s       lgcShape
	w, grad []float32
	m, v    []float32 // Adam's moments; nil with SGD
	lr      float64
	train   *lgcTrainGraph
	infer   *lgcInferGraph

	loss, rec float64 // the last training step's loss and reconstruction term
}

// Adam's constants (Kingma and Ba 2015; PyTorch's defaults).
const (
	lgcBeta1 = 0.9
	lgcBeta2 = 0.999
	lgcEps   = 1e-8
)

func newLGCNet(s lgcShape, cfg LGCConfig, seed int64) (*lgcNet, error) {
	a := &lgcNet{s: s, lr: cfg.LR}
	n := s.weights()
	a.w, a.grad = make([]float32, n), make([]float32, n)
	if cfg.Optimizer == "adam" {
		a.m, a.v = make([]float32, n), make([]float32, n)
	}
	initLGCWeights(s, seed, a.w)
	var err error
	if a.train, err = newLGCTrainGraph(s, tensor.Float32, a.w, cfg.Lambda1, cfg.Lambda2); err != nil {
		return nil, err
	}
	if a.infer, err = newLGCInferGraph(s, a.w); err != nil {
		return nil, err
	}
	return a, nil
}

// step is one optimizer step on the training loss of rows u and innovations
// inno; t counts the steps from 1 (Adam's bias correction). The arithmetic is
// float64 per weight, stored as float32: the same on every worker.
func (a *lgcNet) step(u, inno [][]float32, t int) error {
	var err error
	if a.loss, a.rec, err = a.train.run(u, inno, a.grad); err != nil {
		return err
	}
	if a.m == nil {
		for i, g := range a.grad {
			a.w[i] = float32(float64(a.w[i]) - a.lr*float64(g))
		}
		return nil
	}
	c1 := 1 - math.Pow(lgcBeta1, float64(t))
	c2 := 1 - math.Pow(lgcBeta2, float64(t))
	for i, g := range a.grad {
		g := float64(g)
		m := lgcBeta1*float64(a.m[i]) + (1-lgcBeta1)*g
		v := lgcBeta2*float64(a.v[i]) + (1-lgcBeta2)*g*g
		a.m[i], a.v[i] = float32(m), float32(v)
		a.w[i] = float32(float64(a.w[i]) - a.lr*(m/c1)/(math.Sqrt(v/c2)+lgcEps))
	}
	return nil
}
