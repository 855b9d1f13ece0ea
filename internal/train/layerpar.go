package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/layerpar"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// train.mode layer_parallel: the network is cut into dist.workers stages
// (internal/layerpar) whose sub-problems are solved in parallel rounds, one
// round an epoch, with the serial epochs of the layer_parallel schedule run
// as ordinary synchronous data-parallel epochs of the whole network over the
// same workers (trainStep). Checkpoints are written at the end of serial
// epochs only (the auxiliary variables are not checkpointed): a resumed run
// starts again at the first phase after its checkpoint.

// LayerParallelSummary is summary.json's layer_parallel section.
type LayerParallelSummary struct {
	Method         string  `json:"method"`
	Stages         int     `json:"stages"`
	StageBlocks    []int   `json:"stage_blocks"` // basic blocks per stage
	Downsample     int     `json:"downsample"`
	AuxFP16        bool    `json:"aux_fp16"`
	RhoFinal       float64 `json:"rho_final"`
	ParallelRounds int     `json:"parallel_rounds"`
	SerialEpochs   int     `json:"serial_epochs"`
	Cycles         int     `json:"cycles"`
	// Measured wall time of the parallel rounds (sub-problems, u-step,
	// exchanges; evaluation excluded), of the initial forward passes, and
	// of the serial epochs.
	ParallelSeconds float64 `json:"parallel_seconds"`
	InitSeconds     float64 `json:"init_seconds"`
	SerialSeconds   float64 `json:"serial_seconds"`
	// Each stage's compute per example, timed alone (Calibrate), and its
	// sub-problem time in the rounds (with the other stages running).
	StageSecondsPerExample []float64 `json:"stage_seconds_per_example"`
	StageRoundSeconds      []float64 `json:"stage_round_seconds"`
	StageTrainFLOPs        []int64   `json:"stage_train_flops"` // per step of the stage's batch
	// Bytes: the auxiliary variables per example at each boundary, those a
	// round sends, those the initial passes sent, and the stage parameters
	// gathered for evaluation and before serial phases; the boundaries'
	// stored state.
	BoundaryBytesPerExample []int64 `json:"boundary_bytes_per_example"`
	AuxBytesPerRound        int64   `json:"aux_bytes_per_round"`
	AuxBytes                int64   `json:"aux_bytes"`
	InitBytes               int64   `json:"init_bytes"`
	ParamBytes              int64   `json:"param_bytes"`
	AuxStoredBytes          int64   `json:"aux_stored_bytes"`
	ResidualFinal           float64 `json:"residual_final"` // mean ||v - D F||^2 per example and boundary, last round
	// The time model (layerpar.TimeModel) from the calibrated stage times:
	// one round's speed-up over a serial epoch and the whole schedule's, at
	// network.bandwidth_gbps and latency_us, and with free communication.
	PredictedRoundSpeedup    float64 `json:"predicted_round_speedup"`
	PredictedSpeedup         float64 `json:"predicted_speedup"`
	PredictedSpeedupFreeComm float64 `json:"predicted_speedup_free_comm"`
}

// layerParallel runs the layer_parallel schedule from the position st (a
// fresh run, or a checkpoint at the end of a serial epoch).
func (j *job) layerParallel(ctx context.Context, st *checkpoint, h *loopHooks) (*Summary, error) {
	c := j.cfg
	lp := c.LayerParallel
	K := c.Dist.Workers
	in := j.net.Input()
	blocks, err := models.ResNetBlocks(c.Model.Name, in)
	if err != nil {
		return nil, err
	}
	los, his, err := models.StageBlocks(len(blocks), K)
	if err != nil {
		return nil, fmt.Errorf("dist.workers: %d: %w", K, err)
	}
	local := K
	if j.world != nil {
		local = 1
	}
	opw := models.WithOpWorkers(max(1, runtime.GOMAXPROCS(0)/local))
	stages := make([]layerpar.Stage, K)
	opts := make([]optim.Optimizer, K)
	var flops []int64
	for k := range K {
		if j.world != nil && j.world.Rank() != k {
			flops = append(flops, 0)
			continue
		}
		s, err := models.NewResNetStage(c.Model, in, k, K, j.globalBatch, opw)
		if err != nil {
			return nil, err
		}
		stages[k] = s
		flops = append(flops, s.TrainFLOPs())
		if opts[k], err = optim.New(c.Optim); err != nil {
			return nil, err
		}
	}
	var bounds [][]int
	for k := 0; k < K-1; k++ {
		b := blocks[his[k]-1]
		bounds = append(bounds, []int{b.Cout, b.OutH, b.OutW})
	}
	tr, err := layerpar.NewTrainer(lp, stages, opts, j.train, numel(in.Shape), bounds, j.world, c.Optim.ClipNorm)
	if err != nil {
		return nil, err
	}
	sum := &LayerParallelSummary{Method: lp.Method, Stages: K, Downsample: lp.Downsample, AuxFP16: lp.AuxFP16,
		SerialEpochs: lp.SerialEpochs, ParallelRounds: c.Train.Epochs - lp.SerialEpochs, Cycles: lp.Cycles,
		BoundaryBytesPerExample: tr.BoundaryBytes(), StageRoundSeconds: make([]float64, K)}
	for k := range K {
		sum.StageBlocks = append(sum.StageBlocks, his[k]-los[k])
	}
	if j.world != nil {
		f := make([]float32, K)
		for k, v := range flops {
			f[k] = float32(v)
		}
		if err := j.world.AllReduce(f); err != nil {
			return nil, err
		}
		for k := range flops {
			flops[k] = int64(f[k])
		}
	}
	sum.StageTrainFLOPs = flops
	for k := 0; k < K-1; k++ {
		sum.AuxStoredBytes += tr.Aux(k).StoredBytes()
	}
	j.lp = sum

	globalStep, elapsed, samples, epochs := st.GlobalStep, st.Elapsed, st.Samples, st.Epochs
	j.workers = st.Workers
	steps := j.stepsPerEpoch
	var rounds int
	var stageSecs []float64
	// The hooks for parallel rounds: every one but the checkpoints and the
	// step progress bar.
	var roundHooks []hook
	for _, k := range h.all {
		if _, ok := k.(*checkpointer); ok {
			continue
		}
		if _, ok := k.(*progressHook); ok {
			continue
		}
		roundHooks = append(roundHooks, k)
	}
	for _, ph := range lp.Schedule(c.Train.Epochs) {
		end := ph.First + ph.Epochs
		if ph.Parallel {
			rounds += ph.Epochs
		}
		if end <= st.Epoch {
			continue
		}
		if !ph.Parallel {
			tr.CountBroadcast(j.stageParamBytes(tr))
			for epoch := max(ph.First, st.Epoch); epoch < end; epoch++ {
				if err := j.lpSerialEpoch(ctx, epoch, &globalStep, h); err != nil {
					return nil, err
				}
				if j.rank0 {
					last := j.lastEpoch
					epochs = append(epochs, last)
					elapsed += last.Seconds
					sum.SerialSeconds += last.Seconds
				} else {
					elapsed += j.lastEpoch.Seconds
				}
				samples += int64(steps * j.globalBatch)
				pos := position{epoch: epoch + 1, globalStep: globalStep, elapsed: elapsed, samples: samples, epochs: epochs}
				if err := runHooks(h.all, func(k hook) error { return k.afterEpoch(&epochDone{pos: pos, eval: j.lastEval, res: j.lastRes}) }); err != nil {
					return nil, err
				}
			}
			continue
		}
		// A parallel phase: the stages start from the network's parameters
		// (the initial ones, or those of the serial phase before), the
		// auxiliary variables from a serial forward pass.
		if err := tr.Import(j.net); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := tr.Init(j.sampler.Permutation(ph.First)[:steps*j.globalBatch]); err != nil {
			return nil, err
		}
		initS := time.Since(t0).Seconds()
		sum.InitSeconds += initS
		elapsed += initS
		if stageSecs == nil {
			if stageSecs, err = tr.Calibrate(j.sampler.Permutation(ph.First), 3); err != nil {
				return nil, err
			}
			sum.StageSecondsPerExample = stageSecs
			j.log.Info("layer-parallel stages", "method", lp.Method, "stages", K, "blocks", sum.StageBlocks,
				"seconds_per_example", fmtSeconds(stageSecs), "boundary_bytes", sum.BoundaryBytesPerExample)
		}
		for epoch := ph.First; epoch < end; epoch++ {
			if err := ctx.Err(); err != nil {
				return nil, &Interrupted{Dir: j.opts.OutDir, Epoch: epoch + 1, Step: globalStep,
					Cause: errors.Join(err, errors.New("layer-parallel rounds are not checkpointed: a resume starts from the last serial epoch's checkpoint, or from the start"))}
			}
			perm := j.sampler.Permutation(epoch)[:steps*j.globalBatch]
			base := globalStep
			rs, err := tr.Round(perm, func(s int) float64 { return j.sched.LR(base + s) })
			if err != nil {
				return nil, h.div.diverged(fmt.Errorf("epoch %d (parallel round): %w", epoch+1, err))
			}
			globalStep += steps
			lr := j.sched.LR(globalStep - 1)
			if err := tr.Export(j.net); err != nil {
				return nil, err
			}
			j.syncReplicaState()
			elapsed += rs.Seconds
			samples += int64(steps * j.globalBatch)
			sum.ParallelSeconds += rs.Seconds
			sum.RhoFinal, sum.ResidualFinal = rs.Rho, rs.Residual
			for k, s := range rs.StageSeconds {
				sum.StageRoundSeconds[k] += s
			}
			done := epochDone{}
			if j.rank0 {
				ev, res, err := j.evalEpoch(nil, epoch, globalStep, lr, rs.Loss*float64(steps), rs.Seconds)
				if err != nil {
					return nil, err
				}
				done.eval, done.res = &ev, &res
				epochs = append(epochs, res)
				j.log.Info("parallel round", "epoch", epoch+1, "rho", rs.Rho, "stage_loss", fmtSeconds(rs.StageLoss),
					"residual", rs.Residual, "stage_seconds", fmtSeconds(rs.StageSeconds), "seconds", rs.Seconds)
			}
			done.pos = position{epoch: epoch + 1, globalStep: globalStep, elapsed: elapsed, samples: samples, epochs: epochs}
			if err := runHooks(roundHooks, func(k hook) error { return k.afterEpoch(&done) }); err != nil {
				return nil, err
			}
		}
	}
	sum.AuxBytes, sum.InitBytes, sum.ParamBytes = tr.Traffic.AuxBytes, tr.Traffic.InitBytes, tr.Traffic.ParamBytes
	tm := layerpar.TimeModel{StageSeconds: stageSecs, BoundaryBytes: sum.BoundaryBytesPerExample,
		StageParamBytes: j.stageParamBytes(tr), Examples: steps * j.globalBatch}
	sum.AuxBytesPerRound = tm.AuxBytesPerRound()
	net := dist.Network{BandwidthGbps: c.Network.BandwidthGbps, LatencyUs: c.Network.LatencyUs, Topology: c.Network.Topology}
	if stageSecs != nil {
		sum.PredictedRoundSpeedup = tm.RoundSpeedup(net)
		sum.PredictedSpeedup = tm.Speedup(net, sum.ParallelRounds, lp.SerialEpochs, lp.Cycles)
		sum.PredictedSpeedupFreeComm = tm.Speedup(dist.Network{BandwidthGbps: math.Inf(1)}, sum.ParallelRounds, lp.SerialEpochs, lp.Cycles)
	}
	if !j.rank0 {
		return nil, nil
	}
	return j.summary(globalStep, elapsed, samples, epochs)
}

// stageParamBytes is every stage's parameter and buffer bytes, on every process.
func (j *job) stageParamBytes(tr *layerpar.Trainer) []int64 {
	b := tr.StageParamBytes()
	if j.world == nil {
		return b
	}
	f := make([]float32, len(b))
	for k, v := range b {
		f[k] = float32(v)
	}
	if err := j.world.AllReduce(f); err != nil {
		return b
	}
	for k := range b {
		b[k] = int64(f[k])
	}
	return b
}

// syncReplicaState copies replica 0's parameters and BatchNorm buffers to the
// other replicas.
func (j *job) syncReplicaState() {
	j.engine.SyncReplicas()
	for _, n := range j.nets[1:] {
		_ = models.CopyBuffers(n.Buffers(), j.net.Buffers(), true)
	}
}

// lpSerialEpoch runs one serial epoch of a layer_parallel run: the ordinary
// synchronous data-parallel step over every worker (trainStep), the hooks
// after each step, then the buffers' average and the evaluation; the epoch's
// hooks are the caller's. The epoch's record is left in j.lastEpoch.
func (j *job) lpSerialEpoch(ctx context.Context, epoch int, globalStep *int, h *loopHooks) error {
	perm := j.sampler.Permutation(epoch)
	t0 := time.Now()
	var lossSum, lr float64
	for step := range j.stepsPerEpoch {
		stop, _, err := j.control(ctx, *globalStep, step > 0)
		if err != nil {
			return err
		}
		if stop {
			return &Interrupted{Dir: j.opts.OutDir, Epoch: epoch + 1, Step: *globalStep, Cause: ctx.Err()}
		}
		lr = j.sched.LR(*globalStep)
		loss, err := j.trainStep(perm, epoch, step, *globalStep, lr)
		if err != nil {
			return h.div.diverged(fmt.Errorf("epoch %d step %d: %w", epoch+1, step+1, err))
		}
		lossSum += loss
		*globalStep++
		done := stepDone{epoch: epoch, step: step, globalStep: *globalStep, loss: loss, lr: lr, epochStart: t0}
		if err := runHooks(h.all, func(k hook) error { return k.afterStep(&done) }); err != nil {
			return err
		}
	}
	trainSeconds := time.Since(t0).Seconds()
	if err := j.averageBuffers(); err != nil {
		return err
	}
	var err error
	if j.workers, err = j.gatherWorkers(); err != nil {
		return err
	}
	j.lastEpoch, j.lastEval, j.lastRes = EpochResult{Seconds: trainSeconds}, nil, nil
	if j.rank0 {
		ev, res, err := j.evalEpoch(h.prog, epoch, *globalStep, lr, lossSum, trainSeconds)
		if err != nil {
			return err
		}
		j.lastEpoch, j.lastEval, j.lastRes = res, &ev, &res
	}
	return nil
}

// limitTrain keeps the first n examples of the training split (data.train_limit).
func limitTrain(ds data.Dataset, n int) (data.Dataset, error) {
	if n >= ds.Len() {
		return ds, nil
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return data.NewSubset(ds, idx)
}

func fmtSeconds(v []float64) string {
	s := "["
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.4g", x)
	}
	return s + "]"
}
