package train

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"

	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// checkpointMagic starts every checkpoint file; the format is the magic, a gob
// payload, and the CRC-32 (IEEE) of the payload, so truncation and corruption are
// detected before anything is decoded.
const checkpointMagic = "GWCKPT01"

// checkpoint is everything a resumed run needs to continue exactly: parameters,
// model buffers (BatchNorm running statistics), optimizer state and the position
// in the run. The sampler and augmentation are pure functions of (seed, epoch), so
// the epoch number is the whole sampler state.
type checkpoint struct {
	Version       string
	Model         string
	Epoch         int // epochs completed
	GlobalStep    int // optimizer steps taken
	ParamNames    []string
	Params        []float32
	BufferNames   []string
	Buffers       [][]float32
	Optim         optim.State
	MetricsOffset int64 // size of metrics.jsonl when the checkpoint was taken
	Elapsed       float64
	Samples       int64
	Workers       []workerState // per logical worker of the run: compressor state and wire accounting
	Epochs        []EpochResult

	StepInEpoch    int               // steps of epoch Epoch+1 already taken (0 at an epoch end)
	LossSum        float64           // sum of the training losses of those steps
	EpochSeconds   float64           // training seconds spent in that partial epoch
	ReplicaBuffers [][][]float32     // mid-epoch only: every logical worker's replica buffers; nil at epoch ends
	Config         map[string]string // the resolved config (configs.Flat) the run was made with
	DataDigest     string            // data.Source digest of the files read
}

func checkpointPath(dir string, epoch int) string {
	return filepath.Join(dir, "checkpoints", fmt.Sprintf("epoch-%04d.ckpt", epoch))
}

// saveCheckpoint writes the checkpoint atomically.
func saveCheckpoint(path string, c *checkpoint) error {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(c); err != nil {
		return fmt.Errorf("checkpoint %s: encode: %w", path, err)
	}
	var buf bytes.Buffer
	buf.WriteString(checkpointMagic)
	buf.Write(payload.Bytes())
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc32.ChecksumIEEE(payload.Bytes()))
	buf.Write(sum[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes())
}

// loadCheckpoint reads and verifies a checkpoint file.
func loadCheckpoint(path string) (*checkpoint, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if len(raw) < len(checkpointMagic)+4 || string(raw[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("checkpoint %s: not a gradwire checkpoint (expected it to start with %q)", path, checkpointMagic)
	}
	payload := raw[len(checkpointMagic) : len(raw)-4]
	want := binary.LittleEndian.Uint32(raw[len(raw)-4:])
	if got := crc32.ChecksumIEEE(payload); got != want {
		return nil, fmt.Errorf("checkpoint %s: corrupt or truncated (CRC-32 %08x, expected %08x)", path, got, want)
	}
	var c checkpoint
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&c); err != nil {
		return nil, fmt.Errorf("checkpoint %s: decode: %w", path, err)
	}
	return &c, nil
}

// latestCheckpoint finds the checkpoint of the highest epoch in a run directory.
func latestCheckpoint(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "checkpoints", "epoch-*.ckpt"))
	if err != nil {
		return "", err
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("resume: no checkpoint in %s (expected %s)", dir, filepath.Join(dir, "checkpoints", "epoch-NNNN.ckpt"))
	}
	sort.Strings(matches) // zero-padded epoch numbers sort numerically
	return matches[len(matches)-1], nil
}

// restore copies a checkpoint into the model and optimizer after checking that
// it belongs to this model.
func (c *checkpoint) restore(path string, net *models.Net, opt optim.Optimizer) error {
	if c.Model != net.Name() {
		return fmt.Errorf("checkpoint %s: model %q, but the config builds %q", path, c.Model, net.Name())
	}
	params := net.Params()
	if len(c.ParamNames) != len(params) || len(c.Params) != len(net.Flat()) {
		return fmt.Errorf("checkpoint %s: %d tensors with %d values, the model has %d tensors with %d values",
			path, len(c.ParamNames), len(c.Params), len(params), len(net.Flat()))
	}
	for i, p := range params {
		if c.ParamNames[i] != p.Name {
			return fmt.Errorf("checkpoint %s: tensor %d is %q, the model has %q", path, i, c.ParamNames[i], p.Name)
		}
	}
	bufs := net.Buffers()
	if len(c.Buffers) != len(bufs) {
		return fmt.Errorf("checkpoint %s: %d model buffers, the model has %d", path, len(c.Buffers), len(bufs))
	}
	for i, b := range bufs {
		if c.BufferNames[i] != b.Name || len(c.Buffers[i]) != len(b.Value) {
			return fmt.Errorf("checkpoint %s: buffer %q (%d values) does not match %q (%d values)",
				path, c.BufferNames[i], len(c.Buffers[i]), b.Name, len(b.Value))
		}
	}
	if err := opt.SetState(c.Optim); err != nil {
		return fmt.Errorf("checkpoint %s: optimizer state: %w", path, err)
	}
	copy(net.Flat(), c.Params)
	for i, b := range bufs {
		copy(b.Value, c.Buffers[i])
	}
	return nil
}

// newCheckpoint captures the current state.
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
