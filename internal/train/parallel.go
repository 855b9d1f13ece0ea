package train

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

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

// setupReplicas builds the replicas (identical models) and the engine.
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
	var err error
	j.engine, err = dist.NewEngine(j.members, reps)
	return err
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
// against the dense baseline, and the time model's prediction for a cluster with
// one machine per worker.
func (j *job) fillTraffic(s *Summary, steps int) {
	workers := j.cfg.Dist.Workers
	dense := int64(4 * j.net.NumParams())
	if workers > 1 { // a single worker exchanges nothing
		s.BytesDense = dense * int64(workers) * int64(steps)
	}
	s.BytesSent = j.bytesSent
	s.CompressionRatio = 1
	if s.BytesSent > 0 {
		s.CompressionRatio = float64(s.BytesDense) / float64(s.BytesSent)
	}
	if j.computeN == 0 || workers == 1 {
		return
	}
	net := dist.Network{BandwidthGbps: j.cfg.Network.BandwidthGbps, LatencyUs: j.cfg.Network.LatencyUs, Topology: j.cfg.Network.Topology}
	var traffic dist.StepTraffic
	traffic.Add(dist.KindAllReduce, dense)
	compute := j.computeS / float64(j.computeN)
	tm := &TimeModel{ComputeSecondsPerStep: compute, BytesPerWorkerStep: dense, Topology: net.Topology, LatencyUs: net.LatencyUs}
	for _, gbps := range []float64{1, 10, 100} {
		p := net.At(gbps).Predict(compute, traffic, workers, false)
		tm.Predictions = append(tm.Predictions, PredictionAt{Gbps: gbps, CommSeconds: p.CommSeconds, StepSeconds: p.StepSeconds, SpeedUp: p.SpeedUp})
	}
	s.TimeModel = tm
}
