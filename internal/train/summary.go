package train

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/gradwire/gradwire/internal/atomicfile"
)

// Summary is summary.json: the run's final figures. Field names are stable;
// later features add fields. Metrics that do not apply to a model are omitted
// (accuracy for the language model, bits per character for classifiers).
type Summary struct {
	Name        string `json:"name"` // the run's name (config key name)
	Model       string `json:"model"`
	Dataset     string `json:"dataset"`
	DataDir     string `json:"data_dir"` // the folder the data files were read from
	Epochs      int    `json:"epochs"`
	Steps       int    `json:"steps"`
	GlobalBatch int    `json:"global_batch"`
	Workers     int    `json:"workers"`
	Replicas    int    `json:"replicas"`
	Backend     string `json:"backend"`
	Optimizer   string `json:"optimizer"`
	// OptimizerStateBytesPerParam is the optimizer's state (momenta, moments) in
	// bytes per learnable parameter.
	OptimizerStateBytesPerParam float64  `json:"optimizer_state_bytes_per_param"`
	Compressor                  string   `json:"compressor"`
	Seed                        int64    `json:"seed"`
	Version                     string   `json:"version"`
	GoVersion                   string   `json:"go_version"`
	BLAS                        string   `json:"blas"`
	BLASCore                    string   `json:"blas_core,omitempty"` // OpenBLAS core type in use (openblas build)
	Ops                         string   `json:"ops,omitempty"`       // model.ops: fast or gorgonia
	Precision                   string   `json:"precision,omitempty"` // model.precision: float32 or float64
	Machine                     string   `json:"machine,omitempty"`   // CPU, cores, memory, OS/arch of the run
	Params                      int      `json:"params"`
	TestAccuracy                *float64 `json:"test_accuracy,omitempty"`
	TestLoss                    float64  `json:"test_loss"`
	TestExamples                int      `json:"test_examples"` // test (validation) examples each evaluation read
	ValBPC                      *float64 `json:"val_bpc,omitempty"`
	// ValLoss and ValAccuracy are the final epoch's figures on the validation
	// split data.validation holds out of the training split; absent when off.
	ValLoss          *float64 `json:"val_loss,omitempty"`
	ValAccuracy      *float64 `json:"val_accuracy,omitempty"`
	TrainLossFinal   float64  `json:"train_loss_final"`
	WallSeconds      float64  `json:"wall_seconds"`
	SamplesPerSecond float64  `json:"samples_per_second"`
	// EvalSeconds is the evaluations' wall-clock time, summed over the
	// epochs; absent when an epoch's record lacks it (a run resumed from a
	// checkpoint written before it was measured).
	EvalSeconds      float64 `json:"eval_seconds,omitempty"`
	BytesDense       int64   `json:"bytes_dense"`
	BytesSent        int64   `json:"bytes_sent"`
	CompressionRatio float64 `json:"compression_ratio"`
	// CompressionRatioSteady counts only the steps after the compressor's warm-up.
	CompressionRatioSteady float64 `json:"compression_ratio_steady"`
	// CompressionRatioByKind is the whole-run ratio per layer kind (conv, linear,
	// lstm, embed, bias, norm).
	CompressionRatioByKind map[string]float64 `json:"compression_ratio_by_kind,omitempty"`
	// TimeModel predicts a cluster with one machine per worker (absent for one worker).
	TimeModel *TimeModel `json:"time_model,omitempty"`
	// LayerParallel describes a train.mode layer_parallel run (layerpar.go).
	LayerParallel *LayerParallelSummary `json:"layer_parallel,omitempty"`
}

// TimeModel is the alpha-beta prediction of summary.json: the measured compute
// time of one worker's step plus the predicted communication on a cluster of
// `workers` machines, at 1, 10 and 100 Gbit/s.
type TimeModel struct {
	// ComputeSecondsPerStep is one worker's forward and backward plus its
	// compressor's computation (CodecSecondsPerStep, in it).
	ComputeSecondsPerStep float64 `json:"compute_seconds_per_step"`
	CodecSecondsPerStep   float64 `json:"codec_seconds_per_step,omitempty"`
	BytesPerWorkerStep    int64   `json:"bytes_per_worker_step"` // what one worker sends per steady step
	// LinkBytesPerStep is what crosses the busiest link per steady step for
	// the topology and each round's collective: (N-1) x the payload for an
	// all-gather on a ring, 2(N-1)/N x the buffer for an all-reduce.
	LinkBytesPerStep int64   `json:"link_bytes_per_step"`
	Topology         string  `json:"topology"`
	LatencyUs        float64 `json:"latency_us"`
	// Pipelined: dist.pipeline 2, predicted as max(compute, comm) a step.
	Pipelined bool `json:"pipelined,omitempty"`
	// The steady step's collective calls, in bytes each worker contributes
	// (an all-gather's: the largest payload, which its rounds wait for),
	// what the predictions cost and gradwire timemodel predict re-evaluates
	// for other clusters.
	AllReduceBytes []int64        `json:"all_reduce_bytes,omitempty"`
	AllGatherBytes []int64        `json:"all_gather_bytes,omitempty"`
	Predictions    []PredictionAt `json:"predictions"`
}

// PredictionAt is the time model's prediction at one bandwidth.
type PredictionAt struct {
	Gbps        float64 `json:"gbps"`
	CommSeconds float64 `json:"comm_seconds"`
	StepSeconds float64 `json:"step_seconds"`
	SpeedUp     float64 `json:"speedup"`
}

// EpochResult is one epoch's record in metrics.jsonl.
type EpochResult struct {
	Kind             string   `json:"kind"` // "epoch"
	Epoch            int      `json:"epoch"`
	Step             int      `json:"step"`
	LR               float64  `json:"lr"`
	TrainLoss        float64  `json:"train_loss"`
	TestLoss         float64  `json:"test_loss"`
	TestAccuracy     *float64 `json:"test_accuracy,omitempty"`
	ValBPC           *float64 `json:"val_bpc,omitempty"`
	ValLoss          *float64 `json:"val_loss,omitempty"`     // validation split (data.validation); absent when off
	ValAccuracy      *float64 `json:"val_accuracy,omitempty"` // validation split (data.validation); absent when off
	Seconds          float64  `json:"seconds"`
	SamplesPerSecond float64  `json:"samples_per_second"`
	// EvalSeconds is the wall-clock time of the epoch's evaluation (test and
	// validation splits), which Seconds leaves out; 0 in records written
	// before it was measured.
	EvalSeconds float64 `json:"eval_seconds,omitempty"`
	// The asynchronous parameter server's epoch (dist.mode ps with a
	// staleness other than 0): gradients applied, and how many updates
	// others made between each one's pull and push.
	PSPushes        int      `json:"ps_pushes,omitempty"`
	PSMeanStaleness *float64 `json:"ps_mean_staleness,omitempty"`
	PSMaxStaleness  *int     `json:"ps_max_staleness,omitempty"`
}

// stepRecord is a logged training step in metrics.jsonl.
type stepRecord struct {
	Kind  string  `json:"kind"` // "step"
	Epoch int     `json:"epoch"`
	Step  int     `json:"step"`
	Loss  float64 `json:"loss"`
	LR    float64 `json:"lr"`
}

// writeJSON writes v as indented JSON, atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}

// ReadSummary loads a run's summary.json.
func ReadSummary(path string) (*Summary, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}
