package train

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

func TestFullCheckpointSetsEveryField(t *testing.T) {
	// Walks every struct reachable from the checkpoint: a field added later
	// must be set in fullCheckpoint, and so is covered by the round trip.
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if v.Field(i).IsZero() {
					t.Errorf("fullCheckpoint leaves %s.%s at its zero value", path, f.Name)
				}
				walk(path+"."+f.Name, v.Field(i))
			}
		case reflect.Slice:
			if v.Len() > 0 {
				walk(path+"[0]", v.Index(0))
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		}
	}
	walk("checkpoint", reflect.ValueOf(*fullCheckpoint(testLayout())))
}

func TestCheckpointRoundTrip(t *testing.T) {
	l := testLayout()
	for name, c := range map[string]*checkpoint{
		"mid-epoch": fullCheckpoint(l),
		"epoch end": func() *checkpoint {
			c := fullCheckpoint(l)
			c.StepInEpoch, c.GlobalStep, c.LossSum, c.EpochSeconds, c.ReplicaBuffers = 0, 20, 0, 0, nil
			c.Epochs[1].TestAccuracy, c.Epochs[0].ValBPC = nil, nil
			c.Workers[1].Compressor = nil // a worker without compressor state
			return c
		}(),
		"start of a run": {Model: l.model, ParamNames: fullCheckpoint(l).ParamNames, Params: make([]float32, l.numParams),
			BufferNames: fullCheckpoint(l).BufferNames, Buffers: [][]float32{make([]float32, 4), make([]float32, 4)},
			Workers: []workerState{{Traffic: fullCheckpoint(l).Workers[0].Traffic}, {Traffic: fullCheckpoint(l).Workers[1].Traffic}}},
	} {
		raw := encodeValid(t, c)
		got, err := decodeCheckpoint(raw, l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", name, got, c)
		}
		// One encoding per value: re-encoding gives the same bytes.
		if again := encodeValid(t, got); !bytes.Equal(again, raw) {
			t.Errorf("%s: re-encoding the decoded checkpoint gives other bytes", name)
		}
	}
}

// TestCheckpointLayoutOfNet checks layoutOf on a real model and a checkpoint
// of it through save and load.
func TestCheckpointLayoutOfNet(t *testing.T) {
	net, err := models.New(models.Config{Name: "mlp", Hidden: []int{5, 3}}, models.Input{Shape: []int{1, 4, 4}, Classes: 3, YLen: 1}, 2, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := layoutOf(net, 3, nil)
	// 16 inputs -> 5 -> 3 -> 3 classes: weights and biases.
	if l.model != "mlp" || l.numParams != 16*5+5+5*3+3+3*3+3 || len(l.params) != 6 || l.workers != 3 {
		t.Fatalf("layout %+v, expected mlp with 6 tensors, 115 values and 3 workers", l)
	}
	for i, p := range net.Params() {
		if l.params[i] != (tensorSize{p.Name, len(p.Value)}) {
			t.Errorf("layout tensor %d is %+v, the model's is %s with %d values", i, l.params[i], p.Name, len(p.Value))
		}
	}
	cfg, err := configs.Load("", []string{"optim.name=adam"})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.New(cfg.Optim)
	if err != nil {
		t.Fatal(err)
	}
	params := net.Params()
	for i := range params {
		for j := range params[i].Grad {
			params[i].Grad[j] = 0.01 * float32(j%7)
		}
	}
	if err := opt.Step(params, 0.1); err != nil {
		t.Fatal(err)
	}
	c := newCheckpoint("test", net, opt)
	c.Workers = make([]workerState, 3)
	path := checkpointPath(t.TempDir(), 0)
	if err := saveCheckpoint(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := loadCheckpoint(path, l)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Params, net.Flat()) || !reflect.DeepEqual(got.Optim, opt.State()) || got.Optim.Step != 1 || len(got.Optim.Buffers) != 12 {
		t.Fatalf("loaded parameters or Adam state (step %d, %d buffers) differ from the model's", got.Optim.Step, len(got.Optim.Buffers))
	}
	if _, err := loadCheckpoint(path, layoutOf(net, 2, nil)); err == nil || !strings.Contains(err.Error(), "field Workers: 3 entries, expected 2") {
		t.Fatalf("error %v, expected the worker count to be refused", err)
	}
}

// TestCheckpointRejects changes one field at a time and checks that decoding
// fails, naming the field and what was expected.
func TestCheckpointRejects(t *testing.T) {
	l := testLayout()
	cases := []struct {
		name string
		edit func(c *checkpoint)
		want string
	}{
		{"negative epoch", func(c *checkpoint) { c.Epoch = -1 }, "field Epoch: -1, expected a count >= 0"},
		{"negative step", func(c *checkpoint) { c.GlobalStep = -20 }, "field GlobalStep: -20, expected a count >= 0"},
		{"negative step in epoch", func(c *checkpoint) { c.StepInEpoch = -3 }, "field StepInEpoch: -3"},
		{"step in epoch beyond the global step", func(c *checkpoint) { c.StepInEpoch = 24 }, "field StepInEpoch: 24, expected at most GlobalStep (23)"},
		{"huge metrics offset", func(c *checkpoint) { c.MetricsOffset = 1 << 40 }, "field MetricsOffset: 1099511627776, expected at most 1073741824"},
		{"negative metrics offset", func(c *checkpoint) { c.MetricsOffset = -1 }, "field MetricsOffset: -1"},
		{"NaN elapsed", func(c *checkpoint) { c.Elapsed = math.NaN() }, "field Elapsed: NaN, expected a finite number of seconds >= 0"},
		{"infinite epoch seconds", func(c *checkpoint) { c.EpochSeconds = math.Inf(1) }, "field EpochSeconds: +Inf"},
		{"negative samples", func(c *checkpoint) { c.Samples = -5 }, "field Samples: -5"},
		{"records missing", func(c *checkpoint) { c.Epoch = 3 }, "field Epochs: 2 records, expected one for each of the 3 completed epochs"},
		{"records out of order", func(c *checkpoint) { c.Epochs[1].Epoch = 5 }, "field Epochs[1].Epoch: 5, expected 2"},
		{"record after the step", func(c *checkpoint) { c.Epochs[1].Step = 99 }, "field Epochs[1].Step: 99, expected at most GlobalStep (23)"},
		{"negative record seconds", func(c *checkpoint) { c.Epochs[0].Seconds = -1 }, "field Epochs[0].Seconds: -1"},
		{"infinite evaluation seconds", func(c *checkpoint) { c.Epochs[1].EvalSeconds = math.Inf(1) }, "field Epochs[1].EvalSeconds: +Inf"},
		{"another model", func(c *checkpoint) { c.Model = "lenet5" }, `field Model: "lenet5", but the config builds "mlp"`},
		{"short buffer names", func(c *checkpoint) { c.BufferNames = c.BufferNames[:1] }, "field BufferNames: 1 entries, expected 2 (the model's number of model buffers)"},
		{"renamed tensor", func(c *checkpoint) { c.ParamNames[2] = "fc9.w" }, `field ParamNames[2]: "fc9.w", expected "fc2.w"`},
		{"short parameters", func(c *checkpoint) { c.Params = c.Params[:25] }, "field Params: 25 values, expected 26 (the model's parameter count)"},
		{"buffer of another size", func(c *checkpoint) { c.Buffers[1] = seq(0, 5) }, "field Buffers[1]: 5 values, expected 4 (the size of buffer bn.running_var)"},
		{"replica buffers of another size", func(c *checkpoint) { c.ReplicaBuffers[1][0] = seq(0, 3) }, "field ReplicaBuffers[1][0]: 3 values, expected 4"},
		{"more replicas than workers", func(c *checkpoint) { c.ReplicaBuffers = append(c.ReplicaBuffers, c.Buffers) }, "field ReplicaBuffers: 3 entries, expected at most 2"},
		{"negative optimizer step", func(c *checkpoint) { c.Optim.Step = -1 }, "field Optim.Step: -1"},
		{"optimizer buffer of no parameter", func(c *checkpoint) { c.Optim.Buffers["m/fc3.w"] = seq(0, 12) }, `field Optim.Buffers["m/fc3.w"]: expected a key <slot>/<parameter name>`},
		{"optimizer buffer without slot", func(c *checkpoint) { c.Optim.Buffers["fc1.w"] = seq(0, 12) }, `field Optim.Buffers["fc1.w"]: expected a key <slot>/<parameter name>`},
		{"optimizer buffer of another size", func(c *checkpoint) { c.Optim.Buffers["v/fc1.w"] = seq(0, 11) }, `field Optim.Buffers["v/fc1.w"]: 11 values, expected 12 (the size of parameter fc1.w) or 1`},
		{"too many optimizer buffers", func(c *checkpoint) {
			for _, s := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				c.Optim.Buffers[s+"/fc1.w"] = seq(0, 12)
			}
		}, "the optimizer's buffers hold more than 104 values (4 x the parameter count)"},
		{"fewer workers", func(c *checkpoint) { c.Workers = c.Workers[:1] }, "field Workers: 1 entries, expected 2 (the configured number of logical workers (dist.workers))"},
		{"compressor vector beyond the parameters", func(c *checkpoint) { c.Workers[1].Compressor["residual"] = seq(0, 27) }, `field Workers[1].Compressor["residual"]: 27 values, expected at most 26 (the parameter count)`},
		{"compressor state beyond twice the parameters", func(c *checkpoint) {
			c.Workers[0].Compressor["u"] = seq(0, 26)
			c.Workers[0].Compressor["v"] = seq(0, 26)
		}, `field Workers[0].Compressor["u"]: 26 values, expected at most 26 (the parameter count) and 52 in all`},
		{"negative traffic", func(c *checkpoint) { c.Workers[0].Traffic.Wire = -8 }, "field Workers[0].Traffic.Wire: -8"},
		{"negative traffic by kind", func(c *checkpoint) { c.Workers[1].Traffic.DenseByKind["bias"] = -1 }, `field Workers[1].Traffic.DenseByKind["bias"]: -1`},
		{"negative round traffic", func(c *checkpoint) { c.Workers[1].Traffic.SteadyRoundWire[1] = -3 }, "field Workers[1].Traffic.SteadyRoundWire[1]: -3"},
		{"too many rounds", func(c *checkpoint) { c.Workers[0].Traffic.SteadyRoundWire = make([]int64, 17) }, "field Workers[0].Traffic.SteadyRoundWire: 17 entries, expected at most 16"},
	}
	for _, tc := range cases {
		c := fullCheckpoint(l)
		tc.edit(c)
		_, err := decodeCheckpoint(encodeRaw(t, c), l)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, expected it to contain %q", tc.name, err, tc.want)
		}
		if isDamaged(err) {
			t.Errorf("%s: %v is reported as damage, which would make a resume fall back", tc.name, err)
		}
	}
}

// countAt is the offset of the first u32 count n followed by the
// length-prefixed key first (a map's count and its first key) in raw.
func countAt(t *testing.T, raw []byte, n int, first string) int {
	t.Helper()
	pat := binary.LittleEndian.AppendUint32(nil, uint32(n))
	pat = append(binary.LittleEndian.AppendUint32(pat, uint32(len(first))), first...)
	i := bytes.Index(raw, pat)
	if i < 0 {
		t.Fatalf("no count %d before %q", n, first)
	}
	return i
}

// setU32 returns raw with the u32 at off replaced and the CRC recomputed: a
// 4-byte edit that the integrity check cannot see.
func setU32(raw []byte, off int, v uint32) []byte {
	out := slices.Clone(raw[:len(raw)-4])
	binary.LittleEndian.PutUint32(out[off:], v)
	return frame(out)
}

// TestCheckpointCountEdits: a count raised to a huge value, with a matching
// CRC, fails at that field without allocating for it (the gob format
// allocated 1.5 GB for such an edit of a 0.8 MB file).
func TestCheckpointCountEdits(t *testing.T) {
	l := testLayout()
	raw := encodeValid(t, fullCheckpoint(l))
	optimCount := countAt(t, raw, 4, "m/fc1.w")
	residual := countAt(t, raw, 2, "q") // worker 0's compressor map: "q", "residual"
	config := countAt(t, raw, 3, "data.batch_size")
	qLen := residual + 4 + 4 + 1 // the count of the "q" vector
	cases := []struct {
		name string
		off  int
		v    uint32
		want string
	}{
		{"optimizer buffers", optimCount, 0xffffffff, "field Optim.Buffers: 4294967295 entries, expected at most 16"},
		{"compressor state", residual, 0x7fffffff, "field Workers[0].Compressor: 2147483647 entries, expected at most 10"},
		{"compressor vector", qLen, 0x40000000, `field Workers[0].Compressor["q"]: 1073741824 values, expected at most 26`},
		{"config", config, 1 << 31, "field Config: 2147483648 entries, expected at most 4096"},
		{"config within the limit", config, 4000, "field Config: 4000 entries of at least 8 bytes, only"},
		{"a config key's length", config + 4, 1000, "field Config key: 1000 entries of at least 1 bytes, only"},
		{"meta length", headerBytes - 4, 0xfffffff0, "field meta length: 4294967280 bytes, expected at most"},
	}
	for _, tc := range cases {
		edited := setU32(raw, tc.off, tc.v)
		var err error
		n := allocated(func() { _, err = decodeCheckpoint(edited, l) })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, expected it to contain %q", tc.name, err, tc.want)
		}
		if max := allocBound(len(edited), l); n > max {
			t.Errorf("%s: decoding allocated %d bytes, expected at most %d", tc.name, n, max)
		}
	}
}

// TestCheckpointEveryCut decodes every prefix of a valid file's payload,
// framed with a valid CRC: each must fail with an error, none may panic.
func TestCheckpointEveryCut(t *testing.T) {
	l := testLayout()
	raw := encodeValid(t, fullCheckpoint(l))
	payload := raw[:len(raw)-4]
	for n := 0; n < len(payload); n++ {
		if _, err := decodeCheckpoint(frame(payload[:n]), l); err == nil {
			t.Fatalf("a payload cut to %d of %d bytes decodes", n, len(payload))
		}
	}
	if _, err := decodeCheckpoint(frame(append(slices.Clone(payload), 0)), l); err == nil || !strings.Contains(err.Error(), "body: 1 bytes after the last field") {
		t.Fatalf("error %v for a byte after the body", err)
	}
}

func TestCheckpointIntegrity(t *testing.T) {
	l := testLayout()
	raw := encodeValid(t, fullCheckpoint(l))
	flipped := slices.Clone(raw)
	flipped[len(flipped)/2] ^= 0x10
	var gobPayload bytes.Buffer
	if err := gob.NewEncoder(&gobPayload).Encode(fullCheckpoint(l)); err != nil {
		t.Fatal(err)
	}
	v1 := frame(append([]byte("GWCKPT01"), gobPayload.Bytes()...))
	newer := slices.Clone(raw)
	copy(newer[6:], "07")
	cases := []struct {
		name    string
		raw     []byte
		want    string
		damaged bool
	}{
		{"bit flip", flipped, "corrupt or truncated (CRC-32", true},
		{"cut", raw[:len(raw)-100], "corrupt or truncated (CRC-32", true},
		{"empty", nil, "corrupt or truncated (0 bytes", true},
		{"header only", raw[:headerBytes], "corrupt or truncated (12 bytes", true},
		{"not a checkpoint", []byte("hello, world"), `not a gradwire checkpoint (expected it to start with "GWCKPT")`, true},
		{"format 1", v1, "written by an older version of gradwire (checkpoint format 01); this version reads format 06", false},
		{"format 7", newer, `checkpoint format "07", this version of gradwire reads format 06`, false},
	}
	for _, tc := range cases {
		_, err := decodeCheckpoint(tc.raw, l)
		if err == nil || !strings.Contains(err.Error(), tc.want) || isDamaged(err) != tc.damaged {
			t.Errorf("%s: error %v (damaged %v), expected %q (damaged %v)", tc.name, err, isDamaged(err), tc.want, tc.damaged)
		}
	}
}

func TestLoadCheckpointNamesFile(t *testing.T) {
	l := testLayout()
	dir := t.TempDir()
	path := filepath.Join(dir, "step-00000023.ckpt")
	c := fullCheckpoint(l)
	if err := saveCheckpoint(path, c); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCheckpoint(path, l); err != nil {
		t.Fatal(err)
	}
	other := l
	other.workers = 3
	if _, err := loadCheckpoint(path, other); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "field Workers") {
		t.Errorf("error %v, expected it to name %s and the field Workers", err, path)
	}
	// A file beyond any checkpoint of the layout is refused without reading it.
	big := filepath.Join(dir, "big.ckpt")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(l.maxFileSize() + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var lerr error
	n := allocated(func() { _, lerr = loadCheckpoint(big, l) })
	if lerr == nil || !strings.Contains(lerr.Error(), big) || !strings.Contains(lerr.Error(), "larger than the") {
		t.Errorf("error %v for an oversized file", lerr)
	}
	if n > 1<<20 {
		t.Errorf("refusing a file of %d bytes allocated %d bytes, expected it not to be read", l.maxFileSize()+1, n)
	}
	if _, err := loadCheckpoint(filepath.Join(dir, "none.ckpt"), l); err == nil || !strings.Contains(err.Error(), "none.ckpt") {
		t.Errorf("error %v for a missing file", err)
	}
}

func TestSaveCheckpointRefusesWhatWouldNotLoad(t *testing.T) {
	dir := t.TempDir()
	path := checkpointPath(dir, 23)
	c := fullCheckpoint(testLayout())
	c.MetricsOffset = 1 << 40
	err := saveCheckpoint(path, c)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "would not load back: field MetricsOffset") {
		t.Fatalf("error %v, expected the path and the field", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Fatalf("%d files left after a refused checkpoint", len(entries))
	}
}

func TestCheckpointPosition(t *testing.T) {
	c := fullCheckpoint(testLayout()) // epoch 2 done, 3 steps into epoch 3, global step 23
	if err := c.checkPosition("x.ckpt", 10); err != nil {
		t.Fatal(err)
	}
	if err := c.checkPosition("x.ckpt", 3); err == nil || !strings.Contains(err.Error(), "x.ckpt: field StepInEpoch: 3, expected below the run's 3 steps per epoch") {
		t.Errorf("error %v", err)
	}
	if err := c.checkPosition("x.ckpt", 11); err == nil || !strings.Contains(err.Error(), "field GlobalStep: 23, expected 25 (2 epochs of 11 steps plus 3)") {
		t.Errorf("error %v", err)
	}
}

func TestWorkerStateRoundTrip(t *testing.T) {
	l := testLayout()
	for _, w := range fullCheckpoint(l).Workers {
		raw := encodeWorkerState(w)
		got, err := decodeWorkerState(raw, l)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("decoded %+v, want %+v", got, w)
		}
	}
	// The encoding starts with the compressor map: count 2, then the key "q"
	// (length at 4, the byte at 8) and its values (count at 9).
	raw := encodeWorkerState(fullCheckpoint(l).Workers[0])
	for off, want := range map[int]string{
		0: "field worker state.Compressor: 1073741824 entries, expected at most 10",
		4: "field worker state.Compressor key: 1073741824 entries, expected at most 1024",
		9: `field worker state.Compressor["q"]: 1073741824 values, expected at most 26 (the parameter count)`,
	} {
		edited := slices.Clone(raw)
		binary.LittleEndian.PutUint32(edited[off:], 1<<30)
		var err error
		n := allocated(func() { _, err = decodeWorkerState(edited, l) })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("count at %d raised: error %v, expected %q", off, err, want)
		}
		if max := allocBound(len(edited), l); n > max {
			t.Errorf("count at %d raised: %d bytes allocated, expected at most %d", off, n, max)
		}
	}
	if _, err := decodeWorkerState(append(raw, 1), l); err == nil || !strings.Contains(err.Error(), "1 bytes after the last field") {
		t.Errorf("error %v for a trailing byte", err)
	}
	if _, err := decodeWorkerState(raw[:len(raw)-1], l); err == nil {
		t.Error("a cut worker state decodes")
	}
}

// TestResumeRefusesBadCheckpoint edits a real run's checkpoint (with a valid
// CRC) the ways that used to panic, create a 1 TiB sparse metrics.jsonl or
// resume from epoch -3: the resume now fails naming the file and the field,
// and leaves metrics.jsonl alone.
func TestResumeRefusesBadCheckpoint(t *testing.T) {
	cfg := smallConfig(t, "resnet20", "train.epochs=1", "train.max_steps=1", "train.eval_limit=16", "data.eval_batch_size=8", "data.batch_size=8")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	path := latestPath(t, dir)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(dir, "metrics.jsonl")
	before, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(c *checkpoint)
		want string
	}{
		// resnet20: 21 BatchNorm layers (the stem, 2 in each of 9 blocks, 2
		// projection shortcuts), each a running mean and variance.
		{func(c *checkpoint) { c.BufferNames = c.BufferNames[:1] }, "field BufferNames: 1 entries, expected 42 (the model's number of model buffers)"},
		{func(c *checkpoint) { c.MetricsOffset = 1 << 40 }, "field MetricsOffset: 1099511627776, expected at most 1073741824"},
		{func(c *checkpoint) { c.Epoch = -3 }, "field Epoch: -3, expected a count >= 0"},
	} {
		c, err := decodeCheckpoint(good, cfgLayout(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(c)
		if err := os.WriteFile(path, encodeRaw(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Run(t.Context(), cfg, Options{OutDir: dir, Resume: true})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("resume: error %v, expected it to name %s and say %q", err, path, tc.want)
		}
		if after, _ := os.ReadFile(metrics); !bytes.Equal(after, before) {
			t.Errorf("a refused resume changed metrics.jsonl (%d bytes, was %d)", len(after), len(before))
		}
	}
}

// TestReadsFormat2 decodes a format-2 file, which ends each worker's state
// after its per-kind traffic and has no validation figures in its epoch
// records: built from an encoding of format 2's meta without the per-round
// traffic by dropping each worker's trailing zero round count.
func TestReadsFormat2(t *testing.T) {
	l := testLayout()
	c := fullCheckpoint(l)
	for i := range c.Workers {
		c.Workers[i].Traffic.SteadyRoundWire = nil
	}
	for i := range c.Epochs {
		c.Epochs[i].ValLoss, c.Epochs[i].ValAccuracy = nil, nil
		c.Epochs[i].PSPushes, c.Epochs[i].PSMeanStaleness, c.Epochs[i].PSMaxStaleness = 0, nil, nil
		c.Epochs[i].EvalSeconds = 0
	}
	body := encodeFormat(t, c, format2, format2)
	tail := 0
	for _, w := range c.Workers {
		tail += len(encodeWorkerState(w))
	}
	workers := body[len(body)-tail:]
	v2 := slices.Clone(body[:len(body)-tail])
	copy(v2[len(checkpointMagic):], format2)
	for _, w := range c.Workers {
		n := len(encodeWorkerState(w))
		if !bytes.Equal(workers[n-4:n], []byte{0, 0, 0, 0}) {
			t.Fatalf("worker state does not end with an empty round count: % x", workers[n-4:n])
		}
		v2 = append(v2, workers[:n-4]...)
		workers = workers[n:]
	}
	got, err := decodeCheckpoint(frame(v2), l)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("format 2 decodes to\n%+v\nexpected\n%+v", got.Workers, c.Workers)
	}
	// The same bytes labelled format 3 lack the round counts: refused.
	copy(v2[len(checkpointMagic):], format3)
	if _, err := decodeCheckpoint(frame(v2), l); err == nil {
		t.Error("a format-2 body labelled format 3 decoded")
	}
}

// TestReadsFormat3 decodes a format-3 file, whose epoch records lack the
// validation figures (ValLoss, ValAccuracy) that format 4 added: records
// without them. The same bytes labelled format 4 are refused (the records
// are two presence bytes short), and a format-4 file labelled 3 too.
func TestReadsFormat3(t *testing.T) {
	l := testLayout()
	c := fullCheckpoint(l)
	for i := range c.Epochs {
		c.Epochs[i].ValLoss, c.Epochs[i].ValAccuracy = nil, nil
	}
	for i := range c.Epochs {
		c.Epochs[i].PSPushes, c.Epochs[i].PSMeanStaleness, c.Epochs[i].PSMaxStaleness = 0, nil, nil
		c.Epochs[i].EvalSeconds = 0
	}
	got, err := decodeCheckpoint(frame(encodeFormat(t, c, format3, format3)), l)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("format 3 decodes to\n%+v\nexpected\n%+v", got.Epochs, c.Epochs)
	}
	// Pruning scans the meta section alone, by the header's format.
	if m, err := scanMetaOf(t, encodeFormat(t, c, format3, format3)); err != nil || !reflect.DeepEqual(m.Epochs, c.Epochs) {
		t.Errorf("scanning a format-3 file: %v", err)
	}
	if _, err := decodeCheckpoint(frame(encodeFormat(t, c, format3, format4)), l); err == nil {
		t.Error("a format-3 file labelled format 4 decoded")
	}
	if _, err := decodeCheckpoint(frame(encodeFormat(t, c, format4, format3)), l); err == nil {
		t.Error("a format-4 file labelled format 3 decoded")
	}
}

// TestReadsFormats4And5 decodes a format-4 file, whose epoch records lack
// the parameter server's figures that format 5 added, and a format-5 file,
// whose records lack the evaluation time that format 6 added: records without
// them. Each file labelled as the next format, and the next format's file
// labelled as the older one, are refused.
func TestReadsFormats4And5(t *testing.T) {
	l := testLayout()
	for _, tc := range []struct {
		format, next string
		strip        func(r *EpochResult)
	}{
		{format4, format5, func(r *EpochResult) { r.PSPushes, r.PSMeanStaleness, r.PSMaxStaleness, r.EvalSeconds = 0, nil, nil, 0 }},
		{format5, checkpointFormat, func(r *EpochResult) { r.EvalSeconds = 0 }},
	} {
		c := fullCheckpoint(l)
		for i := range c.Epochs {
			tc.strip(&c.Epochs[i])
		}
		got, err := decodeCheckpoint(frame(encodeFormat(t, c, tc.format, tc.format)), l)
		if err != nil {
			t.Fatalf("format %s: %v", tc.format, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("format %s decodes to\n%+v\nexpected\n%+v", tc.format, got.Epochs, c.Epochs)
		}
		if m, err := scanMetaOf(t, encodeFormat(t, c, tc.format, tc.format)); err != nil || !reflect.DeepEqual(m.Epochs, c.Epochs) {
			t.Errorf("scanning a format-%s file: %v", tc.format, err)
		}
		if _, err := decodeCheckpoint(frame(encodeFormat(t, c, tc.format, tc.next)), l); err == nil {
			t.Errorf("a format-%s file labelled format %s decoded", tc.format, tc.next)
		}
		if _, err := decodeCheckpoint(frame(encodeFormat(t, fullCheckpoint(l), tc.next, tc.format)), l); err == nil {
			t.Errorf("a format-%s file labelled format %s decoded", tc.next, tc.format)
		}
	}
}

// scanMetaOf writes the file payload (framed with its CRC) and scans it as
// pruning does.
func scanMetaOf(t *testing.T, payload []byte) (*checkpoint, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.ckpt")
	if err := os.WriteFile(path, frame(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	m, _, err := scanCheckpoint(path)
	return m, err
}

// TestCheckpointDeclaredStateBound: a compressor that declares its state
// size (compress.StateSizer: GradiVeQ) is held to it instead of twice the
// parameter count, plus the residual when the exchange keeps one for it; the
// bound still refuses one value more, and a raised count fails before
// anything is allocated for it. LeNet-5 (61,706 parameters) with GradiVeQ on
// every weight in slices of 768: 3,769,210 values (compress's
// TestGradiVeQStateValues works it out), 3,830,680 with the residual of the
// 61,470 weight values.
func TestCheckpointDeclaredStateBound(t *testing.T) {
	sets := []string{"compress.name=gradiveq", "compress.min_size=0", "dist.workers=2"}
	l := cfgLayout(t, smallConfig(t, "lenet5", sets...))
	def := defaultStateBound(l.numParams, len(l.params))
	if l.numParams != 61706 || l.state.values != 3769210 || l.state.buffer != 3769210 || l.state.buffers != def.buffers {
		t.Fatalf("lenet5 with gradiveq: %d parameters, state bound %+v; want 61,706 and 3,769,210 values", l.numParams, l.state)
	}
	if ef := cfgLayout(t, smallConfig(t, "lenet5", append(sets, "compress.gradiveq.error_feedback=true")...)); ef.state.values != 3769210+61470 {
		t.Fatalf("with error feedback: %d values, want 3,830,680", ef.state.values)
	}
	if dgc := cfgLayout(t, smallConfig(t, "lenet5", "compress.name=dgc", "dist.workers=2")); dgc.state != def {
		t.Fatalf("dgc: bound %+v, want the default %+v", dgc.state, def)
	}
	// The file bound grows by the extra values' 4 bytes, per worker.
	plain := newLayout(l.model, l.params, l.buffers, l.workers)
	if got, want := l.maxFileSize()-plain.maxFileSize(), int64(2*4*(3769210-2*61706)); got != want {
		t.Fatalf("maxFileSize grew by %d bytes, want %d", got, want)
	}
	st := workerState{Compressor: map[string][]float32{"pca": make([]float32, 3769209), "samples": {1}}}
	if got, err := decodeWorkerState(encodeWorkerState(st), l); err != nil || len(got.Compressor["pca"]) != 3769209 {
		t.Fatalf("a state at the bound: %v", err)
	}
	if _, err := decodeWorkerState(encodeWorkerState(st), plain); err == nil || !strings.Contains(err.Error(), "expected at most 61706 (the parameter count)") {
		t.Fatalf("the default bound: %v, want a refusal", err)
	}
	st.Compressor["samples"] = []float32{1, 2}
	want := `field worker state.Compressor["samples"]: 2 values, expected at most 3769210 in one buffer and in all the worker's compressor state (the compressor's declared state size)`
	if _, err := decodeWorkerState(encodeWorkerState(st), l); err == nil || err.Error() != want {
		t.Fatalf("one value beyond the bound: %v, want %q", err, want)
	}
	raw := encodeWorkerState(workerState{Compressor: map[string][]float32{"pca": {1}}})
	binary.LittleEndian.PutUint32(raw[4+4+3:], 1<<30) // the count of "pca"'s values
	var err error
	n := allocated(func() { _, err = decodeWorkerState(raw, l) })
	if err == nil || !strings.Contains(err.Error(), `Compressor["pca"]: 1073741824 values, expected at most 3769210`) {
		t.Fatalf("a raised count: %v", err)
	}
	if max := allocBound(len(raw), l); n > max {
		t.Fatalf("a raised count allocated %d bytes, expected at most %d", n, max)
	}
}
