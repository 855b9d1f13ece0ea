package models

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gradwire/gradwire/models/ops"
	"github.com/gradwire/gradwire/optim"
)

var blasOnce sync.Once

// Net is a model built for a fixed batch size: a training graph (forward and
// backward, BatchNorm on batch statistics) and a forward-only evaluation graph
// (BatchNorm on running statistics). Both graphs read the parameters from one flat
// buffer; the training graph's gradients are read out into one flat gradient
// buffer after every step. A Net is used by one goroutine at a time.
type Net struct {
	cfg       Config
	in        Input
	batch     int
	evalBatch int
	dt        tensor.Dtype
	tokens    bool // input is token ids, fed to the graph as one-hot rows
	opWorkers int  // goroutines each fast op splits its work over
	// evalOpWorkers is the evaluation graph's; < 1 means opWorkers.
	evalOpWorkers int

	train, eval *graph
	tm, em      G.VM
	// run and runEval execute tm and em: on the caller's goroutine where
	// possible (see directTape), else through RunAll.
	run, runEval func() error
	// gradNodes are the parameters' gradient nodes, whose values readGrads
	// reads after a step; nil where the machine binds dual values (model.ops
	// gorgonia), whose gradients readGrads reads from the parameters.
	gradNodes G.Nodes

	flat, grad any // []float32 or []float64 (model.precision float64, gradient checks)
	// With model.precision float64: the float32 parameters the optimizer
	// updates and the float32 gradient it reads; Step converts master into
	// flat. Nil otherwise.
	master, masterGrad []float32
	offsets            []int
	entry              entry
	// fused is the training graph over several worker batches (StepFused),
	// built on first use; nil until then.
	fused   *fusedTape
	grouped *groupedTape // StepGrouped's graph, built on first use
	params  []optim.Param
	buffers []Buffer
}

// Buffer is non-learnable model state that a checkpoint must keep (BatchNorm
// running statistics); Value aliases the live state.
type Buffer struct {
	Name  string
	Value []float32
}

// graph is one built Gorgonia graph with its input and output nodes.
type graph struct {
	b         *builder
	x, y      *G.Node // y is nil on the evaluation graph
	logits    *G.Node
	loss      *G.Node
	xT, yT    *tensor.Dense
	labels    []float32 // scratch: labels as float32 ids for oneHot
	classes   int
	rowsPerEx int // logits rows per example (YLen)
}

// Option is a setting of New that leaves the model's maths unchanged.
type Option func(*Net)

// WithOpWorkers sets how many goroutines each fast op splits its work (samples
// or channels) over; n < 1, the default, means runtime.GOMAXPROCS(0). A trainer
// that runs R replicas in parallel passes GOMAXPROCS/R, so that the replicas do
// not oversubscribe the cores. Results do not depend on it: every reduction
// runs in an order fixed by the shapes alone.
func WithOpWorkers(n int) Option {
	return func(net *Net) { net.opWorkers = n }
}

// WithEvalOpWorkers sets how many goroutines each fast op of the evaluation
// graph (Predict) splits its work over; n < 1, the default, means the training
// graph's (WithOpWorkers). A trainer whose replicas train in parallel but
// evaluate on one of them while the others wait passes GOMAXPROCS, so that
// evaluation uses every core. Results do not depend on it.
func WithEvalOpWorkers(n int) Option {
	return func(net *Net) { net.evalOpWorkers = n }
}

// OpWorkers is the number of goroutines each of the Net's fast ops uses.
func (n *Net) OpWorkers() int { return n.train.b.ws.Workers() }

// EvalOpWorkers is the number of goroutines each fast op of the evaluation
// graph uses.
func (n *Net) EvalOpWorkers() int { return n.eval.b.ws.Workers() }

// New builds the named model for the given input, training batch and evaluation
// batch (0 = same as batch), with parameters initialised from seed.
func New(cfg Config, in Input, batch, evalBatch int, seed int64, opts ...Option) (*Net, error) {
	switch cfg.Precision {
	case "", PrecisionFloat32:
		return newNet(cfg, in, batch, evalBatch, seed, tensor.Float32, opts)
	case PrecisionFloat64:
		return newNet(cfg, in, batch, evalBatch, seed, tensor.Float64, opts)
	}
	return nil, fmt.Errorf("model.precision: %q: must be one of %s", cfg.Precision, strings.Join(PrecisionNames(), ", "))
}

// useMaster puts float32 parameters in front of a float64 graph
// (model.precision float64): the initial values are the float32 model's
// (drawn in float64 and rounded, as its initialiser does), and from then on
// master is the source of truth.
func (n *Net) useMaster() error {
	if len(n.train.b.bns) > 0 {
		return fmt.Errorf("model.precision: float64: model %s has BatchNorm, whose running statistics are float32 only (expected a model without BatchNorm, or model.precision float32)", n.cfg.Name)
	}
	flat := n.flat.([]float64)
	n.master, n.masterGrad = make([]float32, len(flat)), make([]float32, len(flat))
	for i, v := range flat {
		n.master[i] = float32(v)
	}
	return nil
}

// syncMaster copies the float32 parameters into the float64 graph's buffer.
func (n *Net) syncMaster() {
	if n.master == nil {
		return
	}
	flat := n.flat.([]float64)
	for i, v := range n.master {
		flat[i] = float64(v)
	}
}

func newNet(cfg Config, in Input, batch, evalBatch int, seed int64, dt tensor.Dtype, opts []Option) (net *Net, err error) {
	e, ok := registry[cfg.Name]
	if !ok {
		return nil, fmt.Errorf("model.name: unknown model %q (valid: %v)", cfg.Name, Names())
	}
	if batch < 1 {
		return nil, fmt.Errorf("models: batch size %d, expected >= 1", batch)
	}
	if evalBatch == 0 {
		evalBatch = batch
	}
	if cfg.Ops != "" && !slices.Contains(OpsNames(), cfg.Ops) {
		return nil, fmt.Errorf("model.ops: %q: must be one of %s", cfg.Ops, strings.Join(OpsNames(), ", "))
	}
	if err := e.accepts(cfg, in); err != nil {
		return nil, fmt.Errorf("model %s: %w", cfg.Name, err)
	}
	cfg = withDefaults(cfg)
	n := &Net{cfg: cfg, in: in, batch: batch, evalBatch: evalBatch, dt: dt, tokens: e.tokens, entry: e}
	for _, o := range opts {
		o(n)
	}

	buildMu.Lock()
	defer buildMu.Unlock()
	blasOnce.Do(useBLAS)
	if n.train, err = n.build(e, batch, true); err != nil {
		return nil, err
	}
	if n.eval, err = n.build(e, evalBatch, false); err != nil {
		return nil, err
	}
	size := n.train.b.size()
	switch dt {
	case tensor.Float32:
		n.flat, n.grad = make([]float32, size), make([]float32, size)
	case tensor.Float64:
		n.flat, n.grad = make([]float64, size), make([]float64, size)
	default:
		return nil, fmt.Errorf("models: unsupported dtype %v", dt)
	}
	if n.offsets, err = n.train.b.bind(n.flat); err != nil {
		return nil, err
	}
	if _, err = n.eval.b.bind(n.flat); err != nil {
		return nil, err
	}
	n.train.b.initialise(n.flat, n.offsets, seed)
	// Gradient checks build float64 nets without a precision: no master.
	if dt == tensor.Float64 && cfg.Precision == PrecisionFloat64 {
		if err := n.useMaster(); err != nil {
			return nil, err
		}
	}

	learnables := make(G.Nodes, len(n.train.b.params))
	for i, p := range n.train.b.params {
		learnables[i] = p.node
	}
	grads, train, err := n.gradients(n.train)
	if err != nil {
		return nil, err
	}
	if n.train.b.fast() {
		// The gradients are read from their nodes: with dual values the
		// machine would also add each one into a buffer of its own (one
		// single-threaded pass over all parameters per step) that readGrads
		// would then have to copy out and clear.
		// The machine's own tensors (the sums of the gradients of nodes
		// with several consumers) get the fast ops' engine: see ops.Engine.
		n.gradNodes = grads
		n.tm = G.NewTapeMachine(train, G.WithEngine(ops.Engine(n.train.b.ws)))
		n.gradsInPlace(n.train, n.gradNodes)
	} else {
		n.tm = G.NewTapeMachine(train, G.BindDualValues(learnables...))
	}
	n.em = G.NewTapeMachine(n.eval.b.g)
	n.run, n.runEval = n.tm.RunAll, n.em.RunAll
	if d := newDirectTape(n.tm); d != nil && n.train.b.fast() {
		n.run = d.RunAll
	}
	if d := newDirectTape(n.em); d != nil {
		n.runEval = d.RunAll
	}
	// NewTapeMachine switches every BatchNorm op to training (Gorgonia's op also
	// resets its running statistics); start them all at mean 0, variance 1. The
	// evaluation graph's ops must use running statistics, copied in from the
	// training graph before each Predict.
	for _, op := range n.train.b.bns {
		if err := op.Reset(); err != nil {
			return nil, err
		}
	}
	for _, op := range n.eval.b.bns {
		if err := op.SetTraining(false); err != nil {
			return nil, err
		}
	}
	n.makeViews()
	return n, nil
}

// build constructs one graph; Gorgonia errors inside model code arrive as panics.
func (n *Net) build(e entry, batch int, training bool) (g *graph, err error) {
	return n.buildGroups(e, batch, training, 1)
}

// buildGroups is build with the fast ops computing per-group parameter
// gradients for groups groups of batch/groups examples (ops.Workspace.SetGroups).
func (n *Net) buildGroups(e entry, batch int, training bool, groups int) (g *graph, err error) {
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(buildError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("model %s: %w", n.cfg.Name, be.err)
		}
	}()
	workers := n.opWorkers
	if !training && n.evalOpWorkers >= 1 {
		workers = n.evalOpWorkers
	}
	b := newBuilder(n.cfg, n.dt, training, workers)
	b.ws.SetGroups(groups)
	g = &graph{b: b, classes: n.in.Classes, rowsPerEx: n.in.YLen}
	if n.tokens {
		g.x = b.input("x", batch*n.in.YLen, n.in.Classes)
	} else {
		g.x = b.input("x", append([]int{batch}, n.in.Shape...)...)
	}
	g.logits = e.build(b, g.x, n.in, batch)
	rows := batch * n.in.YLen
	if s := g.logits.Shape(); len(s) != 2 || s[0] != rows || s[1] != n.in.Classes {
		return nil, fmt.Errorf("model %s: logits shape %v, expected (%d, %d)", n.cfg.Name, s, rows, n.in.Classes)
	}
	g.xT = tensor.New(tensor.Of(n.dt), tensor.WithShape(g.x.Shape()...))
	if err := G.Let(g.x, g.xT); err != nil {
		return nil, err
	}
	if training {
		g.y = b.input("y", rows, n.in.Classes)
		g.yT = tensor.New(tensor.Of(n.dt), tensor.WithShape(rows, n.in.Classes))
		if err := G.Let(g.y, g.yT); err != nil {
			return nil, err
		}
		// Mean cross-entropy over rows: -mean_r sum_c y[r,c] * log softmax(logits)[r,c],
		// one op on the fast path.
		if b.fast() {
			g.loss = must(ops.SoftmaxCrossEntropy(b.ws, g.logits, g.y))
		} else {
			logp := must(G.LogSoftMax(g.logits))
			g.loss = must(G.Neg(must(G.Mean(must(G.Sum(must(G.HadamardProd(logp, g.y)), 1))))))
		}
	}
	return g, nil
}

// makeViews creates the per-tensor parameter views and the BatchNorm buffers.
func (n *Net) makeViews() {
	flat32, _ := n.flat.([]float32)
	grad32, _ := n.grad.([]float32)
	if n.master != nil {
		flat32, grad32 = n.master, n.masterGrad
	}
	for i, p := range n.train.b.params {
		sz := numel(p.shape)
		op := optim.Param{Name: p.name, Shape: p.shape, Kind: p.kind, NoDecay: p.noDecay}
		if flat32 != nil {
			o := n.offsets[i]
			op.Value, op.Grad = flat32[o:o+sz:o+sz], grad32[o:o+sz:o+sz]
		}
		n.params = append(n.params, op)
	}
	if n.dt != tensor.Float32 {
		return
	}
	for i, op := range n.train.b.bns {
		mean, variance := op.Stats()
		name := n.train.b.bnNames[i]
		n.buffers = append(n.buffers,
			Buffer{Name: name + ".running_mean", Value: mean.Data().([]float32)},
			Buffer{Name: name + ".running_var", Value: variance.Data().([]float32)})
	}
}

// Name is the model's registry name.
func (n *Net) Name() string { return n.cfg.Name }

// Batch is the training batch size the graph was built for.
func (n *Net) Batch() int { return n.batch }

// EvalBatch is the evaluation batch size.
func (n *Net) EvalBatch() int { return n.evalBatch }

// Input is what the model reads per example.
func (n *Net) Input() Input { return n.in }

// Params are the learnable tensors in a stable order, as views into Flat and Grad.
func (n *Net) Params() []optim.Param { return n.params }

// Flat is the flat float32 parameter buffer.
func (n *Net) Flat() []float32 {
	if n.master != nil {
		return n.master
	}
	return n.flat.([]float32)
}

// Grad is the flat float32 gradient buffer the optimizer reads: written by
// Step, or with model.precision float64 by whoever reduces Grad64 (the engine).
func (n *Net) Grad() []float32 {
	if n.master != nil {
		return n.masterGrad
	}
	return n.grad.([]float32)
}

// Grad64 is the float64 gradient Step writes with model.precision float64;
// nil for a float32 model.
func (n *Net) Grad64() []float64 {
	if n.master == nil {
		return nil
	}
	return n.grad.([]float64)
}

// Buffers is the non-learnable state (BatchNorm running statistics), aliased.
func (n *Net) Buffers() []Buffer { return n.buffers }

// NumParams is the number of learnable values.
func (n *Net) NumParams() int { return n.train.b.size() }

// Step runs forward and backward on one batch: x holds Batch examples
// (Batch*prod(Input.Shape) values; token ids for a language model), y holds
// Batch*YLen labels. It overwrites Grad with the mean-loss gradient and returns
// the mean loss.
func (n *Net) Step(x []float32, y []int32) (float64, error) {
	n.syncMaster()
	if err := n.setInputs(n.train, x, y); err != nil {
		return 0, err
	}
	defer n.tm.Reset()
	if err := n.run(); err != nil {
		return 0, fmt.Errorf("model %s: training step: %w", n.cfg.Name, err)
	}
	if err := n.readGrads(n.train, n.gradNodes); err != nil {
		return 0, err
	}
	loss := scalar(n.train.loss.Value())
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, fmt.Errorf("model %s: loss is %v", n.cfg.Name, loss)
	}
	return loss, nil
}

// Predict runs the evaluation graph on EvalBatch examples and writes the logits
// (EvalBatch*YLen rows of Classes values) into out.
func (n *Net) Predict(x []float32, out []float32) error {
	if want := n.evalBatch * n.in.YLen * n.in.Classes; len(out) != want {
		return fmt.Errorf("models: logits buffer has %d values, expected %d", len(out), want)
	}
	for i, op := range n.train.b.bns {
		mean, variance := op.Stats()
		if err := n.eval.b.bns[i].SetStats(mean, variance); err != nil {
			return err
		}
	}
	n.syncMaster()
	if err := n.setInputs(n.eval, x, nil); err != nil {
		return err
	}
	defer n.em.Reset()
	if err := n.runEval(); err != nil {
		return fmt.Errorf("model %s: evaluation: %w", n.cfg.Name, err)
	}
	switch v := n.eval.logits.Value().Data().(type) {
	case []float32:
		copy(out, v)
	case []float64:
		for i := range out {
			out[i] = float32(v[i])
		}
	}
	return nil
}

// setInputs copies a batch into the graph's input tensors (one-hot for tokens and labels).
func (n *Net) setInputs(g *graph, x []float32, y []int32) error {
	rows := g.x.Shape()[0]
	if n.tokens {
		if len(x) != rows {
			return fmt.Errorf("models: input has %d token ids, expected %d", len(x), rows)
		}
		if err := oneHot(g.xT, x, n.in.Classes); err != nil {
			return fmt.Errorf("models: input: %w", err)
		}
	} else {
		if len(x) != g.xT.Size() {
			return fmt.Errorf("models: input has %d values, expected %d", len(x), g.xT.Size())
		}
		switch d := g.xT.Data().(type) {
		case []float32:
			copy(d, x)
		case []float64:
			for i, v := range x {
				d[i] = float64(v)
			}
		}
	}
	if g.y == nil {
		return nil
	}
	if want := g.yT.Shape()[0]; len(y) != want {
		return fmt.Errorf("models: %d labels, expected %d", len(y), want)
	}
	if g.labels == nil {
		g.labels = make([]float32, len(y))
	}
	for i, v := range y {
		g.labels[i] = float32(v)
	}
	if err := targets(g.yT, g.labels, n.in.Classes, n.cfg.LabelSmoothing); err != nil {
		return fmt.Errorf("models: labels: %w", err)
	}
	return nil
}

// targets writes the training loss's target rows for class ids: one-hot, or
// with label smoothing e, (1-e)·onehot + e/classes.
func targets(t *tensor.Dense, ids []float32, classes int, smoothing float64) error {
	off := smoothing / float64(classes)
	return fillRows(t, ids, classes, 1-smoothing+off, off)
}

// oneHot writes one-hot rows of t from class ids.
func oneHot(t *tensor.Dense, ids []float32, classes int) error {
	return fillRows(t, ids, classes, 1, 0)
}

// fillRows writes a row of t per class id: on at the id's column, off elsewhere.
func fillRows(t *tensor.Dense, ids []float32, classes int, on, off float64) error {
	switch d := t.Data().(type) {
	case []float32:
		return fillRowsOf(d, ids, classes, float32(on), float32(off))
	case []float64:
		return fillRowsOf(d, ids, classes, on, off)
	}
	return fmt.Errorf("one-hot: unsupported dtype %v", t.Dtype())
}

func fillRowsOf[T float32 | float64](d []T, ids []float32, classes int, on, off T) error {
	for i := range d {
		d[i] = off
	}
	for r, v := range ids {
		c := int(v)
		if c < 0 || c >= classes || float32(c) != v {
			return fmt.Errorf("id %v at row %d is not an integer in [0, %d)", v, r, classes)
		}
		d[r*classes+c] = on
	}
	return nil
}

// gradsInPlace has the ops that compute a parameter's gradient and can write
// it where it is wanted (ops.OutputInto) write it into the parameter's view
// of the flat gradient buffer: readGrads then has nothing to copy for it.
func (n *Net) gradsInPlace(tg *graph, gradNodes G.Nodes) {
	for i, g := range gradNodes {
		op, ok := g.Op().(ops.OutputInto)
		if !ok {
			continue
		}
		o, sz := n.offsets[i], numel(tg.b.params[i].shape)
		switch d := n.grad.(type) {
		case []float32:
			op.WriteInto(d[o : o+sz : o+sz])
		case []float64:
			op.WriteInto(d[o : o+sz : o+sz])
		}
	}
}

// readGrads copies every parameter gradient into the flat gradient buffer:
// from the gradient nodes, or from the dual values, which it then zeroes
// (they accumulate across RunAll calls).
func (n *Net) readGrads(tg *graph, gradNodes G.Nodes) error {
	for i, p := range tg.b.params {
		var gv G.Value
		var err error
		if gradNodes != nil {
			if gv = gradNodes[i].Value(); gv == nil {
				err = fmt.Errorf("not computed")
			}
		} else {
			gv, err = p.node.Grad()
		}
		if err != nil {
			return fmt.Errorf("model %s: gradient of %s: %w", n.cfg.Name, p.name, err)
		}
		o, sz := n.offsets[i], numel(p.shape)
		if gv.Shape().TotalSize() != sz {
			return fmt.Errorf("model %s: gradient of %s has shape %v, expected %v", n.cfg.Name, p.name, gv.Shape(), p.shape)
		}
		switch d := gv.Data().(type) {
		case []float32:
			copyGrad(n.grad.([]float32)[o:o+sz], d, gradNodes == nil)
		case []float64:
			copyGrad(n.grad.([]float64)[o:o+sz], d, gradNodes == nil)
		}
	}
	return nil
}

// copyGrad copies a gradient into dst unless it is already there (written in
// place, see gradsInPlace), and zeroes the source if clearSrc.
func copyGrad[T float32 | float64](dst, src []T, clearSrc bool) {
	if len(src) > 0 && &src[0] == &dst[0] {
		return
	}
	copy(dst, src)
	if clearSrc {
		clear(src)
	}
}

func scalar(v G.Value) float64 {
	switch x := v.Data().(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}
