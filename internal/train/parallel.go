package train

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
)

// setupWorkers connects this process's logical workers: an in-process group for
// the local backend, or a hierarchical group over the MPI world, where each rank
// hosts dist.workers / ranks logical workers.
func (j *job) setupWorkers() error {
	c := j.cfg.Dist
	switch c.Backend {
	case "local":
		if c.Ranks > 1 {
			return fmt.Errorf("dist.ranks: %d, but dist.backend local runs in one process (expected 0 or 1, or dist.backend mpi)", c.Ranks)
		}
		members, err := dist.NewLocal(c.Workers)
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
		size := world.Size()
		if c.Ranks > 0 && c.Ranks != size {
			return fmt.Errorf("dist.ranks: the config expects %d MPI ranks, but the job has %d (launch with mpirun -np %d)", c.Ranks, size, c.Ranks)
		}
		if c.Workers%size != 0 {
			return fmt.Errorf("dist.workers: %d logical workers cannot be split evenly over %d MPI ranks (expected a multiple of %d)", c.Workers, size, size)
		}
		if j.members, err = dist.NewHierarchical(world, c.Workers/size); err != nil {
			return err
		}
		j.rank0 = world.Rank() == 0
		return nil
	}
	return fmt.Errorf("dist.backend: unknown backend %q (expected local or mpi)", c.Backend)
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

// setupReplicas builds the replicas (identical models), each local worker's
// gradient exchange and the engine.
func (j *job) setupReplicas(in models.Input, evalBatch int) error {
	n := j.cfg.Dist.Replicas
	if n == 0 {
		n = j.defaultReplicas()
	}
	n = min(n, len(j.members))
	j.nets = make([]*models.Net, n)
	reps := make([]dist.Replica, n)
	for r := range j.nets {
		net, err := models.New(j.cfg.Model, in, j.cfg.WorkerBatch(), evalBatch, j.cfg.Seed)
		if err != nil {
			return err
		}
		j.nets[r], reps[r] = net, net
	}
	j.net = j.nets[0]
	o := j.cfg.Optim
	hyper := compress.Hyper{Momentum: o.Momentum, Nesterov: o.Nesterov, WeightDecay: o.WeightDecay}
	exchangers := make([]dist.Exchanger, len(j.members))
	j.exchanges = make([]*compress.Exchange, len(j.members))
	for w, m := range j.members {
		ctx := func(step int) compress.Context {
			return compress.Context{Step: step, StepsPerEpoch: j.stepsPerEpoch, Worker: m.Rank(), Workers: m.Size(), Params: j.net.Flat()}
		}
		x, err := compress.NewExchange(j.cfg.Compress, j.net.Params(), m, j.cfg.Seed, hyper, ctx)
		if err != nil {
			return err
		}
		j.exchanges[w], exchangers[w] = x, x
	}
	// DGC's momentum correction applies momentum and weight decay to the tensors
	// it compresses: the optimizer must take plain steps on them.
	if c, ok := j.exchanges[0].Compressor().(compress.MomentumOwner); ok && c.OwnsMomentum() {
		compressed := map[string]bool{}
		for _, t := range j.exchanges[0].CompressedTensors() {
			compressed[t.Name] = true
		}
		params := j.net.Params()
		for i := range params {
			params[i].Preconditioned = compressed[params[i].Name]
		}
	}
	var err error
	j.engine, err = dist.NewEngine(j.members, reps, exchangers)
	return err
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
	all, err := j.engine.GatherAll(func(w int) []byte {
		st := workerState{Traffic: j.exchanges[w].Traffic()}
		if c := j.exchanges[w].Compressor(); c != nil {
			st.Compressor = c.State()
		}
		return encodeWorkerState(st)
	})
	if err != nil {
		return nil, err
	}
	want := layoutOf(j.net, j.cfg.Dist.Workers)
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
		if c := x.Compressor(); c != nil {
			if err := c.SetState(st.Compressor); err != nil {
				return fmt.Errorf("checkpoint %s: worker %d compressor: %w", path, j.engine.FirstWorker()+w, err)
			}
		}
	}
	return nil
}

// close releases the collective members and the MPI world.
func (j *job) close() {
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
	var traffic dist.StepTraffic
	if t.DenseStep > 0 {
		traffic.Add(dist.KindAllReduce, t.DenseStep)
	}
	if c := j.exchanges[0].Compressor(); c != nil {
		rounds := int64(c.Rounds())
		for r := int64(0); r < rounds; r++ {
			traffic.Add(c.Kind(), (perStep-t.DenseStep)/rounds)
		}
	}
	compute := j.computeS / float64(j.computeN)
	tm := &TimeModel{ComputeSecondsPerStep: compute, BytesPerWorkerStep: perStep, Topology: net.Topology, LatencyUs: net.LatencyUs}
	for _, gbps := range []float64{1, 10, 100} {
		p := net.At(gbps).Predict(compute, traffic, n, false)
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
