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
	Model            string   `json:"model"`
	Dataset          string   `json:"dataset"`
	Epochs           int      `json:"epochs"`
	Steps            int      `json:"steps"`
	GlobalBatch      int      `json:"global_batch"`
	Workers          int      `json:"workers"`
	Optimizer        string   `json:"optimizer"`
	Compressor       string   `json:"compressor"`
	Seed             int64    `json:"seed"`
	Version          string   `json:"version"`
	GoVersion        string   `json:"go_version"`
	BLAS             string   `json:"blas"`
	Params           int      `json:"params"`
	TestAccuracy     *float64 `json:"test_accuracy,omitempty"`
	TestLoss         float64  `json:"test_loss"`
	ValBPC           *float64 `json:"val_bpc,omitempty"`
	TrainLossFinal   float64  `json:"train_loss_final"`
	WallSeconds      float64  `json:"wall_seconds"`
	SamplesPerSecond float64  `json:"samples_per_second"`
	BytesDense       int64    `json:"bytes_dense"`
	BytesSent        int64    `json:"bytes_sent"`
	CompressionRatio float64  `json:"compression_ratio"`
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
	Seconds          float64  `json:"seconds"`
	SamplesPerSecond float64  `json:"samples_per_second"`
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
