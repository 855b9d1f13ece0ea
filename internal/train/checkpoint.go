package train

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// checkpoint is everything a resumed run needs to continue exactly: parameters,
// model buffers (BatchNorm running statistics), optimizer state and the position
// in the run. The sampler and augmentation are pure functions of (seed, epoch), so
// the epoch number and the step in it are the whole sampler state. The file
// format is in checkpoint_codec.go.
type checkpoint struct {
	Version      string // gradwire version that wrote it
	Model        string
	Epoch        int     // epochs completed
	GlobalStep   int     // optimizer steps taken
	StepInEpoch  int     // steps of epoch Epoch+1 already taken (0 at an epoch end)
	LossSum      float64 // sum of the training losses of those steps
	EpochSeconds float64 // training seconds spent in that partial epoch
	ParamNames   []string
	Params       []float32
	BufferNames  []string
	Buffers      [][]float32
	// ReplicaBuffers, mid-epoch only, holds every replica's model buffers in
	// BufferNames order: replicas' BatchNorm statistics differ until the
	// epoch-end average. Nil at epoch ends.
	ReplicaBuffers [][][]float32
	Optim          optim.State
	MetricsOffset  int64 // size of metrics.jsonl when the checkpoint was taken
	Elapsed        float64
	Samples        int64
	Workers        []workerState // per logical worker of the run: compressor state and wire accounting
	Epochs         []EpochResult // one per completed epoch; the last holds the test loss at Epoch
	Config         map[string]string
	DataDigest     string // digest of the training and test files
}

// layout is what a checkpoint must hold to fit a run: the model's name, its
// parameter tensors and buffers in order, the number of logical workers and
// the bound on each worker's compressor state. Decoding checks every name,
// count and length against it.
type layout struct {
	model     string
	params    []tensorSize
	buffers   []tensorSize
	workers   int
	numParams int
	paramSize map[string]int
	state     stateBound
}

type tensorSize struct {
	name string
	size int
}

// stateBound bounds one logical worker's compressor state (the exchange's
// State: the compressor's buffers and the error-feedback residual).
type stateBound struct {
	values  int    // in all the worker's buffers
	buffer  int    // in one buffer
	buffers int    // number of buffers
	limits  string // buffer and values, and where they come from, for errors
}

// defaultStateBound holds a compressor to compressorStateFactor x the
// parameter count, each buffer to the parameter count.
func defaultStateBound(numParams, tensors int) stateBound {
	return stateBound{values: compressorStateFactor * numParams, buffer: numParams, buffers: compressorStateFactor * (tensors + 1),
		limits: fmt.Sprintf("%d (the parameter count) and %d in all the worker's compressor state (%d x the parameter count)",
			numParams, compressorStateFactor*numParams, compressorStateFactor)}
}

// layoutOf is the layout of a run of net with the given number of logical
// workers, whose exchanges are built like x (nil: no compressor state beyond
// the default bound; restore's shape check needs none).
func layoutOf(net *models.Net, workers int, x *compress.Exchange) layout {
	var params, buffers []tensorSize
	for _, p := range net.Params() {
		params = append(params, tensorSize{p.Name, len(p.Value)})
	}
	for _, b := range net.Buffers() {
		buffers = append(buffers, tensorSize{b.Name, len(b.Value)})
	}
	l := newLayout(net.Name(), params, buffers, workers)
	l.state = exchangeStateBound(x, l.state)
	return l
}

// exchangeStateBound is the bound on x's state: def, unless its compressor
// declares its own size (compress.StateSizer, which can exceed def: GradiVeQ's
// bases and PCA sums), plus the residual the exchange keeps for it. The
// number of buffers stays def's: a declared size does not change it.
func exchangeStateBound(x *compress.Exchange, def stateBound) stateBound {
	if x == nil || x.Compressor() == nil {
		return def
	}
	sizer, ok := x.Compressor().(compress.StateSizer)
	if !ok {
		return def
	}
	v := sizer.StateValues()
	why := "the compressor's declared state size"
	if x.Compressor().Needs().ErrorFeedback {
		for _, t := range x.CompressedTensors() {
			v += t.Size
		}
		why += " plus its residual"
	}
	return stateBound{values: v, buffer: v, buffers: def.buffers,
		limits: fmt.Sprintf("%d in one buffer and in all the worker's compressor state (%s)", v, why)}
}

func newLayout(model string, params, buffers []tensorSize, workers int) layout {
	l := layout{model: model, params: params, buffers: buffers, workers: workers, paramSize: make(map[string]int, len(params))}
	for _, p := range params {
		l.numParams += p.size
		l.paramSize[p.name] = p.size
	}
	l.state = defaultStateBound(l.numParams, len(params))
	return l
}

// maxFileSize bounds the size of a valid checkpoint of this layout (every
// count at its limit), so that loading never reads more than that.
func (l layout) maxFileSize() int64 {
	entry := int64(8 + maxNameBytes) // a length-prefixed name and a count or value
	p, np, nb, w := int64(l.numParams), int64(len(l.params)), int64(len(l.buffers)), int64(l.workers)
	sb, sv := int64(l.state.buffers), int64(l.state.values)
	var b int64
	for _, t := range l.buffers {
		b += int64(t.size)
	}
	size := int64(64 + maxMetaBytes)
	size += (np+nb)*entry + 4*(p+b)                                          // names, parameters, buffers
	size += w * (4 + 4*nb + 4*b)                                             // replica buffers
	size += maxOptimSlots * (np*entry + 4*p)                                 // optimizer state
	size += w * (sb*entry + 4*sv + 128 + 2*maxKinds*entry + 4 + 8*maxRounds) // worker state
	return size
}

// damagedError is the error of a file whose bytes are not what was written
// (CRC mismatch, cut short, not a checkpoint at all): a resume may fall back to
// an older checkpoint. Every other load error is a real mismatch and stops it.
type damagedError struct{ msg string }

func (e *damagedError) Error() string { return e.msg }

func isDamaged(err error) bool {
	var d *damagedError
	return errors.As(err, &d)
}

// saveCheckpoint writes the checkpoint atomically, creating its directory. It
// refuses a checkpoint whose position fields could not be loaded back.
func saveCheckpoint(path string, c *checkpoint) error {
	return saveCheckpointVia(path, c, nil)
}

// saveCheckpointVia is saveCheckpoint with the file's writer wrapped (tests
// inject write failures); wrap may be nil.
func saveCheckpointVia(path string, c *checkpoint, wrap func(io.Writer) io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return atomicfile.WriteFunc(path, func(w io.Writer) error {
		if wrap != nil {
			w = wrap(w)
		}
		if err := encodeCheckpoint(w, c); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	})
}

// loadCheckpoint reads, verifies and decodes a checkpoint file that must fit
// want. The error names the file and, for a bad value, the field.
func loadCheckpoint(path string, want layout) (*checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if limit := want.maxFileSize(); st.Size() > limit {
		return nil, fmt.Errorf("checkpoint %s: %d bytes, larger than the %d bytes a checkpoint of model %s with %d workers can take (expected a checkpoint of this run)",
			path, st.Size(), limit, want.model, want.workers)
	}
	raw := make([]byte, st.Size())
	if _, err := io.ReadFull(f, raw); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &damagedError{fmt.Sprintf("checkpoint %s: corrupt or truncated (shrank while being read)", path)}
		}
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	c, err := decodeCheckpoint(raw, want)
	if err != nil {
		if isDamaged(err) {
			return nil, &damagedError{fmt.Sprintf("checkpoint %s: %v", path, err)}
		}
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return c, nil
}

// epochChanged says why a checkpoint's position may no longer fit the run.
const epochChanged = " (a resumed run keeps its steps per epoch: the training data, data.batch_size, dist.workers and train.max_steps must not change)"

// checkPosition checks the checkpoint's position in the run against the run's
// steps per epoch (which the decoder cannot know): the step in the epoch is
// below it and the global step counts the completed epochs plus that step.
func (c *checkpoint) checkPosition(path string, stepsPerEpoch int) error {
	if c.StepInEpoch >= stepsPerEpoch {
		return fmt.Errorf("checkpoint %s: field StepInEpoch: %d, expected below the run's %d steps per epoch%s", path, c.StepInEpoch, stepsPerEpoch, epochChanged)
	}
	if want := c.Epoch*stepsPerEpoch + c.StepInEpoch; c.GlobalStep != want {
		return fmt.Errorf("checkpoint %s: field GlobalStep: %d, expected %d (%d epochs of %d steps plus %d)%s",
			path, c.GlobalStep, want, c.Epoch, stepsPerEpoch, c.StepInEpoch, epochChanged)
	}
	return nil
}

// restore copies a checkpoint into the model and optimizer after checking that
// it belongs to this model (loadCheckpoint checked it already; restore does not
// rely on that).
func (c *checkpoint) restore(path string, net *models.Net, opt optim.Optimizer) error {
	if err := layoutOf(net, len(c.Workers), nil).check(c); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := opt.SetState(c.Optim); err != nil {
		return fmt.Errorf("checkpoint %s: optimizer state: %w", path, err)
	}
	copy(net.Flat(), c.Params)
	for i, b := range net.Buffers() {
		copy(b.Value, c.Buffers[i])
	}
	return nil
}

// check compares a checkpoint's tensors and buffers with the layout.
func (l layout) check(c *checkpoint) error {
	if c.Model != l.model {
		return fmt.Errorf("model %q, but the config builds %q", c.Model, l.model)
	}
	if len(c.ParamNames) != len(l.params) || len(c.Params) != l.numParams {
		return fmt.Errorf("%d tensors with %d values, the model has %d tensors with %d values",
			len(c.ParamNames), len(c.Params), len(l.params), l.numParams)
	}
	for i, p := range l.params {
		if c.ParamNames[i] != p.name {
			return fmt.Errorf("tensor %d is %q, the model has %q", i, c.ParamNames[i], p.name)
		}
	}
	if len(c.BufferNames) != len(l.buffers) || len(c.Buffers) != len(l.buffers) {
		return fmt.Errorf("%d buffer names and %d model buffers, the model has %d", len(c.BufferNames), len(c.Buffers), len(l.buffers))
	}
	for i, b := range l.buffers {
		if c.BufferNames[i] != b.name || len(c.Buffers[i]) != b.size {
			return fmt.Errorf("buffer %q (%d values) does not match %q (%d values)", c.BufferNames[i], len(c.Buffers[i]), b.name, b.size)
		}
	}
	return nil
}

// newCheckpoint captures the current state of the model and optimizer; the
// caller fills in the position, records and worker state.
func newCheckpoint(version string, net *models.Net, opt optim.Optimizer) *checkpoint {
	c := &checkpoint{Version: version, Model: net.Name(), Params: append([]float32(nil), net.Flat()...), Optim: opt.State()}
	for _, p := range net.Params() {
		c.ParamNames = append(c.ParamNames, p.Name)
	}
	for _, b := range net.Buffers() {
		c.BufferNames = append(c.BufferNames, b.Name)
		c.Buffers = append(c.Buffers, append([]float32(nil), b.Value...))
	}
	return c
}
