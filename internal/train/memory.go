package train

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// memoryLimitEnv, when set, is the memory a run may use, in place of what the
// system reports available: bytes, or a number with a unit (512MiB, 8GiB,
// 2GB). It serves tests, and machines whose available memory is not the
// run's to take.
const memoryLimitEnv = "GRADWIRE_MEMORY_LIMIT"

// checkRunMemory estimates what this process of a run of cfg holds in memory
// and refuses the run when that exceeds the memory available, before
// anything large is allocated: a run that does not fit would otherwise die in
// Go's "fatal error: out of memory", or swap for hours. Call it once the data
// sets are open (their memory is then in use, not available) and before the
// replicas are built. in is the data's Input, evalBatch the evaluation batch
// the nets will be built with, replicas and localWorkers this process's.
// Where the available memory is unknown (not Linux, no override) it checks
// nothing.
func checkRunMemory(cfg configs.Config, in models.Input, evalBatch, replicas, localWorkers int) (memoryPlan, error) {
	available, source, ok, err := availableMemory()
	if err != nil || !ok {
		return memoryPlan{}, err
	}
	est, optimBytes, err := runEstimate(cfg, in, evalBatch)
	if err != nil {
		return memoryPlan{}, err
	}
	need, err := checkMemory(est, replicas, localWorkers, optimBytes, workerExtraBytesPerParam(cfg.Compress), available)
	if err != nil {
		if source == memoryLimitEnv {
			return memoryPlan{}, fmt.Errorf("%w\n(the memory available is the limit %s sets)", err, memoryLimitEnv)
		}
		return memoryPlan{}, fmt.Errorf("%w\n(the memory available is %s; %s sets another limit, e.g. %s=16GiB)", err, source, memoryLimitEnv, memoryLimitEnv)
	}
	return memoryPlan{need: need, available: available, ok: true}, nil
}

// AvailableMemory is the memory a run may use: the GRADWIRE_MEMORY_LIMIT
// override, else what the system reports, with its source; ok is false where
// neither is known.
func AvailableMemory() (bytes uint64, source string, ok bool, err error) { return availableMemory() }

// CheckModelMemory refuses a model of cfg on in at batch (evaluating at
// evalBatch) whose estimated memory exceeds what is available, for commands that
// build one model outside a run (bench, measure, timemodel layerpar), where it
// would otherwise end the process in the allocator. what names the model in the
// error, hint says what to change. A config the estimate cannot size passes:
// building the model reports it.
func CheckModelMemory(what, hint string, cfg models.Config, in models.Input, batch, evalBatch int) error {
	est, err := models.EstimateMemory(cfg, in, batch, evalBatch)
	if err != nil {
		return nil
	}
	avail, source, ok, err := availableMemory()
	if err != nil {
		return err
	}
	if need := est.ReplicaBytes + est.TrainBytes + est.EvalBytes; ok && need > avail {
		return fmt.Errorf("%s needs about %.1f GiB, more than the %.1f GiB available (%s): %s",
			what, float64(need)/(1<<30), float64(avail)/(1<<30), source, hint)
	}
	return nil
}

// RunMemory is checkRunMemory's estimate for callers that build replicas and
// workers of cfg themselves (gradwire bench --engine, which holds several such
// builds at once): the bytes they need, the bytes available (the
// GRADWIRE_MEMORY_LIMIT override, else what the system reports) and its
// source; ok is false where the memory available is unknown.
func RunMemory(cfg configs.Config, in models.Input, evalBatch, replicas, localWorkers int) (need float64, available uint64, source string, ok bool, err error) {
	available, source, ok, err = availableMemory()
	if err != nil {
		return 0, 0, "", false, err
	}
	est, optimBytes, err := runEstimate(cfg, in, evalBatch)
	if err != nil {
		return 0, 0, "", false, err
	}
	need, _ = checkMemory(est, replicas, localWorkers, optimBytes, workerExtraBytesPerParam(cfg.Compress), math.MaxUint64)
	return need, available, source, ok, nil
}

// runEstimate is the model's memory estimate at cfg's worker batch and the
// optimizer's state bytes per parameter, what checkMemory adds up.
func runEstimate(cfg configs.Config, in models.Input, evalBatch int) (models.Estimate, float64, error) {
	est, err := models.EstimateMemory(cfg.Model, in, cfg.WorkerBatch(), evalBatch)
	if err != nil {
		return models.Estimate{}, 0, err
	}
	optimBytes, err := optimStateBytesPerParam(cfg.Optim)
	return est, optimBytes, err
}

// memoryPlan is what checkRunMemory found: the run's estimated need and the
// memory available to it; ok is false where the memory available is unknown.
type memoryPlan struct {
	need      float64
	available uint64
	ok        bool
}

// fitsFusedPasses reports whether the graphs that fused or grouped passes
// build on their first step fit beside the run: each of the replicas holds a
// training graph over its k workers' batches at once (k times the
// activations), and with grouped passes k gradients; it also returns those
// bytes. True where the memory available is unknown.
func (m memoryPlan) fitsFusedPasses(cfg configs.Config, in models.Input, evalBatch, replicas, k int, grouped bool) (bool, float64, error) {
	est, err := models.EstimateMemory(cfg.Model, in, k*cfg.WorkerBatch(), evalBatch)
	if err != nil {
		return false, 0, err
	}
	perReplica := float64(est.TrainBytes)
	if grouped {
		perReplica += float64(k) * float64(est.Params) * 4
	}
	extra := float64(replicas) * perReplica
	return !m.ok || m.need+extra <= float64(m.available), extra, nil
}

// checkMemory refuses a run whose estimated memory exceeds available bytes,
// with the estimate broken down by part. The run holds:
//
//	replicas x (est.ReplicaBytes + est.TrainBytes)   each replica's net
//	+ est.EvalBytes                                  the evaluating replica's graph
//	+ P x optimStateBytesPerParam                    the optimizer's state
//	+ localWorkers x P x (4 + workerExtraBytesPerParam)
//	                                                 each worker's gradient (4 bytes a parameter),
//	                                                 exchange buffers and compressor state
func checkMemory(est models.Estimate, replicas, localWorkers int, optimStateBytesPerParam, workerExtraBytesPerParam float64, available uint64) (float64, error) {
	p := float64(est.Params)
	perReplica := float64(est.ReplicaBytes) + float64(est.TrainBytes)
	replicaTotal := float64(replicas) * perReplica
	optimTotal := p * optimStateBytesPerParam
	perWorker := p * (4 + workerExtraBytesPerParam)
	workerTotal := float64(localWorkers) * perWorker
	need := replicaTotal + float64(est.EvalBytes) + optimTotal + workerTotal
	if need <= float64(available) {
		return need, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "not enough memory: the run needs about %s, more than the %s available:\n", human(need), human(float64(available)))
	fmt.Fprintf(&b, "  model replicas (dist.replicas): %d x %s = %s (%s parameters: %s for parameters and gradients, %s for training activations)\n",
		replicas, human(perReplica), human(replicaTotal), commas(est.Params), human(float64(est.ReplicaBytes)), human(float64(est.TrainBytes)))
	fmt.Fprintf(&b, "  evaluation activations (data.eval_batch_size): %s\n", human(float64(est.EvalBytes)))
	fmt.Fprintf(&b, "  optimizer state: %s (%g bytes a parameter)\n", human(optimTotal), optimStateBytesPerParam)
	fmt.Fprintf(&b, "  workers (dist.workers): %d x %s = %s (gradient, exchange buffers and compressor state: %g bytes a parameter)\n",
		localWorkers, human(perWorker), human(workerTotal), 4+workerExtraBytesPerParam)
	b.WriteString("expected a run that fits: a smaller model, data.batch_size, data.eval_batch_size, dist.workers or dist.replicas")
	return need, fmt.Errorf("%s", b.String())
}

// human writes a byte count in binary units: "512 B", "3.4 MiB", "161.2 GiB".
func human(bytes float64) string {
	const units = "KMGTPE"
	if bytes < 1024 {
		return fmt.Sprintf("%.0f B", bytes)
	}
	i, v := -1, bytes
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// availableMemory is the memory the run may use: memoryLimitEnv when set,
// else what the system reports available (version.AvailableMemory); ok false
// when neither is known. A malformed override is an error.
func availableMemory() (bytes uint64, source string, ok bool, err error) {
	if v, set := os.LookupEnv(memoryLimitEnv); set {
		n, err := parseBytes(v)
		if err != nil {
			return 0, "", false, fmt.Errorf("%s: %q: %w", memoryLimitEnv, v, err)
		}
		return n, memoryLimitEnv, true, nil
	}
	bytes, source, ok = version.AvailableMemory()
	return bytes, source, ok, nil
}

// parseBytes reads "123", "512MiB", "8GiB", "2GB", "1.5TiB" (decimal units
// are powers of 1000, binary ones of 1024; "K", "M", "G", "T" alone are
// binary).
func parseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	mult, ok := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "KiB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "MiB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GiB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TiB": 1 << 40, "TB": 1e12,
	}[unit]
	x, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || x < 0 || x*mult >= math.MaxUint64 {
		return 0, fmt.Errorf("expected a number of bytes, optionally with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 8GiB")
	}
	return uint64(x * mult), nil
}

// optimStateBytesPerParam is the state the optimizer of c keeps per parameter
// (momenta, moments): measured by taking one step with it on a probe tensor,
// so that it follows the optimizers' code rather than a table. Per-tensor
// state (NovoGrad's second moment) adds 4 bytes per tensor, counted here as
// 4 bytes per probeSize parameters.
func optimStateBytesPerParam(c optim.Config) (float64, error) {
	o, err := optim.New(c)
	if err != nil {
		return 0, err
	}
	const probeSize = 1024
	p := optim.Param{Name: "probe", Shape: []int{32, 32}, Kind: optim.KindLinear,
		Value: make([]float32, probeSize), Grad: make([]float32, probeSize)}
	for i := range p.Value {
		// Non-zero weights and gradients: the trust-ratio optimizers
		// (LARS, LAMB) take their ordinary path.
		p.Value[i], p.Grad[i] = 0.01*float32(i%7+1), 0.001*float32(i%5+1)
	}
	if err := o.Step([]optim.Param{p}, c.LR); err != nil {
		return 0, fmt.Errorf("optimizer %s: probe step: %w", c.Name, err)
	}
	return float64(optim.StateBytes(o)) / probeSize, nil
}

// workerExtraBytesPerParam is what one logical worker holds per parameter
// besides its 4-byte gradient, with the compressor of c: the exchange's
// packed copy of the gradient (4 bytes) and, when a compressor runs, its
// decompressed mean (4) and the compressor's buffers of a training step, as
// package compress allocates them (counted as if every tensor were
// compressed: small and one-dimensional tensors travel dense and cost less):
//
//	none      nothing more (every tensor is one dense all-reduce)
//	fp16      its rounded copy (4)
//	topk,     error feedback (residual, compensated gradient, what was sent:
//	randomk   12, with compress.residual), the selected indices and values and
//	          two alternating payloads of them (3 x 8 bytes x compress.density);
//	          randomk's chosen-bit set (1/8)
//	onebit    error feedback (12) and two payloads of a bit a value (1/4)
//	dgc       velocity and momentum (8), selections and payloads as topk
//	adacomp   residual, compensated and sent (12), the selected indices
//	          (int32) and the bit stream and two payloads of a byte or two a
//	          selected value (1: 0.95 measured on the random gradients of
//	          TestWorkerExtraBytesMatchesHeap)
//	powersgd  the matrix view and the residual (8); P and Q are low rank
//
// Buffers the compressors allocate only for inspection (DGC's Compensated
// and Sent, PowerSGD's Sent) are not a training step's and are left out.
// unlistedCompressorBytes is the state assumed for a compressor the table below
// does not list: more than any listed one holds, so that the estimate errs high.
const unlistedCompressorBytes = 14

func workerExtraBytesPerParam(c compress.Config) float64 {
	const exchange = 4 // the exchange's dense or packed copy of the gradient
	if c.Name == "none" {
		return exchange
	}
	const out = 4 // the exchange's decompressed mean
	sparse := 3 * 8 * c.Density
	var comp float64
	switch c.Name {
	case "fp16":
		comp = 4
	case "topk", "randomk":
		comp = sparse
		if c.Residual {
			comp += 4 // the residual (sparse error feedback: no dense copies)
		}
		if c.Name == "randomk" {
			comp += 1.0 / 8
		}
	case "onebit", "efsignsgd":
		comp = 12 + 2.0/8
	case "dgc":
		comp = 8 + sparse
	case "adacomp":
		comp = 12 + 1
	case "powersgd":
		comp = 8
	case "qsgd":
		comp = 1 // the encoded payload: about 4 bits an element plus a norm per bucket
	case "terngrad":
		comp = 0.5 // 2 bits an element
	case "scalecom":
		comp = 11.25 + sparse // the low-pass memory, the compensated gradient, scratch
	case "gradiveq":
		// Measured on the heap test's tensors; its sampling sums also hold
		// slice_size^2 float64 values per tensor, which this per-parameter
		// figure does not scale with.
		comp = 19
	case "lgc":
		// Error feedback (12), the momentum with momentum correction (4),
		// the values at the master's indices and the autoencoder's weights
		// and Adam moments (three copies of K x hidden per network, K the
		// summed k): 22.3 bytes a parameter in all without the momentum,
		// measured on the heap test's 8 workers.
		comp = 19 + sparse
	default:
		// A compressor added to the registry but not here: assume the
		// costliest above rather than nothing.
		comp = unlistedCompressorBytes + sparse
	}
	return exchange + out + comp
}
