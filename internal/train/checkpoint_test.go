package train

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"slices"
	"testing"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// cfgLayout is the checkpoint layout of a run of cfg, with the model and a
// worker's exchange built as Run builds them.
func cfgLayout(t testing.TB, cfg configs.Config) layout {
	t.Helper()
	ds, err := data.Open(data.Options{Name: cfg.Data.Name, Dir: cfg.Data.Dir, SeqLen: cfg.Data.SeqLen, Normalize: cfg.Data.Normalize}, "train")
	if err != nil {
		t.Fatal(err)
	}
	in := models.Input{Shape: ds.XShape(), Classes: ds.Classes(), YLen: ds.YLen()}
	net, err := models.New(cfg.Model, in, cfg.WorkerBatch(), 0, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	members, err := dist.NewLocal(cfg.Dist.Workers)
	if err != nil {
		t.Fatal(err)
	}
	x, err := compress.NewExchange(cfg.Compress, net.Params(), members[0], cfg.Seed, compress.Hyper{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return layoutOf(net, cfg.Dist.Workers, x)
}

// latestPath is the newest checkpoint file of a run directory.
func latestPath(t testing.TB, dir string) string {
	t.Helper()
	files, err := listCheckpoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no checkpoint in %s", dir)
	}
	return files[0].path
}

// testLayout is a small synthetic run: four parameter tensors (26 values), two
// BatchNorm buffers, two workers.
func testLayout() layout {
	return newLayout("mlp",
		[]tensorSize{{"fc1.w", 12}, {"fc1.b", 4}, {"fc2.w", 8}, {"fc2.b", 2}},
		[]tensorSize{{"bn.running_mean", 4}, {"bn.running_var", 4}}, 2)
}

// seq is n values starting at from, step 0.25 (exact in float32).
func seq(from float32, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = from + 0.25*float32(i)
	}
	return out
}

func ptr(v float64) *float64 { return &v }
func intPtr(v int) *int      { return &v }

// fullCheckpoint is a mid-epoch checkpoint of l with every field set to a
// value that is not its zero value (TestFullCheckpointSetsEveryField checks),
// so that a field the codec forgets shows in a round trip.
func fullCheckpoint(l layout) *checkpoint {
	c := &checkpoint{Version: "v1.2.3", Model: l.model, Epoch: 2, GlobalStep: 2*10 + 3, StepInEpoch: 3,
		LossSum: 4.5, EpochSeconds: 1.25, MetricsOffset: 777, Elapsed: 12.5, Samples: 23 * 64,
		Config:     map[string]string{"model.name": l.model, "data.batch_size": "32", "data.dir": "/data/x y"},
		DataDigest: "sha256:0123abcd",
		Optim: optim.State{Step: 23, Buffers: map[string][]float32{
			"m/fc1.w": seq(1, 12), "v/fc1.w": seq(2, 12), "m/fc2.b": seq(3, 2), "norm/fc1.b": {9}}},
		Epochs: []EpochResult{
			{Kind: "epoch", Epoch: 1, Step: 10, LR: 0.1, TrainLoss: 2.1, TestLoss: 1.9, TestAccuracy: ptr(0.4), ValBPC: ptr(2.5), ValLoss: ptr(1.8), ValAccuracy: ptr(0.45), Seconds: 3, SamplesPerSecond: 210, EvalSeconds: 0.75,
				PSPushes: 80, PSMeanStaleness: ptr(3.5), PSMaxStaleness: intPtr(9)},
			{Kind: "epoch", Epoch: 2, Step: 20, LR: 0.05, TrainLoss: 1.1, TestLoss: 0.9, TestAccuracy: ptr(0.7), ValBPC: ptr(1.5), ValLoss: ptr(0.8), ValAccuracy: ptr(0.75), Seconds: 2.5, SamplesPerSecond: 250, EvalSeconds: 0.5},
		},
	}
	off := float32(0)
	for _, p := range l.params {
		c.ParamNames = append(c.ParamNames, p.name)
		c.Params = append(c.Params, seq(off, p.size)...)
		off += 10
	}
	for r := range l.workers {
		var set [][]float32
		for _, b := range l.buffers {
			set = append(set, seq(float32(100*r)+off, b.size))
			off += 10
		}
		c.ReplicaBuffers = append(c.ReplicaBuffers, set)
	}
	for i, b := range l.buffers {
		c.BufferNames = append(c.BufferNames, b.name)
		c.Buffers = append(c.Buffers, c.ReplicaBuffers[0][i])
	}
	for w := range l.workers {
		c.Workers = append(c.Workers, workerState{
			Compressor: map[string][]float32{"residual": seq(float32(w), l.numParams), "q": seq(-1, 5)},
			Traffic: compress.Traffic{Steps: 23, SteadySteps: 13, DenseStep: 24, Wire: 1000 + int64(w), Dense: 2000, SteadyWire: 600, SteadyDense: 1300,
				WireByKind: map[string]int64{"linear": 900, "bias": 100}, DenseByKind: map[string]int64{"linear": 1800, "bias": 200},
				SteadyRoundWire: []int64{200, 400 + int64(w)}},
		})
	}
	return c
}

// encodeRaw frames c's encoding without encodeCheckpoint's check of the
// position fields, as a damaged or crafted file would hold it.
func encodeRaw(t testing.TB, c *checkpoint) []byte {
	t.Helper()
	return frame(encodeFormat(t, c, checkpointFormat, checkpointFormat))
}

// encodeFormat is c's file without the CRC, its meta section laid out as
// format and its header labelled label.
func encodeFormat(t testing.TB, c *checkpoint, format, label string) []byte {
	t.Helper()
	var meta, body bytes.Buffer
	me, be := &encoder{w: &meta}, &encoder{w: &body}
	encodeMetaAs(me, c, format)
	encodeBody(be, c)
	if me.err != nil || be.err != nil {
		t.Fatal(me.err, be.err)
	}
	return append(binary.LittleEndian.AppendUint32([]byte(checkpointMagic+label), uint32(meta.Len())),
		append(meta.Bytes(), body.Bytes()...)...)
}

// frame appends the CRC that makes payload (header included) a file that
// passes the integrity check.
func frame(payload []byte) []byte {
	return binary.LittleEndian.AppendUint32(slices.Clone(payload), crc32.ChecksumIEEE(payload))
}

func encodeValid(t testing.TB, c *checkpoint) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodeCheckpoint(&buf, c); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// allocBound is what decoding input may allocate: a small multiple of the
// input (map entries and error texts cost more than their encoding) plus the
// layout's own lists, never what the counts in the input claim.
func allocBound(inputLen int, l layout) uint64 {
	return uint64(64*inputLen) + uint64(64*(len(l.params)+len(l.buffers))*l.workers) + 1<<20
}
