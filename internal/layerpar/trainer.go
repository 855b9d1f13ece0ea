package layerpar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Stage is one stage's sub-problem solver: *models.Stage, or a toy in tests.
// Step runs forward and backward on one batch and returns 0.5 mean ||F - T||^2
// (inner stages, target T) or the mean loss on the labels y (last stage),
// leaving the parameter gradients in Params()[i].Grad, F in Output and the
// gradient with respect to the input in InputGrad (nil for the first stage).
type Stage interface {
	Step(x, target []float32, y []int32) (float64, error)
	Output() []float32
	InputGrad() []float32
	Params() []optim.Param
	Buffers() []models.Buffer
	Batch() int
	InShape() []int
	OutShape() []int
}

var _ Stage = (*models.Stage)(nil)

// Data is what the trainer reads of the training split.
type Data interface {
	Len() int
	Fill(idx []int, x []float32, y []int32)
}

// Traffic counts the bytes the method moves between stages, as point-to-point
// messages between neighbours (each counted once, at the sender).
type Traffic struct {
	// InitBytes: the serial forward pass that initialises the auxiliary
	// variables (v_k from stage k to stage k+1).
	InitBytes int64 `json:"init_bytes"`
	// AuxBytes: the rounds' boundary tensors, D g_{k+1} from stage k+1 to
	// stage k and the updated v_k back.
	AuxBytes int64 `json:"aux_bytes"`
	// ParamBytes: stage parameters and BatchNorm buffers sent to the
	// process that evaluates (stage 0's) after each round, and to every
	// stage before a serial phase.
	ParamBytes int64 `json:"param_bytes"`
}

// RoundStats is what one parallel round measured.
type RoundStats struct {
	Rho          float64
	Loss         float64   // the last stage's mean training loss
	StageLoss    []float64 // each stage's mean sub-problem value
	Residual     float64   // mean over examples and boundaries of ||v - D F||^2 before the u-step
	StageSeconds []float64 // each stage's sub-problem compute time
	Seconds      float64   // the round's wall time (sub-problems, u-step, exchanges)
	AuxBytes     int64
}

// Trainer runs the parallel rounds over K stages. In one process it owns
// every stage and runs them as goroutines; over MPI (world non-nil, one rank
// per stage) rank k owns stage k and the boundary state is exchanged with
// all-gathers.
type Trainer struct {
	cfg      Config
	K        int
	stages   []Stage // nil where another process owns the stage
	opts     []optim.Optimizer
	aux      []*Aux // boundaries 0..K-2: aux[k] is stage k's output, stage k+1's input
	data     Data
	dataSize int // one example's input values
	batch    int
	world    dist.Collective
	clip     float64

	Traffic Traffic
	round   int // parallel rounds done
}

// NewTrainer builds a trainer over stages (len K; entries other processes
// own are nil), their optimizers (same indexing), the training data, and
// world (nil in one process; else rank k owns stage k). clip > 0 clips each
// stage's gradient to that global norm.
func NewTrainer(cfg Config, stages []Stage, opts []optim.Optimizer, data Data, dataSize int, boundaries [][]int, world dist.Collective, clip float64) (*Trainer, error) {
	K := len(stages)
	t := &Trainer{cfg: cfg, K: K, stages: stages, opts: opts, data: data, dataSize: dataSize, world: world, clip: clip}
	if len(boundaries) != K-1 {
		return nil, fmt.Errorf("layer-parallel: %d boundary shapes for %d stages, expected %d", len(boundaries), K, K-1)
	}
	if world != nil && world.Size() != K {
		return nil, fmt.Errorf("dist.workers: %d stages need %d MPI ranks, one per stage; the job has %d (launch with mpirun -np %d)", K, K, world.Size(), K)
	}
	var any Stage
	for k, s := range stages {
		if s == nil {
			continue
		}
		if !t.owns(k) {
			return nil, fmt.Errorf("layer-parallel: stage %d given to the process of rank %d", k, world.Rank())
		}
		any = s
	}
	if any == nil {
		return nil, errors.New("layer-parallel: no stage to run")
	}
	t.batch = any.Batch()
	n := data.Len()
	// Every process holds every boundary's state: the owner (stage k)
	// updates it, the others receive it.
	for k := 0; k < K-1; k++ {
		shape := boundaries[k]
		if len(shape) != 3 {
			return nil, fmt.Errorf("layer-parallel: boundary %d has shape %v, expected (C, H, W)", k, shape)
		}
		s := min(cfg.Downsample, shape[1], shape[2])
		a, err := NewAux(Filter{C: shape[0], H: shape[1], W: shape[2], S: max(s, 1)}, n, cfg.AuxFP16, cfg.Method == MethodAL)
		if err != nil {
			return nil, err
		}
		t.aux = append(t.aux, a)
	}
	return t, nil
}

// Objective is the objective of the current round (the same for every
// boundary k; k is kept for the call sites' clarity).
func (t *Trainer) Objective(k int) Objective {
	return Objective{Method: t.cfg.Method, Rho: t.cfg.RhoAt(t.round), UCurvature: t.cfg.UCurvature}
}

func (t *Trainer) owns(k int) bool { return t.world == nil || t.world.Rank() == k }

// Aux is boundary k's state (k in [0, K-2]).
func (t *Trainer) Aux(k int) *Aux { return t.aux[k] }

// Rounds is the number of parallel rounds done.
func (t *Trainer) Rounds() int { return t.round }

// stageBuffers are one stage's batch buffers.
type stageBuffers struct {
	x, target, scratch []float32
	y                  []int32
	xData              []float32 // the first stage's input read from the data
}

func (t *Trainer) buffers(k int) *stageBuffers {
	st := t.stages[k]
	b := t.batch
	in, out := numel(st.InShape()), numel(st.OutShape())
	sb := &stageBuffers{x: make([]float32, b*in), y: make([]int32, b)}
	if k < t.K-1 {
		sb.target = make([]float32, b*out)
		sb.scratch = make([]float32, t.aux[k].F.Size())
	}
	if k > 0 {
		sb.scratch = make([]float32, max(len(sb.scratch), t.aux[k-1].F.Size()))
	}
	return sb
}

// fillInput writes stage k's input for the examples idx: the data for the
// first stage, U v_{k-1} for the others; and the labels for the last.
func (t *Trainer) fillInput(k int, idx []int, sb *stageBuffers) {
	if k == 0 || k == t.K-1 {
		if k == 0 {
			t.data.Fill(idx, sb.x, sb.y)
		} else {
			if sb.xData == nil {
				sb.xData = make([]float32, len(idx)*t.dataSize)
			}
			t.data.Fill(idx, sb.xData, sb.y)
		}
	}
	if k > 0 {
		t.aux[k-1].Input(idx, sb.x, sb.scratch)
	}
}

// Init sets every auxiliary variable to D F_k(u_{k-1}) by one serial forward
// pass (stage after stage, each over all examples in the order perm), and the
// multipliers to zero.
func (t *Trainer) Init(perm []int) error {
	steps := len(perm) / t.batch
	for k := 0; k < t.K-1; k++ {
		a := t.aux[k]
		if t.owns(k) {
			st := t.stages[k]
			sb := t.buffers(k)
			v := make([]float32, a.F.Size())
			for s := range steps + 1 {
				idx := t.batchIdx(perm, s)
				if idx == nil {
					break
				}
				t.fillInput(k, idx, sb)
				if _, err := st.Step(sb.x, sb.target, nil); err != nil {
					return fmt.Errorf("initial forward pass, stage %d: %w", k, err)
				}
				a.RecordF(idx, st.Output())
				for _, i := range idx {
					copy(v, a.DF(i))
					a.SetV(i, v)
				}
			}
			if a.mu != nil {
				clear(a.mu)
			}
		}
		if err := t.syncV(k); err != nil {
			return err
		}
		t.Traffic.InitBytes += int64(a.N) * a.ExampleBytes()
	}
	return nil
}

// batchIdx is batch s of perm; the last, partial batch is filled up from the
// start of perm, so that every example is visited in each pass. nil past the end.
func (t *Trainer) batchIdx(perm []int, s int) []int {
	lo := s * t.batch
	if lo >= len(perm) {
		return nil
	}
	if lo+t.batch <= len(perm) {
		return perm[lo : lo+t.batch]
	}
	idx := append([]int(nil), perm[lo:]...)
	for i := 0; len(idx) < t.batch; i++ {
		idx = append(idx, perm[i%len(perm)])
	}
	return idx
}

// Round runs one parallel round over the examples in the order perm: every
// owned stage solves its sub-problem for one epoch of SGD steps (lr(step)
// gives the learning rate of the round's step-th batch) while recording, for
// each example, D F_k (stage k) and D g_k (stage k > 0, the gradient of its
// part of J with respect to its input) at the weights its batch saw; then the
// u-step updates every v_k (owned by stage k), the multipliers follow (AL),
// and the boundaries are exchanged. The penalty weight is RhoAt(round).
func (t *Trainer) Round(perm []int, lr func(step int) float64) (RoundStats, error) {
	if t.world != nil {
		// Every rank starts the round together, so that its time is the
		// round's (rank 0 evaluates between rounds while the others wait).
		if err := t.world.Barrier(); err != nil {
			return RoundStats{}, err
		}
	}
	t0 := time.Now()
	stats := RoundStats{Rho: t.cfg.RhoAt(t.round), StageLoss: make([]float64, t.K), StageSeconds: make([]float64, t.K)}
	steps := len(perm) / t.batch
	if steps == 0 {
		return stats, fmt.Errorf("layer-parallel: %d examples, fewer than one batch of %d", len(perm), t.batch)
	}
	var wg sync.WaitGroup
	errs := make([]error, t.K)
	for k := range t.K {
		if t.stages[k] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := time.Now()
			stats.StageLoss[k], errs[k] = t.subproblem(k, t.Objective(k), perm, steps, lr)
			stats.StageSeconds[k] = time.Since(ts).Seconds()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return stats, err
	}
	if err := t.syncStats(&stats); err != nil {
		return stats, err
	}
	// The per-example input gradients go to the boundary owners.
	for k := 0; k < t.K-1; k++ {
		if err := t.syncDG(k); err != nil {
			return stats, err
		}
	}
	// u-step and multiplier step, each boundary on its owner, boundaries in parallel.
	res := make([]float64, t.K-1)
	for k := 0; k < t.K-1; k++ {
		if !t.owns(k) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[k] = t.uStep(k, t.Objective(k), perm[:steps*t.batch])
		}()
	}
	wg.Wait()
	for k := 0; k < t.K-1; k++ {
		if err := t.syncV(k); err != nil {
			return stats, err
		}
		a := t.aux[k]
		b := 2 * int64(steps*t.batch) * a.ExampleBytes()
		stats.AuxBytes += b
	}
	if t.world != nil {
		buf := make([]float32, len(res))
		for k, r := range res {
			if t.owns(k) {
				buf[k] = float32(r)
			}
		}
		if err := t.world.AllReduce(buf); err != nil {
			return stats, err
		}
		for k := range res {
			res[k] = float64(buf[k])
		}
	}
	for _, r := range res {
		stats.Residual += r / float64(max(1, steps*t.batch*(t.K-1)))
	}
	stats.Loss = stats.StageLoss[t.K-1]
	t.Traffic.AuxBytes += stats.AuxBytes
	t.round++
	stats.Seconds = time.Since(t0).Seconds()
	return stats, nil
}

// subproblem is stage k's epoch of its sub-problem; it returns the mean value.
func (t *Trainer) subproblem(k int, obj Objective, perm []int, steps int, lr func(int) float64) (float64, error) {
	st := t.stages[k]
	sb := t.buffers(k)
	last := k == t.K-1
	scale := obj.InputGradScale(t.batch, last)
	var sum float64
	for s := range steps {
		idx := perm[s*t.batch : (s+1)*t.batch]
		t.fillInput(k, idx, sb)
		var y []int32
		if last {
			y = sb.y
		} else {
			t.aux[k].Target(idx, obj.Rho, sb.target, sb.scratch)
		}
		v, err := obj.StageStep(st, last, sb.x, sb.target, y)
		if err != nil {
			return 0, fmt.Errorf("stage %d step %d: %w", k, s+1, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("stage %d step %d: sub-problem value %v", k, s+1, v)
		}
		sum += v
		if !last {
			t.aux[k].RecordF(idx, st.Output())
		}
		if k > 0 {
			t.aux[k-1].RecordG(idx, st.InputGrad(), scale)
		}
		if t.clip > 0 {
			optim.ClipGlobalNorm(st.Params(), t.clip)
		}
		if err := t.opts[k].Step(st.Params(), lr(s)); err != nil {
			return 0, err
		}
	}
	return sum / float64(steps), nil
}

// uStep updates boundary k's auxiliary variables (and multipliers) for the
// examples visited; it returns the sum of the squared residuals before the step.
func (t *Trainer) uStep(k int, obj Objective, visited []int) float64 {
	a := t.aux[k]
	v := make([]float32, a.F.Size())
	var res float64
	for _, i := range visited {
		a.V(i, v)
		res += obj.UStep(v, a.DF(i), a.DG(i), a.Mu(i))
		a.SetV(i, v)
		if mu := a.Mu(i); mu != nil {
			a.V(i, v) // the stored (possibly rounded) value
			obj.MultiplierStep(mu, v, a.DF(i))
		}
	}
	return res
}

// syncStats shares the stages' losses and times over MPI.
func (t *Trainer) syncStats(s *RoundStats) error {
	if t.world == nil {
		return nil
	}
	buf := make([]float32, 2*t.K)
	k := t.world.Rank()
	buf[k], buf[t.K+k] = float32(s.StageLoss[k]), float32(s.StageSeconds[k])
	if err := t.world.AllReduce(buf); err != nil {
		return err
	}
	for i := range t.K {
		s.StageLoss[i], s.StageSeconds[i] = float64(buf[i]), float64(buf[t.K+i])
	}
	return nil
}

// syncDG sends boundary k's D g (computed by stage k+1) to the other
// processes (its owner, stage k, needs it).
func (t *Trainer) syncDG(k int) error {
	if t.world == nil {
		return nil
	}
	a := t.aux[k]
	var payload []byte
	if t.world.Rank() == k+1 {
		payload = f32Bytes(a.dg)
	}
	all, err := t.world.AllGather(payload)
	if err != nil {
		return err
	}
	if t.world.Rank() != k+1 {
		copyBytesF32(a.dg, all[k+1])
	}
	return nil
}

// syncV sends boundary k's auxiliary variables from their owner (stage k)
// to the other processes.
func (t *Trainer) syncV(k int) error {
	if t.world == nil {
		return nil
	}
	a := t.aux[k]
	var payload []byte
	if t.world.Rank() == k {
		if a.fp16 {
			payload = u16Bytes(a.v16)
		} else {
			payload = f32Bytes(a.v32)
		}
	}
	all, err := t.world.AllGather(payload)
	if err != nil {
		return err
	}
	if t.world.Rank() != k {
		if a.fp16 {
			copy(u16Bytes(a.v16), all[k])
		} else {
			copyBytesF32(a.v32, all[k])
		}
	}
	return nil
}

// Export copies every stage's parameters and BatchNorm buffers into net (by
// name), gathering them from the other processes over MPI, and counts the
// bytes sent.
func (t *Trainer) Export(net *models.Net) error {
	if t.world == nil {
		for k, st := range t.stages {
			if err := models.CopyParams(net.Params(), st.Params(), false); err != nil {
				return fmt.Errorf("stage %d: %w", k, err)
			}
			if err := models.CopyBuffers(net.Buffers(), st.Buffers(), false); err != nil {
				return fmt.Errorf("stage %d: %w", k, err)
			}
			if k > 0 {
				t.Traffic.ParamBytes += stageBytes(st)
			}
		}
		return nil
	}
	k := t.world.Rank()
	st := t.stages[k]
	all, err := t.world.AllGather(encodeStage(st))
	if err != nil {
		return err
	}
	for r, b := range all {
		params, bufs, err := decodeStage(b)
		if err != nil {
			return fmt.Errorf("stage %d's parameters: %w", r, err)
		}
		if err := models.CopyParams(net.Params(), params, false); err != nil {
			return fmt.Errorf("stage %d: %w", r, err)
		}
		if err := models.CopyBuffers(net.Buffers(), bufs, false); err != nil {
			return fmt.Errorf("stage %d: %w", r, err)
		}
		if r > 0 {
			t.Traffic.ParamBytes += int64(len(b))
		}
	}
	return nil
}

// Import copies net's parameters and buffers into the owned stages (after
// a serial phase, which every process ran on the whole network).
func (t *Trainer) Import(net *models.Net) error {
	for k, st := range t.stages {
		if st == nil {
			continue
		}
		if err := models.CopyParams(st.Params(), net.Params(), true); err != nil {
			return fmt.Errorf("stage %d: %w", k, err)
		}
		if err := models.CopyBuffers(st.Buffers(), net.Buffers(), true); err != nil {
			return fmt.Errorf("stage %d: %w", k, err)
		}
	}
	return nil
}

// CountBroadcast adds the bytes of sending every stage's parameters to every
// other stage (before a serial phase, which needs the whole network on
// every process).
func (t *Trainer) CountBroadcast(stageParamBytes []int64) {
	for _, b := range stageParamBytes {
		t.Traffic.ParamBytes += b * int64(t.K-1)
	}
}

// StageParamBytes is each stage's parameters and buffers in bytes (4 each),
// for the stages this process holds (0 for the others).
func (t *Trainer) StageParamBytes() []int64 {
	out := make([]int64, t.K)
	for k, st := range t.stages {
		if st != nil {
			out[k] = stageBytes(st)
		}
	}
	return out
}

func stageBytes(st Stage) int64 {
	var n int64
	for _, p := range st.Params() {
		n += int64(len(p.Value)) * 4
	}
	for _, b := range st.Buffers() {
		n += int64(len(b.Value)) * 4
	}
	return n
}

// encodeStage writes a stage's parameters and buffers as (name, values) records.
func encodeStage(st Stage) []byte {
	var out []byte
	put := func(kind byte, name string, v []float32) {
		out = append(out, kind)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(name)))
		out = append(out, name...)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, f32Bytes(v)...)
	}
	for _, p := range st.Params() {
		put('p', p.Name, p.Value)
	}
	for _, b := range st.Buffers() {
		put('b', b.Name, b.Value)
	}
	return out
}

func decodeStage(b []byte) ([]optim.Param, []models.Buffer, error) {
	var params []optim.Param
	var bufs []models.Buffer
	for len(b) > 0 {
		if len(b) < 5 {
			return nil, nil, errors.New("truncated record")
		}
		kind, nl := b[0], int(binary.LittleEndian.Uint32(b[1:]))
		b = b[5:]
		if len(b) < nl+4 {
			return nil, nil, errors.New("truncated name")
		}
		name := string(b[:nl])
		n := int(binary.LittleEndian.Uint32(b[nl:]))
		b = b[nl+4:]
		if len(b) < 4*n {
			return nil, nil, errors.New("truncated values")
		}
		v := make([]float32, n)
		copyBytesF32(v, b[:4*n])
		b = b[4*n:]
		if kind == 'p' {
			params = append(params, optim.Param{Name: name, Value: v})
		} else {
			bufs = append(bufs, models.Buffer{Name: name, Value: v})
		}
	}
	return params, bufs, nil
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v))
}

func copyBytesF32(dst []float32, src []byte) {
	copy(f32Bytes(dst), src)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Calibrate times each owned stage alone (the others idle: stages one after
// another, separated by barriers over MPI) on `batches` batches of perm after
// one warm-up batch, without changing any parameter, and returns each stage's
// seconds per example (every stage's, over MPI).
func (t *Trainer) Calibrate(perm []int, batches int) ([]float64, error) {
	out := make([]float32, t.K)
	for k := range t.K {
		if t.world != nil {
			if err := t.world.Barrier(); err != nil {
				return nil, err
			}
		}
		st := t.stages[k]
		if st == nil {
			continue
		}
		sb := t.buffers(k)
		last := k == t.K-1
		obj := t.Objective(k)
		var t0 time.Time
		for s := 0; s <= batches; s++ {
			if s == 1 {
				t0 = time.Now()
			}
			idx := t.batchIdx(perm, s%max(1, len(perm)/t.batch))
			t.fillInput(k, idx, sb)
			var y []int32
			if last {
				y = sb.y
			} else {
				t.aux[k].Target(idx, obj.Rho, sb.target, sb.scratch)
			}
			if _, err := obj.StageStep(st, last, sb.x, sb.target, y); err != nil {
				return nil, fmt.Errorf("calibrating stage %d: %w", k, err)
			}
		}
		out[k] = float32(time.Since(t0).Seconds() / float64(batches*t.batch))
	}
	if t.world != nil {
		if err := t.world.AllReduce(out); err != nil {
			return nil, err
		}
	}
	res := make([]float64, t.K)
	for k, v := range out {
		res[k] = float64(v)
	}
	return res, nil
}

// BoundaryBytes is each boundary's bytes per example (stored size and precision).
func (t *Trainer) BoundaryBytes() []int64 {
	out := make([]int64, len(t.aux))
	for k, a := range t.aux {
		out[k] = a.ExampleBytes()
	}
	return out
}
