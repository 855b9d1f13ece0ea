package models

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

// A Stage is a contiguous part of a CIFAR ResNet built as a graph of its own,
// for layer-parallel training (internal/layerpar): stage k of K maps its input
// (the image for the first stage, a feature map for the others) to a feature
// map, or, for the last stage, to logits. Stage k holds the stem when k = 0,
// blocks [lo, hi) of the network's basic blocks, and the head (global average
// pooling and the linear classifier) when k = K-1. Its parameters and
// BatchNorm buffers carry the names the whole network gives them, so that they
// can be copied to and from a Net of the same model by name.
//
// An inner stage's training graph computes 0.5/B * sum ||F(x) - T||^2 for a
// target T fed with the batch; the last stage's the mean cross-entropy of its
// logits. Step returns that loss and leaves the parameters' gradients in Grad,
// the stage's output F(x) in Output and, for every stage but the first, the
// gradient of the loss with respect to the input in InputGrad. BatchNorm runs
// on batch statistics, as in a Net's training graph.
type Stage struct {
	cfg       Config
	index     int
	count     int
	batch     int
	lo, hi    int   // blocks [lo, hi)
	inShape   []int // per example
	outShape  []int // per example; (Classes) for the last stage
	b         *builder
	x, t, y   *G.Node
	out, loss *G.Node
	xT, tT    *tensor.Dense
	yT        *tensor.Dense
	labels    []float32
	tm        G.VM
	run       func() error
	gradNodes G.Nodes // parameters' gradients, then the input's (stages > 0)
	flat      []float32
	grad      []float32
	offsets   []int
	params    []optim.Param
	buffers   []Buffer
	output    []float32
	inGrad    []float32
	classes   int
}

// ResNetBlock is one basic block of a CIFAR ResNet as a stage split sees it.
type ResNetBlock struct {
	Name           string
	Cin, Cout      int
	Stride         int
	OutH, OutW     int // output spatial size for the input the split was made for
	TrainFLOPs     int64
	ForwardProduct int64 // forward FLOPs of its products
}

// ResNetBlocks lists the basic blocks of the named CIFAR ResNet (resnet20,
// resnet32, resnet56) on the given input, in order.
func ResNetBlocks(name string, in Input) ([]ResNetBlock, error) {
	n, ok := resnetBlocks[name]
	if !ok {
		return nil, fmt.Errorf("model.name: %q: layer-parallel stages exist for the CIFAR ResNets only (resnet20, resnet32, resnet56)", name)
	}
	if len(in.Shape) != 3 {
		return nil, fmt.Errorf("model %s: needs images shaped (C, H, W), got %v", name, in.Shape)
	}
	h, w := in.Shape[1], in.Shape[2]
	var out []ResNetBlock
	cin := 16
	for s, cout := range []int{16, 32, 64} {
		for i := range n {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			h, w = (h+2-3)/stride+1, (w+2-3)/stride+1
			fl := 2 * int64(h*w) * int64(cin*9) * int64(cout)  // conv1
			fl += 2 * int64(h*w) * int64(cout*9) * int64(cout) // conv2
			if stride != 1 || cin != cout {
				fl += 2 * int64(h*w) * int64(cin) * int64(cout)
			}
			out = append(out, ResNetBlock{Name: fmt.Sprintf("s%db%d", s+1, i+1), Cin: cin, Cout: cout, Stride: stride,
				OutH: h, OutW: w, ForwardProduct: fl, TrainFLOPs: 3 * fl})
			cin = cout
		}
	}
	return out, nil
}

// StageBlocks is the split of nb blocks into K stages: stage k holds blocks
// [k*nb/K, (k+1)*nb/K). For ResNet-20 (9 blocks) K = 3 cuts at the
// resolution changes, K = 2 after the fourth block, K = 4 after blocks 2, 4, 6.
func StageBlocks(nb, K int) (lo, hi []int, err error) {
	if K < 1 || K > nb {
		return nil, nil, fmt.Errorf("stages: %d: must be in [1, %d] (one basic block at least per stage)", K, nb)
	}
	for k := range K {
		lo = append(lo, k*nb/K)
		hi = append(hi, (k+1)*nb/K)
	}
	return lo, hi, nil
}

// NewResNetStage builds stage k of K of the CIFAR ResNet cfg.Name for the
// input in and the given batch. Its parameters start at zero: copy them from a
// Net with SetFrom.
func NewResNetStage(cfg Config, in Input, k, K, batch int, opts ...Option) (st *Stage, err error) {
	blocks, err := ResNetBlocks(cfg.Name, in)
	if err != nil {
		return nil, err
	}
	los, his, err := StageBlocks(len(blocks), K)
	if err != nil {
		return nil, err
	}
	if k < 0 || k >= K {
		return nil, fmt.Errorf("stage %d of %d does not exist", k, K)
	}
	if batch < 1 {
		return nil, fmt.Errorf("models: batch size %d, expected >= 1", batch)
	}
	cfg = withDefaults(cfg)
	st = &Stage{cfg: cfg, index: k, count: K, batch: batch, lo: los[k], hi: his[k], classes: in.Classes}
	if k == 0 {
		st.inShape = append([]int(nil), in.Shape...)
	} else {
		p := blocks[los[k]-1]
		st.inShape = []int{p.Cout, p.OutH, p.OutW}
	}
	if k == K-1 {
		st.outShape = []int{in.Classes}
	} else {
		p := blocks[his[k]-1]
		st.outShape = []int{p.Cout, p.OutH, p.OutW}
	}
	net := &Net{cfg: cfg}
	for _, o := range opts {
		o(net)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	blasOnce.Do(useBLAS)
	if err := st.build(blocks, in, net.opWorkers); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *Stage) build(blocks []ResNetBlock, in Input, opWorkers int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(buildError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("model %s stage %d: %w", st.cfg.Name, st.index, be.err)
		}
	}()
	b := newBuilder(st.cfg, tensor.Float32, true, opWorkers)
	st.b = b
	xs := append([]int{st.batch}, st.inShape...)
	if st.index == 0 {
		st.x = b.input("x", xs...)
	} else {
		// Not declared as an input: the fast ops compute its gradient.
		st.x = G.NewTensor(b.g, tensor.Float32, len(xs), G.WithShape(xs...), G.WithName("u_in"))
	}
	h := st.x
	if st.index == 0 {
		h = b.batchNormReLU(b.conv2d(h, in.Shape[0], 16, 3, 1, 1, false, "conv1"), 16, "bn1")
	}
	for _, blk := range blocks[st.lo:st.hi] {
		h = b.basicBlock(h, blk.Cin, blk.Cout, blk.Stride, blk.Name)
	}
	last := st.index == st.count-1
	if last {
		h = b.linear(b.globalAvgPool(h), 64, in.Classes, "fc")
	}
	st.out = h
	st.xT = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(xs...))
	if err := G.Let(st.x, st.xT); err != nil {
		return err
	}
	if last {
		st.y = b.input("y", st.batch, in.Classes)
		st.yT = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(st.batch, in.Classes))
		if err := G.Let(st.y, st.yT); err != nil {
			return err
		}
		if b.fast() {
			st.loss = must(ops.SoftmaxCrossEntropy(b.ws, h, st.y))
		} else {
			logp := must(G.LogSoftMax(h))
			st.loss = must(G.Neg(must(G.Mean(must(G.Sum(must(G.HadamardProd(logp, st.y)), 1))))))
		}
	} else {
		ts := append([]int{st.batch}, st.outShape...)
		st.t = b.input("target", ts...)
		st.tT = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(ts...))
		if err := G.Let(st.t, st.tT); err != nil {
			return err
		}
		rows := st.batch
		cols := numel(st.outShape)
		// T - F, not F - T: Gorgonia's elementwise ops may write their
		// result over their first operand, and F is the buffer of a fast op
		// whose backward pass reads it again; the target is refilled before
		// every run.
		d := must(G.Sub(must(G.Reshape(st.t, tensor.Shape{rows, cols})), must(G.Reshape(h, tensor.Shape{rows, cols}))))
		half := G.NewConstant(float32(0.5 / float64(st.batch)))
		dv := must(G.Reshape(d, tensor.Shape{rows * cols}))
		st.loss = must(G.Mul(must(G.Mul(dv, dv)), half))
	}
	size := b.size()
	st.flat, st.grad = make([]float32, size), make([]float32, size)
	if st.offsets, err = b.bind(st.flat); err != nil {
		return err
	}
	wrt := make(G.Nodes, 0, len(b.params)+1)
	for _, p := range b.params {
		wrt = append(wrt, p.node)
	}
	if st.index > 0 {
		wrt = append(wrt, st.x)
	}
	grads, err := G.Grad(st.loss, wrt...)
	if err != nil {
		return fmt.Errorf("stage gradient: %w", err)
	}
	st.gradNodes = grads
	prog := b.g.ExactSubgraphRoots(append(G.Nodes{st.loss, st.out}, grads...)...)
	if b.fast() {
		st.tm = G.NewTapeMachine(prog, G.WithEngine(ops.Engine(b.ws)))
	} else {
		st.tm = G.NewTapeMachine(prog)
	}
	st.run = st.tm.RunAll
	if d := newDirectTape(st.tm); d != nil {
		st.run = d.RunAll
	}
	for _, op := range b.bns {
		if err := op.Reset(); err != nil {
			return err
		}
	}
	for i, p := range b.params {
		sz := numel(p.shape)
		o := st.offsets[i]
		st.params = append(st.params, optim.Param{Name: p.name, Shape: p.shape, Kind: p.kind, NoDecay: p.noDecay,
			Value: st.flat[o : o+sz : o+sz], Grad: st.grad[o : o+sz : o+sz]})
	}
	for i, op := range b.bns {
		mean, variance := op.Stats()
		name := b.bnNames[i]
		st.buffers = append(st.buffers,
			Buffer{Name: name + ".running_mean", Value: mean.Data().([]float32)},
			Buffer{Name: name + ".running_var", Value: variance.Data().([]float32)})
	}
	st.output = make([]float32, st.batch*numel(st.outShape))
	if st.index > 0 {
		st.inGrad = make([]float32, st.batch*numel(st.inShape))
	}
	return nil
}

// Index is the stage's position k (0-based) and Count the number of stages K.
func (st *Stage) Index() int { return st.index }

// Count is the number of stages of the split.
func (st *Stage) Count() int { return st.count }

// Batch is the batch size the graph was built for.
func (st *Stage) Batch() int { return st.batch }

// Blocks are the basic blocks [lo, hi) the stage holds.
func (st *Stage) Blocks() (lo, hi int) { return st.lo, st.hi }

// InShape is one example's input shape; OutShape one example's output shape
// ((Classes) for the last stage).
func (st *Stage) InShape() []int { return st.inShape }

// OutShape is one example's output shape.
func (st *Stage) OutShape() []int { return st.outShape }

// Params are the stage's learnable tensors, as views into one flat buffer.
func (st *Stage) Params() []optim.Param { return st.params }

// Flat is the stage's flat parameter buffer.
func (st *Stage) Flat() []float32 { return st.flat }

// Grad is the stage's flat gradient buffer, written by Step.
func (st *Stage) Grad() []float32 { return st.grad }

// Buffers are the stage's BatchNorm running statistics, aliased.
func (st *Stage) Buffers() []Buffer { return st.buffers }

// TrainFLOPs is the FLOPs of one training step of the stage at its batch.
func (st *Stage) TrainFLOPs() int64 { return 3 * st.b.flops }

// Output is F(x) of the last Step (the logits for the last stage).
func (st *Stage) Output() []float32 { return st.output }

// InputGrad is the gradient of the last Step's loss with respect to the
// stage's input; nil for the first stage, whose input is the data.
func (st *Stage) InputGrad() []float32 { return st.inGrad }

// Step runs forward and backward on one batch: x is the input (Batch examples
// of InShape), target the inner stage's target (Batch examples of OutShape;
// nil for the last stage), y the last stage's labels (nil for inner stages).
// It returns the loss: 0.5/B sum ||F(x) - target||^2 or the mean
// cross-entropy.
func (st *Stage) Step(x, target []float32, y []int32) (float64, error) {
	if len(x) != st.xT.Size() {
		return 0, fmt.Errorf("stage %d: input has %d values, expected %d", st.index, len(x), st.xT.Size())
	}
	copy(st.xT.Data().([]float32), x)
	if st.t != nil {
		if len(target) != st.tT.Size() {
			return 0, fmt.Errorf("stage %d: target has %d values, expected %d", st.index, len(target), st.tT.Size())
		}
		copy(st.tT.Data().([]float32), target)
	} else {
		if len(y) != st.batch {
			return 0, fmt.Errorf("stage %d: %d labels, expected %d", st.index, len(y), st.batch)
		}
		if st.labels == nil {
			st.labels = make([]float32, len(y))
		}
		for i, v := range y {
			st.labels[i] = float32(v)
		}
		if err := targets(st.yT, st.labels, st.classes, st.cfg.LabelSmoothing); err != nil {
			return 0, fmt.Errorf("stage %d: labels: %w", st.index, err)
		}
	}
	defer st.tm.Reset()
	if err := st.run(); err != nil {
		return 0, fmt.Errorf("model %s stage %d: step: %w", st.cfg.Name, st.index, err)
	}
	for i, p := range st.b.params {
		gv := st.gradNodes[i].Value()
		if gv == nil {
			return 0, fmt.Errorf("stage %d: gradient of %s not computed", st.index, p.name)
		}
		o, sz := st.offsets[i], numel(p.shape)
		copy(st.grad[o:o+sz], gv.Data().([]float32))
	}
	if st.index > 0 {
		gv := st.gradNodes[len(st.gradNodes)-1].Value()
		if gv == nil {
			return 0, fmt.Errorf("stage %d: input gradient not computed", st.index)
		}
		copy(st.inGrad, gv.Data().([]float32))
	}
	copy(st.output, st.out.Value().Data().([]float32))
	loss := scalar(st.loss.Value())
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, fmt.Errorf("model %s stage %d: loss is %v", st.cfg.Name, st.index, loss)
	}
	return loss, nil
}

// CopyParams copies, by name, the values of every parameter and buffer of
// from that to also has (to's names must all be found in from when strict).
func CopyParams(to, from []optim.Param, strict bool) error {
	return copyNamed(to, from, strict, "parameter", func(p optim.Param) (string, []float32) { return p.Name, p.Value })
}

// CopyBuffers copies BatchNorm buffers by name, as CopyParams does.
func CopyBuffers(to, from []Buffer, strict bool) error {
	return copyNamed(to, from, strict, "buffer", func(b Buffer) (string, []float32) { return b.Name, b.Value })
}

func copyNamed[T any](to, from []T, strict bool, kind string, named func(T) (string, []float32)) error {
	idx := make(map[string][]float32, len(from))
	for _, f := range from {
		name, v := named(f)
		idx[name] = v
	}
	for _, t := range to {
		name, v := named(t)
		q, ok := idx[name]
		if !ok {
			if strict {
				return fmt.Errorf("%s %s: not found", kind, name)
			}
			continue
		}
		if len(q) != len(v) {
			return fmt.Errorf("%s %s: %d values, expected %d", kind, name, len(q), len(v))
		}
		copy(v, q)
	}
	return nil
}
