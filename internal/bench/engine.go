package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/internal/train"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// Scenario is one data-parallel setting of a full training step: logical
// workers, replicas and compressor (compress.name). Unfused keeps the
// workers' steps one by one where the trainer would fuse a replica's workers
// into one batch (dist.Engine.Fuse), to tell the cost of a compressor from
// the loss of fusion it brings.
type Scenario struct {
	Workers, Replicas int
	Compress          string
	Unfused           bool
}

func (s Scenario) String() string {
	if s.Unfused {
		return fmt.Sprintf("%d/%d/%s/unfused", s.Workers, s.Replicas, s.Compress)
	}
	return fmt.Sprintf("%d/%d/%s", s.Workers, s.Replicas, s.Compress)
}

// DefaultScenarios are what `gradwire bench --engine` times by default: one
// worker, eight workers on two replicas, and the same with DGC and with
// PowerSGD.
var DefaultScenarios = []Scenario{{1, 1, "none", false}, {8, 2, "none", false}, {8, 2, "dgc", false}, {8, 2, "powersgd", false}}

// ParseScenario reads "WORKERS/REPLICAS/COMPRESSOR[/unfused]", e.g. "8/2/dgc"
// or "8/2/none/unfused".
func ParseScenario(s string) (Scenario, error) {
	f := strings.Split(s, "/")
	unfused := len(f) == 4 && f[3] == "unfused"
	if len(f) != 3 && !unfused {
		return Scenario{}, fmt.Errorf("scenario %q: expected WORKERS/REPLICAS/COMPRESSOR or WORKERS/REPLICAS/COMPRESSOR/unfused, e.g. 8/2/dgc", s)
	}
	w, err1 := strconv.Atoi(f[0])
	r, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || w < 1 || r < 1 || r > w {
		return Scenario{}, fmt.Errorf("scenario %q: workers and replicas must be whole numbers with 1 <= replicas <= workers", s)
	}
	if _, ok := compress.Registry[f[2]]; !ok {
		return Scenario{}, fmt.Errorf("scenario %q: unknown compressor %q (valid: %v)", s, f[2], compress.Names())
	}
	return Scenario{Workers: w, Replicas: r, Compress: f[2], Unfused: unfused}, nil
}

// EngineCase is a model at a global batch, timed in several scenarios.
type EngineCase struct {
	Case                 // Batch is the global batch, split over each scenario's workers
	Scenarios []Scenario // the first is the baseline of the ratios
}

// ScenarioResult is one scenario's measurement.
type ScenarioResult struct {
	Scenario       string    `json:"scenario"` // WORKERS/REPLICAS/COMPRESSOR[/unfused]
	Unfused        bool      `json:"unfused,omitempty"`
	Passes         string    `json:"passes"` // how each replica computes its workers: fused, grouped or one by one (dist.Engine.Passes)
	Workers        int       `json:"workers"`
	Replicas       int       `json:"replicas"`
	Compress       string    `json:"compress"`
	WorkerBatch    int       `json:"worker_batch"`
	OpWorkers      int       `json:"op_workers"` // goroutines each fast op of a replica uses
	TrialSeconds   []float64 `json:"trial_seconds"`
	BestSeconds    float64   `json:"best_seconds"`
	MedianSeconds  float64   `json:"median_seconds"`
	Spread         float64   `json:"spread"`
	ComputeSeconds float64   `json:"compute_seconds"` // median over timed steps of the engine's mean per-worker compute time
	// CPU time of the process per step (all threads), best and median over
	// the trials; 0 where the system does not report it. On a machine shared
	// with other jobs it varies less than the step time, and shows the work
	// a scenario adds even where idle cores would hide it.
	BestCPUSeconds    float64 `json:"best_cpu_seconds"`
	MedianCPUSeconds  float64 `json:"median_cpu_seconds"`
	AllocBytesPerStep float64 `json:"alloc_bytes_per_step"`
	AllocsPerStep     float64 `json:"allocs_per_step"`
	// Against the first scenario (best over best, median over median).
	BestRatio   float64 `json:"best_ratio"`
	MedianRatio float64 `json:"median_ratio"`
	// Against the scenario of the same workers and replicas with
	// compress.name none, when there is one: 0.05 is 5% slower.
	BestOverhead   *float64 `json:"best_overhead,omitempty"`
	MedianOverhead *float64 `json:"median_overhead,omitempty"`
}

// EngineResult is one model's scenarios.
type EngineResult struct {
	Model       string           `json:"model"`
	GlobalBatch int              `json:"global_batch"`
	Params      int              `json:"params"`
	Warmup      int              `json:"warmup"`
	Steps       int              `json:"steps"`
	Trials      int              `json:"trials"`
	Ops         string           `json:"ops"`
	BLAS        string           `json:"blas"`
	GOMAXPROCS  int              `json:"gomaxprocs"`
	Machine     string           `json:"machine"` // CPU model, CPUs, memory (version.Machine)
	Scenarios   []ScenarioResult `json:"scenarios"`
}

// Engine settings that are not the scenario's: the compressors run in their
// steady state from the first step (no DGC density warm-up, no PowerSGD
// vanilla phase), since the warm-up steps of a measurement are not timed and
// a training run spends nearly all its steps past them; everything else is
// the run defaults (configs.Default: SGD with momentum 0.9 and weight decay
// 5e-4, compress.min_size 1024, DGC density 0.001 with sampling, PowerSGD
// rank 1 with error feedback and warm start).
func engineConfig(c Case, s Scenario) configs.Config {
	cfg := configs.Default()
	cfg.Model.Name = c.Model
	if c.Config.Ops != "" {
		cfg.Model.Ops = c.Config.Ops
	}
	cfg.Data.Name = datasets[c.Model]
	cfg.Data.GlobalBatch = c.Batch
	cfg.Dist.Workers, cfg.Dist.Replicas = s.Workers, s.Replicas
	cfg.Compress.Name = s.Compress
	cfg.Compress.DGC.WarmupEpochs = 0
	cfg.Compress.PowerSGD.StartIter = 0
	return cfg
}

// datasets are the data sets of the shapes in inputs, for the config's rules
// that tie a model to its data.
var datasets = map[string]string{"mlp": "fashion-mnist", "lenet5": "fashion-mnist", "resnet20": "cifar10", "lstm": "fashion-mnist", "charlstm": "tinyshakespeare"}

// engineRun is one scenario built the way internal/train builds a local run
// (setupReplicas, fitOptimizer, trainStep): a NewLocal group, one model per
// replica whose fast ops get GOMAXPROCS/replicas goroutines, one
// compress.Exchange per worker, the dist.Engine over them and the optimizer
// stepping replica 0.
type engineRun struct {
	s         Scenario
	cfg       configs.Config
	engine    *dist.Engine
	net       *models.Net // replica 0
	nets      []*models.Net
	exchanges []*compress.Exchange
	opt       optim.Optimizer
	x         []float32 // the global batch, workers' slices in rank order
	y         []int32
	xw, yw    int // values per worker
	opWorkers int
	step      int
	members   []dist.Collective
}

// checkEngineMemory refuses scenarios that together need more memory than is
// available: they are all built before the first step (their trials are
// interleaved), and a build beyond the machine's memory ends the process in
// the allocator ("fatal error: runtime: out of memory").
func checkEngineMemory(c EngineCase) error {
	avail, source, ok, err := train.AvailableMemory()
	if err != nil || !ok {
		return err
	}
	var total float64
	var parts []string
	for _, s := range c.Scenarios {
		need, _, _, _, err := train.RunMemory(engineConfig(c.Case, s), c.Input, 1, s.Replicas, s.Workers)
		if err != nil {
			return nil // a config the build refuses, naming its scenario
		}
		total += need
		parts = append(parts, fmt.Sprintf("%v %.1f GiB", s, need/(1<<30)))
		if total > float64(avail) {
			return fmt.Errorf("bench: %s at global batch %d: the scenarios need about %.1f GiB together (%s, so far), more than the %.1f GiB available (%s): expected fewer scenarios, fewer workers or a smaller batch",
				c.Model, c.Batch, total/(1<<30), strings.Join(parts, ", "), float64(avail)/(1<<30), source)
		}
	}
	return nil
}

func newEngineRun(c Case, s Scenario) (*engineRun, error) {
	return buildEngineRun(c, engineConfig(c, s), engineHooks{noFuse: s.Unfused})
}

// engineHooks wrap each member before its exchange is built on it, and each
// exchange before the engine gets it (tests hide optional interfaces with
// them); nil leaves them as they are.
type engineHooks struct {
	member   func(dist.Collective) dist.Collective
	exchange func(*compress.Exchange) dist.Exchanger
	noFuse   bool // keep every step worker by worker (bit-for-bit comparisons)
}

// buildEngineRun builds the run of cfg's model, dist and compress sections.
func buildEngineRun(c Case, cfg configs.Config, h engineHooks) (*engineRun, error) {
	s := Scenario{Workers: cfg.Dist.Workers, Replicas: cfg.Dist.Replicas, Compress: cfg.Compress.Name, Unfused: h.noFuse}
	if c.Batch%s.Workers != 0 {
		return nil, fmt.Errorf("global batch %d cannot be split evenly over %d workers", c.Batch, s.Workers)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	members, err := dist.NewLocal(s.Workers)
	if err != nil {
		return nil, err
	}
	r := &engineRun{s: s, cfg: cfg, members: members, opWorkers: max(1, runtime.GOMAXPROCS(0)/s.Replicas)}
	wb := cfg.WorkerBatch()
	reps := make([]dist.Replica, s.Replicas)
	for i := range reps {
		net, err := models.New(cfg.Model, c.Input, wb, 1, cfg.Seed, models.WithOpWorkers(r.opWorkers))
		if err != nil {
			r.close()
			return nil, err
		}
		reps[i] = net
		r.nets = append(r.nets, net)
	}
	r.net = r.nets[0]
	o := cfg.Optim
	hyper := compress.Hyper{Momentum: o.Momentum, Nesterov: o.Nesterov, WeightDecay: o.WeightDecay}
	exchangers := make([]dist.Exchanger, s.Workers)
	for _, m := range members {
		info := func(step int) compress.StepInfo {
			// StepsPerEpoch only places the compressors' warm-ups, which are off.
			return compress.StepInfo{Step: step, StepsPerEpoch: 1000, Worker: m.Rank(), Workers: m.Size(), Params: r.net.Flat()}
		}
		if h.member != nil {
			m = h.member(m)
		}
		x, err := compress.NewExchange(cfg.Compress, r.net.Params(), m, cfg.Seed, hyper, info)
		if err != nil {
			r.close()
			return nil, err
		}
		r.exchanges = append(r.exchanges, x)
		exchangers[m.Rank()] = x
		if h.exchange != nil {
			exchangers[m.Rank()] = h.exchange(x)
		}
	}
	if r.engine, err = dist.NewEngine(members, reps, exchangers); err != nil {
		r.close()
		return nil, err
	}
	if !h.noFuse {
		_ = r.engine.Fuse() // as the trainer does: where the mean is the same
	}
	if r.opt, err = optim.New(cfg.Optim); err != nil {
		r.close()
		return nil, err
	}
	first := r.exchanges[0]
	if err := compress.FitOptimizer(r.opt, first.Compressor(), first.CompressedTensors(), cfg.Compress.Name, cfg.Optim.Name); err != nil {
		r.close()
		return nil, err
	}
	r.x, r.y = randomBatch(c)
	r.xw, r.yw = len(r.x)/s.Workers, len(r.y)/s.Workers
	return r, nil
}

func (r *engineRun) close() {
	for _, m := range r.members {
		m.Close()
	}
}

// batch is local worker w's slice of the global batch.
func (r *engineRun) batch(w int) ([]float32, []int32) {
	return r.x[w*r.xw : (w+1)*r.xw], r.y[w*r.yw : (w+1)*r.yw]
}

// lr is small: the batch is random, the update only has to happen.
const engineLR = 1e-3

// trainStep is internal/train's trainStep without the data fill: the engine's
// step (every worker's forward and backward, the exchange), the optimizer step
// on replica 0 and the copy of its parameters to the other replicas.
func (r *engineRun) trainStep() error {
	if _, err := r.engine.Step(r.step, r.batch); err != nil {
		return err
	}
	r.step++
	params := r.net.Params()
	if r.cfg.Optim.ClipNorm > 0 {
		optim.ClipGlobalNorm(params, r.cfg.Optim.ClipNorm)
	}
	if err := r.opt.Step(params, engineLR); err != nil {
		return err
	}
	r.engine.SyncReplicas()
	return nil
}

// MeasureEngine times full training steps of the case's model in each
// scenario, on one fixed random global batch (the data fill is not timed):
// warmup untimed steps per scenario, then trials rounds in which every
// scenario runs a block of steps steps, each step timed on its own. The
// scenarios are interleaved, and their order rotates from one round to the
// next, so that a change in the machine's load reaches them alike. A block's
// figure is its median step, as in Measure. It stops with ctx's error when
// ctx ends (checked between steps).
func MeasureEngine(ctx context.Context, c EngineCase, steps, warmup, trials int) (EngineResult, error) {
	if steps < 1 || warmup < 0 || trials < 1 {
		return EngineResult{}, fmt.Errorf("bench: %d steps, %d warm-up steps and %d trials, expected steps >= 1, warmup >= 0, trials >= 1", steps, warmup, trials)
	}
	if len(c.Scenarios) == 0 {
		return EngineResult{}, fmt.Errorf("bench: no scenario")
	}
	if err := checkEngineMemory(c); err != nil {
		return EngineResult{}, err
	}
	runs := make([]*engineRun, len(c.Scenarios))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.close()
			}
		}
	}()
	for i, s := range c.Scenarios {
		r, err := newEngineRun(c.Case, s)
		if err != nil {
			return EngineResult{}, fmt.Errorf("scenario %v: %w", s, err)
		}
		runs[i] = r
	}
	for range warmup {
		for i, r := range runs {
			if err := ctx.Err(); err != nil {
				return EngineResult{}, err
			}
			if err := r.trainStep(); err != nil {
				return EngineResult{}, fmt.Errorf("scenario %v: %w", c.Scenarios[i], err)
			}
		}
	}
	n := len(runs)
	trialSeconds, trialCPU := make([][]float64, n), make([][]float64, n)
	compute := make([][]float64, n)
	allocBytes, allocs := make([]uint64, n), make([]uint64, n)
	times := make([]float64, steps)
	for tr := range trials {
		for k := range n {
			i := (tr + k) % n
			r := runs[i]
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			cpu0, cpuOK := processCPU()
			for s := range times {
				if err := ctx.Err(); err != nil {
					return EngineResult{}, err
				}
				t0 := time.Now()
				if err := r.trainStep(); err != nil {
					return EngineResult{}, fmt.Errorf("scenario %v: %w", c.Scenarios[i], err)
				}
				times[s] = time.Since(t0).Seconds()
				compute[i] = append(compute[i], r.engine.ComputeSeconds())
			}
			cpu1, _ := processCPU()
			runtime.ReadMemStats(&after)
			if cpuOK {
				trialCPU[i] = append(trialCPU[i], (cpu1-cpu0).Seconds()/float64(steps))
			}
			allocBytes[i] += after.TotalAlloc - before.TotalAlloc
			allocs[i] += after.Mallocs - before.Mallocs
			slices.Sort(times)
			trialSeconds[i] = append(trialSeconds[i], median(times))
		}
	}
	res := EngineResult{Model: c.Model, GlobalBatch: c.Batch, Params: runs[0].net.NumParams(), Warmup: warmup, Steps: steps, Trials: trials,
		Ops: runs[0].cfg.Model.Ops, BLAS: models.BLAS, GOMAXPROCS: runtime.GOMAXPROCS(0), Machine: version.Machine()}
	timed := float64(steps * trials)
	for i, r := range runs {
		st := Summarize(trialSeconds[i])
		slices.Sort(compute[i])
		var cpu TrialStats
		if len(trialCPU[i]) > 0 {
			cpu = Summarize(trialCPU[i])
		}
		res.Scenarios = append(res.Scenarios, ScenarioResult{
			BestCPUSeconds: cpu.Best, MedianCPUSeconds: cpu.Median,
			Scenario: r.s.String(), Unfused: r.s.Unfused, Passes: r.engine.Passes(), Workers: r.s.Workers, Replicas: r.s.Replicas, Compress: r.s.Compress,
			WorkerBatch: r.cfg.WorkerBatch(), OpWorkers: r.opWorkers, TrialSeconds: trialSeconds[i],
			BestSeconds: st.Best, MedianSeconds: st.Median, Spread: st.Spread, ComputeSeconds: median(compute[i]),
			AllocBytesPerStep: float64(allocBytes[i]) / timed, AllocsPerStep: float64(allocs[i]) / timed,
		})
	}
	base := res.Scenarios[0]
	for i := range res.Scenarios {
		sr := &res.Scenarios[i]
		sr.BestRatio, sr.MedianRatio = sr.BestSeconds/base.BestSeconds, sr.MedianSeconds/base.MedianSeconds
		if sr.Compress == "none" {
			continue
		}
		// Against the dense step as the trainer runs it (fused where it can be).
		for _, o := range res.Scenarios {
			if o.Compress == "none" && o.Workers == sr.Workers && o.Replicas == sr.Replicas && !o.Unfused {
				b, m := sr.BestSeconds/o.BestSeconds-1, sr.MedianSeconds/o.MedianSeconds-1
				sr.BestOverhead, sr.MedianOverhead = &b, &m
				break
			}
		}
	}
	return res, nil
}
