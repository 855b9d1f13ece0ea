package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime"
	"strconv"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// setupWorkers connects this process's logical workers: an in-process group for
// the local backend, or a hierarchical group over the MPI world, where each rank
// hosts dist.workers / ranks logical workers. It decides rank0: from here on,
// processes other than rank 0 log nothing and show no progress bar.
func (j *job) setupWorkers() error {
	c := j.cfg.Dist
	switch c.Backend {
	case "local":
		if err := checkLocalLaunch(os.Getenv); err != nil {
			return err
		}
		if c.Ranks > 1 {
			return fmt.Errorf("dist.ranks: %d, but dist.backend local runs in one process (expected 0 or 1, or dist.backend mpi)", c.Ranks)
		}
		members, err := newLocalGroup(c.Workers)
		if err != nil {
			return err
		}
		j.members, j.rank0 = members, true
		return nil
	case "mpi":
		world, err := dist.NewMPI()
		if err != nil {
			return err
		}
		j.world = world
		j.rank0 = world.Rank() == 0
		if !j.rank0 {
			j.log = slog.New(slog.DiscardHandler)
			j.opts.Stderr = nil
		}
		// First, before any collective that depends on the config: ranks
		// running different jobs would enter mismatched collectives.
		if err := agreeAcrossRanks(world, j.runFingerprint()); err != nil {
			return err
		}
		size := world.Size()
		if c.Ranks > 0 && c.Ranks != size {
			return fmt.Errorf("dist.ranks: the config expects %d MPI ranks, but the job has %d (launch with mpirun -np %d)", c.Ranks, size, c.Ranks)
		}
		if c.Workers%size != 0 {
			return fmt.Errorf("dist.workers: %d logical workers cannot be split evenly over %d MPI ranks (expected a multiple of %d)", c.Workers, size, size)
		}
		j.members, err = dist.NewHierarchical(world, c.Workers/size)
		return err
	}
	return fmt.Errorf("dist.backend: unknown backend %q (expected local or mpi)", c.Backend)
}

// newLocalGroup connects the local backend's workers; tests replace it to sum
// in another backend's order.
var newLocalGroup = dist.NewLocal

// checkLocalLaunch fails when a parallel launcher (mpirun, srun) started this
// process as one of several: with the local backend each would train alone,
// all into the same run directory. getenv is os.Getenv outside tests.
func checkLocalLaunch(getenv func(string) string) error {
	l, err := dist.DetectLaunch(getenv)
	if err != nil {
		return fmt.Errorf("dist.backend: local: %w", err)
	}
	if !l.Parallel() {
		return nil
	}
	of := ""
	if l.Size > 0 {
		of = fmt.Sprintf(" of %d", l.Size)
	}
	return fmt.Errorf("dist.backend: local trains in one process, but a launcher started this one as rank %d%s (%s), "+
		"so every rank would train alone into the same run directory: add --set dist.backend=mpi "+
		"(with gradwire built with -tags mpi) to train as one job, or start a single process without the launcher",
		l.Rank, of, l.From)
}

// runFingerprint describes the run for agreeAcrossRanks: every resolved config
// key but the two below, the build, and j.fingerprint (the data's digest).
func (j *job) runFingerprint() map[string]string {
	fp := configs.Flat(j.cfg)
	// Where each node keeps the data (the digest compares the files) and whether
	// it would draw a bar (only rank 0 does) may differ.
	delete(fp, "data.dir")
	delete(fp, "train.progress")
	fp["build.version"] = version.String()
	fp["build.blas"] = models.BLAS // the summary states one
	maps.Copy(fp, j.fingerprint)
	return fp
}

// defaultReplicas is one replica per core for the local backend (Gorgonia runs
// most ops on one thread, so replicas are what uses the cores), one per MPI rank
// (ranks are placed one per core).
func (j *job) defaultReplicas() int {
	if j.cfg.Dist.Backend == "mpi" {
		return 1
	}
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
		return v
	}
	return runtime.NumCPU()
}

// replicaCount is the number of replicas this process builds: dist.replicas, or
// the default, never more than its workers.
func (j *job) replicaCount() int {
	n := j.cfg.Dist.Replicas
	if n == 0 {
		n = j.defaultReplicas()
	}
	return min(n, len(j.members))
}

// setupReplicas builds the replicas (identical models), each local worker's
// gradient exchange and the engine.
func (j *job) setupReplicas(ctx context.Context, in models.Input, evalBatch int) error {
	n := j.replicaCount()
	// The replicas compute in parallel, one per core: each op's own workers get
	// the cores left per replica, so the two levels do not oversubscribe.
	opWorkers := models.WithOpWorkers(max(1, runtime.GOMAXPROCS(0)/n))
	j.nets = make([]*models.Net, n)
	reps := make([]dist.Replica, n)
	for r := range j.nets {
		if err := ctx.Err(); err != nil {
			return err // a signal during a long build
		}
		opts := []models.Option{opWorkers}
		if r == 0 {
			// Replica 0 evaluates while the others wait: on every core.
			opts = append(opts, models.WithEvalOpWorkers(runtime.GOMAXPROCS(0)))
		}
		net, err := models.New(j.cfg.Model, in, j.cfg.WorkerBatch(), evalBatch, j.cfg.Seed, opts...)
		if err != nil {
			return err
		}
		j.nets[r], reps[r] = net, net
		if o := j.cfg.Optim; o.SAMRho > 0 {
			var bufs [][]float32
			for _, b := range net.Buffers() {
				bufs = append(bufs, b.Value)
			}
			// L2 decay is part of the gradient (SGD, Adam, LARS), and so of
			// e, as the reference adds it to the loss; decoupled decay
			// (AdamW, LAMB, NovoGrad) is not.
			decay := 0.0
			if o.Name == "sgd" || o.Name == "adam" || o.Name == "lars" {
				decay = o.WeightDecay
			}
			reps[r] = newSAMReplica(net, net.Params(), bufs, o.SAMRho, o.SAMEta, decay, o.SAMAdaptive, o.DecayNormBias)
		}
	}
	j.net = j.nets[0]
	o := j.cfg.Optim
	hyper := compress.Hyper{Momentum: o.Momentum, Nesterov: o.Nesterov, WeightDecay: o.WeightDecay}
	exchangers := make([]dist.Exchanger, len(j.members))
	j.exchanges = make([]*compress.Exchange, len(j.members))
	for w, m := range j.members {
		info := func(step int) compress.StepInfo {
			return compress.StepInfo{Step: step, StepsPerEpoch: j.stepsPerEpoch, Worker: m.Rank(), Workers: m.Size(), Params: j.net.Flat()}
		}
		x, err := compress.NewExchange(j.cfg.Compress, j.net.Params(), m, j.cfg.Seed, hyper, info)
		if err != nil {
			return err
		}
		j.exchanges[w], exchangers[w] = x, x
	}
	var err error
	if j.engine, err = dist.NewEngine(j.members, reps, exchangers); err != nil {
		return err
	}
	if j.cfg.Dist.Pipeline == 2 {
		return j.engine.EnablePipeline()
	}
	// Where it gives the same mean (dense float32 exchange, a model without
	// BatchNorm, every worker in this process), each replica computes its
	// workers as one batch; otherwise (Fuse says why not), or with
	// dist.passes one_by_one, steps run worker by worker.
	if j.cfg.Dist.Passes == "one_by_one" || j.engine.Fuse() != nil {
		return nil
	}
	k := len(j.members) / len(j.nets)
	fits, extra, err := j.mem.fitsFusedPasses(j.cfg, in, evalBatch, len(j.nets), k, j.engine.Passes() == "grouped")
	if err != nil {
		return err
	}
	if !fits {
		j.engine.Unfuse()
		j.log.Warn("passes one by one: the graphs over each replica's workers at once would need " + human(extra) +
			" more than the run's estimate, beyond the memory available")
	}
	return nil
}

// fitOptimizer configures the optimizer for what the exchange does
// (compress.FitOptimizer).
func (j *job) fitOptimizer(opt optim.Optimizer) error {
	x := j.exchanges[0]
	return compress.FitOptimizer(opt, x.Compressor(), x.CompressedTensors(), j.cfg.Compress.Name, j.cfg.Optim.Name)
}

// workerState is one logical worker's checkpointed exchange state.
type workerState struct {
	Compressor map[string][]float32
	Traffic    compress.Traffic
}

// gatherWorkers collects every logical worker's exchange state on every
// process (a collective: all processes call it together). Other processes'
// bytes are decoded within the bounds of this run's layout.
func (j *job) gatherWorkers() ([]workerState, error) {
	// After fused PowerSGD steps only worker 0 holds the state: level the rest.
	if err := j.engine.SyncState(); err != nil {
		return nil, err
	}
	all, err := j.engine.GatherAll(func(w int) []byte {
		st := workerState{Traffic: j.exchanges[w].Traffic(), Compressor: j.exchanges[w].State()}
		return encodeWorkerState(st)
	})
	if err != nil {
		return nil, err
	}
	want := layoutOf(j.net, j.cfg.Dist.Workers, j.exchanges[0])
	out := make([]workerState, len(all))
	for i, b := range all {
		if out[i], err = decodeWorkerState(b, want); err != nil {
			return nil, fmt.Errorf("worker %d state: %w", i, err)
		}
	}
	return out, nil
}

// restoreWorkers puts checkpointed exchange state back into this process's workers.
func (j *job) restoreWorkers(path string, states []workerState) error {
	if len(states) != j.cfg.Dist.Workers {
		return fmt.Errorf("checkpoint %s: state of %d workers, the config has %d", path, len(states), j.cfg.Dist.Workers)
	}
	for w, x := range j.exchanges {
		st := states[j.engine.FirstWorker()+w]
		x.SetTraffic(st.Traffic)
		if err := x.SetState(st.Compressor); err != nil {
			return fmt.Errorf("checkpoint %s: worker %d compressor: %w", path, j.engine.FirstWorker()+w, err)
		}
	}
	j.engine.StateRestored()
	return nil
}

// close releases the run directory, the collective members and the MPI world.
func (j *job) close() {
	j.dir.release()
	for _, m := range j.members {
		m.Close()
	}
	if j.world != nil {
		j.world.Close()
	}
}

// replicaBuffers lists every replica's BatchNorm buffers, in the same order.
func (j *job) replicaBuffers() [][][]float32 {
	out := make([][][]float32, len(j.nets))
	for r, n := range j.nets {
		for _, b := range n.Buffers() {
			out[r] = append(out[r], b.Value)
		}
	}
	return out
}

func (j *job) averageBuffers() error { return j.engine.AverageBuffers(j.replicaBuffers()) }

// setBuffers copies checkpointed buffers into every replica.
func (j *job) setBuffers(bufs [][]float32) error {
	for _, set := range j.replicaBuffers() {
		if len(set) != len(bufs) {
			return fmt.Errorf("checkpoint: %d buffers, the model has %d", len(bufs), len(set))
		}
		for i, b := range set {
			copy(b, bufs[i])
		}
	}
	return nil
}

// fillTraffic adds the communication figures to the summary: bytes on the wire
// against the dense float32 baseline (whole run, after the compressor's warm-up,
// per layer kind), and the time model's prediction for a cluster with one
// machine per worker.
func (j *job) fillTraffic(s *Summary, workers []workerState) {
	var t compress.Traffic
	for _, w := range workers {
		t.Add(w.Traffic)
	}
	s.BytesDense, s.BytesSent = t.Dense, t.Wire
	s.CompressionRatio, s.CompressionRatioSteady = ratio(t.Dense, t.Wire), ratio(t.SteadyDense, t.SteadyWire)
	for kind, dense := range t.DenseByKind {
		if s.CompressionRatioByKind == nil {
			s.CompressionRatioByKind = map[string]float64{}
		}
		s.CompressionRatioByKind[kind] = ratio(dense, t.WireByKind[kind])
	}
	n := j.cfg.Dist.Workers
	if j.computeN == 0 || n == 1 || t.Steps == 0 {
		return
	}
	// One worker's steady-state traffic per step: the dense all-reduce plus the
	// compressor's rounds, each round one collective of the average size.
	net := dist.Network{BandwidthGbps: j.cfg.Network.BandwidthGbps, LatencyUs: j.cfg.Network.LatencyUs, Topology: j.cfg.Network.Topology}
	steps, wire := t.SteadySteps, t.SteadyWire
	if steps == 0 {
		steps, wire = t.Steps, t.Wire
	}
	perStep := wire / steps
	// traffic holds each call's mean bytes per worker (what crosses the
	// links); timed the bytes a call takes the time of: an all-gather's ring
	// rounds each wait for the largest block in flight, so its calls are
	// timed at the largest payload any worker sent.
	var traffic, timed dist.StepTraffic
	if t.DenseStep > 0 {
		traffic.Add(dist.OpAllReduce, t.DenseStep)
		timed.Add(dist.OpAllReduce, t.DenseStep)
	}
	largest := j.exchanges[0].GatherMax()
	if c := j.exchanges[0].Compressor(); c != nil {
		needs := c.Needs()
		rounds := int64(needs.Rounds)
		// Each round at its own collective and its measured bytes, averaged
		// over the workers (ScaleCom's index broadcast is the leader's alone);
		// a run resumed from a checkpoint without them splits evenly.
		perRound := len(t.SteadyRoundWire) == needs.Rounds && t.SteadySteps > 0
		for r := int64(0); r < rounds; r++ {
			b := (perStep - t.DenseStep) / rounds
			if perRound {
				b = t.SteadyRoundWire[r] / t.SteadySteps
			}
			traffic.Add(needs.Op(int(r)), b)
			if op := needs.Op(int(r)); op == dist.OpAllGather && int(r) < len(largest) && largest[r] > 0 {
				timed.Add(op, int64(math.Round(largest[r])))
			} else {
				timed.Add(op, b)
			}
		}
	}
	// A step's compute on a worker: forward and backward, then its
	// compressor's encoding and decoding (worker 0's, which decodes the mean
	// as every worker of a cluster would).
	codec := j.exchanges[0].CodecSeconds()
	compute := j.computeS/float64(j.computeN) + codec
	tm := &TimeModel{ComputeSecondsPerStep: compute, CodecSecondsPerStep: codec, BytesPerWorkerStep: perStep, Topology: net.Topology, LatencyUs: net.LatencyUs,
		LinkBytesPerStep: int64(math.Round(net.StepLinkBytes(traffic, n))), Pipelined: j.pipelined(),
		AllReduceBytes: timed.AllReduceBytes, AllGatherBytes: timed.AllGatherBytes}
	for _, gbps := range []float64{1, 10, 100} {
		p := net.At(gbps).Predict(compute, timed, n, j.pipelined())
		tm.Predictions = append(tm.Predictions, PredictionAt{Gbps: gbps, CommSeconds: p.CommSeconds, StepSeconds: p.StepSeconds, SpeedUp: p.SpeedUp})
	}
	s.TimeModel = tm
}

// ratio is dense/sent, 1 when nothing was sent.
func ratio(dense, sent int64) float64 {
	if sent == 0 {
		return 1
	}
	return float64(dense) / float64(sent)
}

// gatherWorkerBuffers collects, for every logical worker of the run, the model
// buffers of the replica that computes it (a collective). Inside an epoch the
// replicas' BatchNorm statistics differ; a checkpoint keeps each of them.
func (j *job) gatherWorkerBuffers() ([][][]float32, error) {
	sizes := bufferSizes(j.net)
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	reps := j.replicaBuffers()
	all, err := j.engine.GatherAll(func(w int) []byte {
		out := make([]byte, 0, 4*total)
		for _, b := range reps[w%len(reps)] {
			for _, v := range b {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	bufs := make([][][]float32, len(all))
	for w, p := range all {
		if len(p) != 4*total {
			return nil, fmt.Errorf("worker %d sent %d bytes of model buffers, expected %d", w, len(p), 4*total)
		}
		for _, n := range sizes {
			b := make([]float32, n)
			for i := range b {
				b[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			}
			bufs[w] = append(bufs[w], b)
			p = p[4*n:]
		}
	}
	return bufs, nil
}

// setWorkerBuffers restores per-worker buffers from a mid-epoch checkpoint: each
// local replica gets the buffers of the first worker it computes.
func (j *job) setWorkerBuffers(bufs [][][]float32) error {
	if len(bufs) != j.cfg.Dist.Workers {
		return fmt.Errorf("model buffers of %d workers, the config has %d", len(bufs), j.cfg.Dist.Workers)
	}
	sizes := bufferSizes(j.net)
	for r, set := range j.replicaBuffers() {
		src := bufs[j.engine.FirstWorker()+r]
		if len(src) != len(sizes) {
			return fmt.Errorf("worker %d: %d model buffers, the model has %d", j.engine.FirstWorker()+r, len(src), len(sizes))
		}
		for i, b := range set {
			if len(src[i]) != len(b) {
				return fmt.Errorf("worker %d: model buffer %d has %d values, the model %d", j.engine.FirstWorker()+r, i, len(src[i]), len(b))
			}
			copy(b, src[i])
		}
	}
	return nil
}

func bufferSizes(net *models.Net) []int {
	var sizes []int
	for _, b := range net.Buffers() {
		sizes = append(sizes, len(b.Value))
	}
	return sizes
}
