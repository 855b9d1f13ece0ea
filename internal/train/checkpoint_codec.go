package train

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Checkpoint file format 6. Integers are little-endian.
//
//	"GWCKPT" "06"       magic and format version, ASCII
//	u32 n, meta (n)     position, records and config: small, so that pruning
//	                    reads it without the tensors
//	body                tensors, optimizer and worker state
//	u32                 CRC-32 (IEEE) of every byte before it
//
// A string is a u32 length and its bytes; a []float32 a u32 count and 4 bytes a
// value; an int an i64; a float64 its IEEE bits as a u64; an optional float64 a
// byte 0 or 1 and then the value; a map a u32 count and its entries, keys in
// strictly ascending order (one encoding per value, no duplicate keys). The
// field order is that of encodeMeta and encodeBody.
//
// The decoder trusts no count: each is checked against the bytes left and
// against the model's layout before anything is allocated, so a damaged or
// crafted file fails with an error naming the field instead of exhausting memory.
// Format 1 was a gob payload, which trusted its counts; it is refused. Format
// 2 lacks the workers' per-round traffic (Traffic.SteadyRoundWire); it is
// read, and a run resumed from it predicts its step time from the rounds'
// average. Formats 2 and 3 lack the epoch records' validation figures
// (ValLoss, ValAccuracy); they are read as records without them, which is
// what a run of those versions had (data.validation did not exist). Formats 2
// to 4 lack the asynchronous parameter server's figures (PSPushes,
// PSMeanStaleness, PSMaxStaleness), read as absent (dist.mode did not exist).
// Formats 2 to 5 lack the epoch records' evaluation time (EvalSeconds), read
// as 0: not measured.
const (
	checkpointMagic  = "GWCKPT"
	checkpointFormat = "06"
	format5          = "05"
	format4          = "04"
	format3          = "03"
	format2          = "02"
	gobFormat        = "01"
	maxRounds        = 16 // collective rounds of one compressor step (PowerSGD and ScaleCom have two)
	headerBytes      = len(checkpointMagic) + len(checkpointFormat) + 4
)

// Limits of the values a checkpoint may hold.
const (
	maxNameBytes     = 1 << 10  // tensor, state buffer and layer kind names, versions, config keys, digest
	maxValueBytes    = 64 << 10 // config values (data paths)
	maxConfigKeys    = 1 << 12
	maxKinds         = 64       // layer kinds in the traffic accounting (six exist)
	maxMetaBytes     = 64 << 20 // about 900k epoch records
	maxMetricsOffset = 1 << 30  // metrics.jsonl is appended to, never sparse: 1 GiB is far beyond any run
	// maxOptimSlots bounds the optimizer's buffers per parameter (Adam and LAMB
	// keep two).
	maxOptimSlots = 4
	// compressorStateFactor bounds a worker's compressor state in multiples of
	// the parameter count: DGC keeps v and u, PowerSGD a residual and Q, each at
	// most the size of the compressed tensors. A compressor that declares a
	// larger state (compress.StateSizer) is held to what it declares instead
	// (layout.state).
	compressorStateFactor = 2
	// epochRecordMinBytes is the smallest encoded EpochResult: the kind's
	// length, seven 8-byte numbers and two presence bytes (four in format 4;
	// the bound holds for every format read).
	epochRecordMinBytes = 4 + 7*8 + 2
)

// encodeCheckpoint writes c in format 6 (checkpointFormat) to w. It first checks that the
// position fields would load back (decodeMeta), so a bad value is refused when
// the checkpoint is written rather than when a run wants to resume from it.
func encodeCheckpoint(w io.Writer, c *checkpoint) error {
	var meta bytes.Buffer
	me := &encoder{w: &meta}
	encodeMeta(me, c)
	if me.err != nil {
		return me.err
	}
	if meta.Len() > maxMetaBytes {
		return fmt.Errorf("%d bytes of position and records, more than the %d a checkpoint may hold", meta.Len(), maxMetaBytes)
	}
	if _, err := decodeMeta(meta.Bytes(), checkpointFormat); err != nil {
		return fmt.Errorf("would not load back: %w", err)
	}
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	e := &encoder{w: bw}
	e.write([]byte(checkpointMagic + checkpointFormat))
	e.u32(uint32(meta.Len()))
	e.write(meta.Bytes())
	encodeBody(e, c)
	if e.err != nil {
		return e.err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

func encodeMeta(e *encoder, c *checkpoint) { encodeMetaAs(e, c, checkpointFormat) }

// encodeMetaAs writes the meta section as format (checkpointFormat, or an
// older one for the tests that read older files) lays it out.
func encodeMetaAs(e *encoder, c *checkpoint, format string) {
	e.str(c.Version)
	e.str(c.Model)
	e.int(c.Epoch)
	e.int(c.GlobalStep)
	e.int(c.StepInEpoch)
	e.f64(c.LossSum)
	e.f64(c.EpochSeconds)
	e.f64(c.Elapsed)
	e.i64(c.Samples)
	e.i64(c.MetricsOffset)
	e.str(c.DataDigest)
	e.count(len(c.Config))
	for _, k := range slices.Sorted(maps.Keys(c.Config)) {
		e.str(k)
		e.str(c.Config[k])
	}
	e.count(len(c.Epochs))
	for _, r := range c.Epochs {
		e.str(r.Kind)
		e.int(r.Epoch)
		e.int(r.Step)
		e.f64(r.LR)
		e.f64(r.TrainLoss)
		e.f64(r.TestLoss)
		e.optF64(r.TestAccuracy)
		e.optF64(r.ValBPC)
		if hasValidation(format) {
			e.optF64(r.ValLoss)
			e.optF64(r.ValAccuracy)
		}
		e.f64(r.Seconds)
		e.f64(r.SamplesPerSecond)
		if hasPS(format) {
			e.int(r.PSPushes)
			e.optF64(r.PSMeanStaleness)
			var worst *float64
			if r.PSMaxStaleness != nil {
				w := float64(*r.PSMaxStaleness)
				worst = &w
			}
			e.optF64(worst)
		}
		if hasEvalSeconds(format) {
			e.f64(r.EvalSeconds)
		}
	}
}

func encodeBody(e *encoder, c *checkpoint) {
	e.count(len(c.ParamNames))
	for _, n := range c.ParamNames {
		e.str(n)
	}
	e.floats(c.Params)
	e.count(len(c.BufferNames))
	for _, n := range c.BufferNames {
		e.str(n)
	}
	e.count(len(c.Buffers))
	for _, b := range c.Buffers {
		e.floats(b)
	}
	e.count(len(c.ReplicaBuffers))
	for _, set := range c.ReplicaBuffers {
		e.count(len(set))
		for _, b := range set {
			e.floats(b)
		}
	}
	e.i64(c.Optim.Step)
	e.floatMap(c.Optim.Buffers)
	e.count(len(c.Workers))
	for _, w := range c.Workers {
		encodeWorker(e, w)
	}
}

func encodeWorker(e *encoder, w workerState) {
	e.floatMap(w.Compressor)
	t := w.Traffic
	for _, v := range []int64{t.Steps, t.SteadySteps, t.DenseStep, t.Wire, t.Dense, t.SteadyWire, t.SteadyDense} {
		e.i64(v)
	}
	for _, m := range []map[string]int64{t.WireByKind, t.DenseByKind} {
		e.count(len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			e.str(k)
			e.i64(m[k])
		}
	}
	e.count(len(t.SteadyRoundWire))
	for _, v := range t.SteadyRoundWire {
		e.i64(v)
	}
}

// encodeWorkerState is one worker's exchange state as sent between processes.
func encodeWorkerState(w workerState) []byte {
	var buf bytes.Buffer
	e := &encoder{w: &buf}
	encodeWorker(e, w)
	if e.err != nil {
		// Only an oversized string or slice fails, which a worker never holds.
		panic(e.err)
	}
	return buf.Bytes()
}

// decodeWorkerState decodes encodeWorkerState's bytes from another process,
// within the bounds of want.
func decodeWorkerState(b []byte, want layout) (workerState, error) {
	d := &decoder{b: b}
	w := d.worker("worker state", want)
	d.end("worker state")
	if d.err != nil {
		return workerState{}, d.err
	}
	return w, nil
}

// decodeCheckpoint verifies and decodes a whole checkpoint file.
func decodeCheckpoint(raw []byte, want layout) (*checkpoint, error) {
	meta, body, err := splitCheckpoint(raw)
	if err != nil {
		return nil, err
	}
	format := formatOf(raw)
	c, err := decodeMeta(meta, format)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: body, format: format}
	d.body(c, want)
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// checkHeader checks the magic and the format version at the start of a file.
func checkHeader(head []byte) error {
	n := len(checkpointMagic)
	if len(head) < n && strings.HasPrefix(checkpointMagic, string(head)) {
		return &damagedError{fmt.Sprintf("corrupt or truncated (%d bytes, cut short in the header)", len(head))}
	}
	if len(head) < n || string(head[:n]) != checkpointMagic {
		return &damagedError{fmt.Sprintf("not a gradwire checkpoint (expected it to start with %q)", checkpointMagic)}
	}
	if len(head) < n+len(checkpointFormat) {
		return &damagedError{"corrupt or truncated (cut short in the header)"}
	}
	switch v := string(head[n : n+len(checkpointFormat)]); v {
	case checkpointFormat, format5, format4, format3, format2:
		return nil
	case gobFormat:
		return fmt.Errorf("written by an older version of gradwire (checkpoint format %s); this version reads format %s: start the run afresh or finish it with the version that wrote it",
			v, checkpointFormat)
	default:
		return fmt.Errorf("checkpoint format %q, this version of gradwire reads format %s (written by a newer version?)", v, checkpointFormat)
	}
}

// splitCheckpoint checks the header and the CRC and returns the meta and
// body sections.
func splitCheckpoint(raw []byte) (meta, body []byte, err error) {
	if err := checkHeader(raw); err != nil {
		return nil, nil, err
	}
	if len(raw) < headerBytes+4 {
		return nil, nil, &damagedError{fmt.Sprintf("corrupt or truncated (%d bytes, shorter than the %d-byte header and CRC)", len(raw), headerBytes+4)}
	}
	data := raw[:len(raw)-4]
	want := binary.LittleEndian.Uint32(raw[len(raw)-4:])
	if got := crc32.ChecksumIEEE(data); got != want {
		return nil, nil, &damagedError{fmt.Sprintf("corrupt or truncated (CRC-32 %08x, expected %08x)", got, want)}
	}
	n := binary.LittleEndian.Uint32(data[headerBytes-4:])
	if rest := len(data) - headerBytes; int64(n) > int64(rest) || n > maxMetaBytes {
		return nil, nil, fmt.Errorf("field meta length: %d bytes, expected at most %d (the bytes left) and %d", n, rest, maxMetaBytes)
	}
	return data[headerBytes : headerBytes+int(n)], data[headerBytes+int(n):], nil
}

// formatOf is the format version of a file whose header checkHeader accepted.
func formatOf(head []byte) string {
	return string(head[len(checkpointMagic) : len(checkpointMagic)+len(checkpointFormat)])
}

// hasValidation reports whether format's epoch records hold the validation
// figures (format 4 on).
func hasValidation(format string) bool { return format != format2 && format != format3 }

// hasPS reports whether format's epoch records hold the asynchronous
// parameter server's figures (format 5 on).
func hasPS(format string) bool { return hasValidation(format) && format != format4 }

// hasEvalSeconds reports whether format's epoch records hold the
// evaluation's wall-clock time (format 6 on).
func hasEvalSeconds(format string) bool { return hasPS(format) && format != format5 }

// decodeMeta decodes and range-checks the meta section of a file of format
// (as in its header): position, records, config. It needs no layout.
func decodeMeta(b []byte, format string) (*checkpoint, error) {
	d := &decoder{b: b, format: format}
	c := &checkpoint{}
	c.Version = d.str("Version", maxNameBytes)
	c.Model = d.str("Model", maxNameBytes)
	c.Epoch = d.nonNegInt("Epoch")
	c.GlobalStep = d.nonNegInt("GlobalStep")
	c.StepInEpoch = d.nonNegInt("StepInEpoch")
	if d.err == nil && c.StepInEpoch > c.GlobalStep {
		d.failf("StepInEpoch", "%d, expected at most GlobalStep (%d)", c.StepInEpoch, c.GlobalStep)
	}
	// A diverged run's loss is recorded as it is: LossSum may be any number.
	c.LossSum = d.f64("LossSum")
	c.EpochSeconds = d.seconds("EpochSeconds")
	c.Elapsed = d.seconds("Elapsed")
	c.Samples = d.nonNeg64("Samples")
	c.MetricsOffset = d.nonNeg64("MetricsOffset")
	if d.err == nil && c.MetricsOffset > maxMetricsOffset {
		d.failf("MetricsOffset", "%d, expected at most %d (1 GiB)", c.MetricsOffset, maxMetricsOffset)
	}
	c.DataDigest = d.str("DataDigest", maxNameBytes)
	n := d.count("Config", 8, maxConfigKeys)
	if n > 0 {
		c.Config = make(map[string]string, n)
	}
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str("Config key", maxNameBytes)
		d.ascending("Config", i, prev, k)
		prev = k
		c.Config[k] = d.str(fmt.Sprintf("Config[%q]", k), maxValueBytes)
	}
	n = d.count("Epochs", epochRecordMinBytes, math.MaxInt)
	if d.err == nil && n != c.Epoch {
		d.failf("Epochs", "%d records, expected one for each of the %d completed epochs (field Epoch)", n, c.Epoch)
	}
	if d.err == nil && n > 0 {
		c.Epochs = make([]EpochResult, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		// The prefix names the record in an error without building a name
		// for every field of every record.
		d.prefix = fmt.Sprintf("Epochs[%d].", i)
		r := &c.Epochs[i]
		r.Kind = d.str("Kind", maxNameBytes)
		r.Epoch = d.nonNegInt("Epoch")
		if d.err == nil && r.Epoch != i+1 {
			d.failf("Epoch", "%d, expected %d (records are one per epoch, in order)", r.Epoch, i+1)
		}
		r.Step = d.nonNegInt("Step")
		if d.err == nil && r.Step > c.GlobalStep {
			d.failf("Step", "%d, expected at most GlobalStep (%d)", r.Step, c.GlobalStep)
		}
		r.LR = d.f64("LR")
		r.TrainLoss = d.f64("TrainLoss")
		r.TestLoss = d.f64("TestLoss")
		r.TestAccuracy = d.optF64("TestAccuracy")
		r.ValBPC = d.optF64("ValBPC")
		if hasValidation(format) {
			r.ValLoss = d.optF64("ValLoss")
			r.ValAccuracy = d.optF64("ValAccuracy")
		}
		r.Seconds = d.seconds("Seconds")
		r.SamplesPerSecond = d.f64("SamplesPerSecond")
		if hasPS(format) {
			r.PSPushes = d.nonNegInt("PSPushes")
			r.PSMeanStaleness = d.optF64("PSMeanStaleness")
			if m := r.PSMeanStaleness; m != nil && !(*m >= 0) {
				d.failf("PSMeanStaleness", "%v, expected a mean >= 0", *m)
			}
			if w := d.optF64("PSMaxStaleness"); w != nil {
				if *w < 0 || *w != math.Trunc(*w) || *w > math.MaxInt32 {
					d.failf("PSMaxStaleness", "%v, expected a whole number of updates >= 0", *w)
				} else {
					v := int(*w)
					r.PSMaxStaleness = &v
				}
			}
		}
		if hasEvalSeconds(format) {
			r.EvalSeconds = d.seconds("EvalSeconds")
		}
	}
	d.prefix = ""
	d.end("meta")
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// body decodes the tensors and state into c, checking them against want.
func (d *decoder) body(c *checkpoint, want layout) {
	if d.err == nil && c.Model != want.model {
		d.failf("Model", "%q, but the config builds %q", c.Model, want.model)
	}
	c.ParamNames = d.names("ParamNames", want.params, "parameter tensor")
	c.Params = d.floatsExact("Params", want.numParams, "the model's parameter count")
	c.BufferNames = d.names("BufferNames", want.buffers, "model buffer")
	c.Buffers = d.buffers("Buffers", want.buffers)
	n := d.count("ReplicaBuffers", 4, want.workers)
	if d.err == nil && n > 0 {
		c.ReplicaBuffers = make([][][]float32, n)
	}
	for r := 0; r < n && d.err == nil; r++ {
		c.ReplicaBuffers[r] = d.buffers(fmt.Sprintf("ReplicaBuffers[%d]", r), want.buffers)
	}
	c.Optim.Step = d.nonNeg64("Optim.Step")
	c.Optim.Buffers = d.optimBuffers(want)
	d.exact("Workers", want.workers, "the configured number of logical workers (dist.workers)")
	if d.err == nil && want.workers > 0 {
		c.Workers = make([]workerState, want.workers)
	}
	for i := 0; i < want.workers && d.err == nil; i++ {
		c.Workers[i] = d.worker(fmt.Sprintf("Workers[%d]", i), want)
	}
	d.end("body")
}

// names decodes a list of names that must be those of want, in order.
func (d *decoder) names(field string, want []tensorSize, what string) []string {
	d.exact(field, len(want), "the model's number of "+what+"s")
	if d.err != nil {
		return nil
	}
	out := make([]string, len(want))
	for i, t := range want {
		out[i] = d.str(fmt.Sprintf("%s[%d]", field, i), maxNameBytes)
		if d.err == nil && out[i] != t.name {
			d.failf(fmt.Sprintf("%s[%d]", field, i), "%q, expected %q (the model's %s %d)", out[i], t.name, what, i)
		}
	}
	return out
}

// buffers decodes one value slice per model buffer, each of the buffer's size.
func (d *decoder) buffers(field string, want []tensorSize) [][]float32 {
	d.exact(field, len(want), "the model's number of buffers")
	if d.err != nil || len(want) == 0 {
		return nil
	}
	out := make([][]float32, len(want))
	for i, t := range want {
		out[i] = d.floatsExact(fmt.Sprintf("%s[%d]", field, i), t.size, "the size of buffer "+t.name)
	}
	return out
}

// optimBuffers decodes the optimizer's buffers, keyed "<slot>/<param name>":
// each parameter's buffers have its size (per element) or one value (per tensor).
func (d *decoder) optimBuffers(want layout) map[string][]float32 {
	n := d.count("Optim.Buffers", 8, maxOptimSlots*len(want.params))
	if d.err != nil || n == 0 {
		return nil
	}
	out := make(map[string][]float32, n)
	total, budget := 0, maxOptimSlots*want.numParams
	prev := ""
	for i := range n {
		k := d.str("Optim.Buffers key", maxNameBytes)
		d.ascending("Optim.Buffers", i, prev, k)
		prev = k
		field := fmt.Sprintf("Optim.Buffers[%q]", k)
		slot, name, ok := strings.Cut(k, "/")
		size, known := want.paramSize[name]
		if d.err == nil && (!ok || slot == "" || !known) {
			d.failf(field, "expected a key <slot>/<parameter name> naming one of the model's %d parameter tensors", len(want.params))
		}
		m := int(d.u32(field))
		if d.err == nil && m != size && m != 1 {
			d.failf(field, "%d values, expected %d (the size of parameter %s) or 1", m, size, name)
		}
		if total += m; d.err == nil && total > budget {
			d.failf(field, "the optimizer's buffers hold more than %d values (%d x the parameter count)", budget, maxOptimSlots)
		}
		out[k] = d.floatsN(field, m)
		if d.err != nil {
			return nil
		}
	}
	return out
}

// worker decodes one worker's exchange state.
func (d *decoder) worker(field string, want layout) workerState {
	var w workerState
	b := want.state
	n := d.count(field+".Compressor", 8, b.buffers)
	if d.err == nil && n > 0 {
		w.Compressor = make(map[string][]float32, n)
	}
	total := 0
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str(field+".Compressor key", maxNameBytes)
		d.ascending(field+".Compressor", i, prev, k)
		prev = k
		f := fmt.Sprintf("%s.Compressor[%q]", field, k)
		m := int(d.u32(f))
		if d.err == nil && (m > b.buffer || m > b.values-total) {
			d.failf(f, "%d values, expected at most %s", m, b.limits)
		}
		total += m
		w.Compressor[k] = d.floatsN(f, m)
	}
	t := &w.Traffic
	for _, v := range []struct {
		name string
		dst  *int64
	}{{"Steps", &t.Steps}, {"SteadySteps", &t.SteadySteps}, {"DenseStep", &t.DenseStep}, {"Wire", &t.Wire},
		{"Dense", &t.Dense}, {"SteadyWire", &t.SteadyWire}, {"SteadyDense", &t.SteadyDense}} {
		*v.dst = d.nonNeg64(field + ".Traffic." + v.name)
	}
	t.WireByKind = d.kindMap(field + ".Traffic.WireByKind")
	t.DenseByKind = d.kindMap(field + ".Traffic.DenseByKind")
	if d.format != format2 {
		if n := d.count(field+".Traffic.SteadyRoundWire", 8, maxRounds); n > 0 {
			t.SteadyRoundWire = make([]int64, n)
			for r := range t.SteadyRoundWire {
				t.SteadyRoundWire[r] = d.nonNeg64(fmt.Sprintf("%s.Traffic.SteadyRoundWire[%d]", field, r))
			}
		}
	}
	if d.err != nil {
		return workerState{}
	}
	return w
}

// kindMap decodes a per-layer-kind byte count. It is never nil, as in a fresh
// compress.Exchange, so that accounting can go on adding to it.
func (d *decoder) kindMap(field string) map[string]int64 {
	n := d.count(field, 12, maxKinds)
	if d.err != nil {
		return nil
	}
	out := make(map[string]int64, n)
	prev := ""
	for i := range n {
		k := d.str(field+" key", maxNameBytes)
		d.ascending(field, i, prev, k)
		prev = k
		out[k] = d.nonNeg64(fmt.Sprintf("%s[%q]", field, k))
	}
	return out
}

// encoder writes the format's fields; the first write error sticks.
type encoder struct {
	w   io.Writer
	err error
	buf [4096]byte
}

func (e *encoder) write(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u32(v uint32) { e.write(binary.LittleEndian.AppendUint32(e.buf[:0], v)) }
func (e *encoder) i64(v int64)  { e.write(binary.LittleEndian.AppendUint64(e.buf[:0], uint64(v))) }
func (e *encoder) int(v int)    { e.i64(int64(v)) }
func (e *encoder) f64(v float64) {
	e.write(binary.LittleEndian.AppendUint64(e.buf[:0], math.Float64bits(v)))
}

func (e *encoder) count(n int) {
	if uint64(n) > math.MaxUint32 {
		if e.err == nil {
			e.err = fmt.Errorf("%d elements, more than a checkpoint can count", n)
		}
		return
	}
	e.u32(uint32(n))
}

func (e *encoder) str(s string) {
	if len(s) > maxValueBytes {
		if e.err == nil {
			e.err = fmt.Errorf("string of %d bytes (%.40q...), more than the %d a checkpoint may hold", len(s), s, maxValueBytes)
		}
		return
	}
	e.count(len(s))
	e.write([]byte(s))
}

func (e *encoder) optF64(v *float64) {
	if v == nil {
		e.write([]byte{0})
		return
	}
	e.write([]byte{1})
	e.f64(*v)
}

func (e *encoder) floats(v []float32) {
	e.count(len(v))
	for len(v) > 0 && e.err == nil {
		chunk := v[:min(len(v), len(e.buf)/4)]
		for i, x := range chunk {
			binary.LittleEndian.PutUint32(e.buf[4*i:], math.Float32bits(x))
		}
		e.write(e.buf[:4*len(chunk)])
		v = v[len(chunk):]
	}
}

func (e *encoder) floatMap(m map[string][]float32) {
	e.count(len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.str(k)
		e.floats(m[k])
	}
}

// decoder reads the format's fields from b. The first failure sticks and names
// the field; later reads return zero values, so decoding code reads straight
// through and checks d.err where it would allocate or index.
type decoder struct {
	b      []byte
	off    int
	err    error
	prefix string // put before field names in errors
	format string // the file's format version; "" for worker state sent between processes (this version's)
}

func (d *decoder) failf(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("field %s%s: %s", d.prefix, field, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) left() int { return len(d.b) - d.off }

// take returns the next n bytes (n >= 0), or nil when fewer are left.
func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.left() {
		d.failf(field, "needs %d bytes, only %d are left (expected a complete checkpoint)", n, d.left())
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u32(field string) uint32 {
	if p := d.take(field, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if p := d.take(field, 8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) f64(field string) float64 { return math.Float64frombits(d.u64(field)) }

func (d *decoder) nonNeg64(field string) int64 {
	v := int64(d.u64(field))
	if v < 0 {
		d.failf(field, "%d, expected a count >= 0", v)
		return 0
	}
	return v
}

func (d *decoder) nonNegInt(field string) int {
	v := d.nonNeg64(field)
	if v > math.MaxInt {
		d.failf(field, "%d, expected at most %d", v, math.MaxInt)
		return 0
	}
	return int(v)
}

// seconds reads a duration: finite and >= 0.
func (d *decoder) seconds(field string) float64 {
	v := d.f64(field)
	if !(v >= 0) || math.IsInf(v, 0) {
		d.failf(field, "%v, expected a finite number of seconds >= 0", v)
		return 0
	}
	return v
}

func (d *decoder) optF64(field string) *float64 {
	p := d.take(field, 1)
	switch {
	case p == nil || p[0] == 0:
		return nil
	case p[0] != 1:
		d.failf(field, "presence byte %d, expected 0 or 1", p[0])
		return nil
	}
	v := d.f64(field)
	return &v
}

// count reads the number of entries of field, each at least elemBytes long: at
// most limit, and no more than the bytes left can hold.
func (d *decoder) count(field string, elemBytes, limit int) int {
	u := d.u32(field)
	if d.err != nil {
		return 0
	}
	if uint64(u) > uint64(limit) { // compared before the conversion: a 32-bit int wraps
		d.failf(field, "%d entries, expected at most %d", u, limit)
		return 0
	}
	n := int(u)
	if n > d.left()/elemBytes {
		d.failf(field, "%d entries of at least %d bytes, only %d bytes are left (expected a complete checkpoint)", n, elemBytes, d.left())
		return 0
	}
	return n
}

// exact reads a count that must equal want.
func (d *decoder) exact(field string, want int, what string) {
	if u := d.u32(field); d.err == nil && uint64(u) != uint64(want) {
		d.failf(field, "%d entries, expected %d (%s)", u, want, what)
	}
}

func (d *decoder) str(field string, limit int) string {
	n := d.count(field, 1, limit)
	return string(d.take(field, n))
}

// floatsN reads n float32 values (n already read and checked against the layout).
func (d *decoder) floatsN(field string, n int) []float32 {
	if d.err == nil && n > d.left()/4 {
		d.failf(field, "%d values, only %d bytes are left (expected a complete checkpoint)", n, d.left())
	}
	p := d.take(field, 4*n)
	if p == nil || n == 0 {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return out
}

// floatsExact reads a float32 slice whose length must be want.
func (d *decoder) floatsExact(field string, want int, what string) []float32 {
	n := int(d.u32(field))
	if d.err == nil && n != want {
		d.failf(field, "%d values, expected %d (%s)", n, want, what)
	}
	return d.floatsN(field, n)
}

// ascending checks that map keys come in strictly ascending order, which
// rules out duplicates and gives each map one encoding.
func (d *decoder) ascending(field string, i int, prev, k string) {
	if d.err == nil && i > 0 && k <= prev {
		d.failf(field, "key %q after %q, expected keys in strictly ascending order (no duplicates)", k, prev)
	}
}

// end checks that nothing follows the last field of a section.
func (d *decoder) end(section string) {
	if d.err == nil && d.left() != 0 {
		d.err = fmt.Errorf("%s: %d bytes after the last field, expected none", section, d.left())
	}
}
