package train

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/models"
)

// TracInCP (Pruthi et al., NeurIPS 2020) estimates how much a training
// example z influenced the model from the checkpoints a run saved:
// TracIn(z, z') = sum over checkpoints t of lr_t grad l(z; w_t) . grad l(z'; w_t).
// Its self-influence TracIn(z, z) ranks the examples the training loss found
// hardest to fit; mislabelled examples rank high, which is the paper's
// mislabelled-data experiment. TracIn(z, z') for a test example z' ranks the
// training examples that helped it (proponents) and hurt it (opponents).

// InfluenceOptions choose the examples and the gradient.
type InfluenceOptions struct {
	Examples  int       // training examples scored (the first of a seeded permutation); 0 = all
	LastLayer bool      // the paper's fast variant: gradients of the last layer's parameters only
	Seed      uint64    // the permutation
	Top       []float64 // ranking fractions reported (e.g. 0.1, 0.2)
	// Test lists examples of the test split whose proponents and opponents
	// are reported: the K scored training examples of highest and of lowest
	// TracInCP influence on each.
	Test []int
	K    int
	// Project, when > 0, replaces the gradients in the proponent scores by
	// random projections to Project dimensions (randomProjection, drawn from
	// ProjectSeed; influence_tracer.go); self-influence stays exact.
	Project     int
	ProjectSeed uint64
	Out         string // where the result goes; "" = RUN_DIR/influence.json
}

// InfluenceResult is what gradwire influence reports.
type InfluenceResult struct {
	Checkpoints []string  `json:"checkpoints"`
	LRs         []float64 `json:"learning_rates"`
	Examples    int       `json:"examples"`
	LastLayer   bool      `json:"last_layer"`
	Flipped     int       `json:"flipped"` // mislabelled examples among those scored (data.label_noise)
	Top         []float64 `json:"top_fractions"`
	// Found[ranking][i] is the fraction of the mislabelled examples within the
	// top Top[i] of the ranking: self-influence, the final checkpoint's loss,
	// and random order (its expectation, Top[i]).
	Found map[string][]float64 `json:"found"`
	// Self holds the scored examples' indices in the training split and
	// self-influences, highest first.
	Self []ScoredExample `json:"self_influence"`
	// Tests holds the proponents and opponents of each chosen test example;
	// Projection is the random projection's dimension (0: exact dot
	// products) and ProjectionSeed its seed.
	Tests          []TestInfluence `json:"tests,omitempty"`
	Projection     int             `json:"projection_dim,omitempty"`
	ProjectionSeed uint64          `json:"projection_seed,omitempty"`
}

// TestInfluence is one test example's most influential training examples:
// Proponents the K highest TracInCP scores (training on them lowered the
// test example's loss, to first order), highest first; Opponents the K
// lowest (they raised it), lowest first.
type TestInfluence struct {
	Index      int          `json:"index"` // in the test split
	Label      int          `json:"label"`
	Predicted  int          `json:"predicted"` // at the final checkpoint
	Loss       float64      `json:"loss"`      // at the final checkpoint
	Proponents []Influencer `json:"proponents"`
	Opponents  []Influencer `json:"opponents"`
}

// Influencer is a training example's TracInCP influence on a test example:
// sum over checkpoints t of lr_t grad l(z; w_t) . grad l(z'; w_t).
type Influencer struct {
	Index      int     `json:"index"` // in the training split
	Label      int     `json:"label"` // as the run trained on it
	Score      float64 `json:"score"`
	Mislabeled bool    `json:"mislabeled,omitempty"`
}

// ScoredExample is one training example's score.
type ScoredExample struct {
	Index      int     `json:"index"`
	Score      float64 `json:"score"`
	Loss       float64 `json:"loss"` // at the final checkpoint
	Mislabeled bool    `json:"mislabeled,omitempty"`
}

// Influence computes the self-influence of training examples over a run's
// epoch-end checkpoints and, when the run flipped labels (data.label_noise),
// how many of the flipped ones each ranking finds. It writes
// RUN_DIR/influence.json.
func Influence(runDir string, o InfluenceOptions) (*InfluenceResult, error) {
	cfg, err := configs.Load(filepath.Join(runDir, "config.yaml"), nil)
	if err != nil {
		return nil, err
	}
	dopts := data.Options{Name: cfg.Data.Name, Dir: cfg.Data.Dir, SeqLen: cfg.Data.SeqLen, Normalize: cfg.Data.Normalize}
	train, test, err := data.OpenTrainTest(dopts)
	if err != nil {
		return nil, err
	}
	for _, i := range o.Test {
		if i < 0 || i >= test.Len() {
			return nil, fmt.Errorf("influence: test example %d: expected an index in [0, %d) of the test split", i, test.Len())
		}
	}
	if len(o.Test) > 0 && o.K < 1 {
		return nil, fmt.Errorf("influence: %d proponents per test example: expected >= 1", o.K)
	}
	if o.Project < 0 {
		return nil, fmt.Errorf("influence: projection to %d dimensions: expected >= 0 (0 = exact dot products)", o.Project)
	}
	// The training set exactly as the run saw it: held-out split removed,
	// labels flipped from the same seed.
	if cfg.Data.Validation > 0 {
		if train, _, err = holdOut(train, cfg.Data.Validation); err != nil {
			return nil, err
		}
	}
	var noisy *data.NoisyLabels
	if cfg.Data.LabelNoise > 0 {
		if noisy, err = data.NewNoisyLabels(train, cfg.Data.LabelNoise, uint64(cfg.Seed)); err != nil {
			return nil, err
		}
		train = noisy
	}
	if train.YLen() != 1 {
		return nil, errors.New("influence: only for classification runs")
	}
	in := models.Input{Shape: train.XShape(), Classes: train.Classes(), YLen: 1}
	mc := cfg.Model
	mc.Precision = models.PrecisionFloat32
	net, err := models.New(mc, in, 1, 1, cfg.Seed)
	if err != nil {
		return nil, err
	}
	if len(net.Buffers()) > 0 {
		return nil, fmt.Errorf("influence: model %s has BatchNorm, whose per-example gradients in training mode are not the model's (only models without it)", mc.Name)
	}
	files, err := listCheckpoints(runDir)
	if err != nil {
		return nil, err
	}
	lay := layoutOf(net, cfg.Dist.Workers, nil)
	var ckpts []*checkpoint
	res := &InfluenceResult{LastLayer: o.LastLayer, Top: o.Top, Found: map[string][]float64{}}
	for i := len(files) - 1; i >= 0; i-- { // oldest first
		c, err := loadCheckpoint(files[i].path, lay)
		if err != nil {
			return nil, err
		}
		if c.StepInEpoch != 0 || len(c.Epochs) == 0 {
			continue // mid-epoch: TracInCP uses the epoch ends
		}
		ckpts = append(ckpts, c)
		res.Checkpoints = append(res.Checkpoints, filepath.Base(files[i].path))
		res.LRs = append(res.LRs, c.Epochs[len(c.Epochs)-1].LR)
	}
	if len(ckpts) == 0 {
		return nil, fmt.Errorf("influence: %s holds no epoch-end checkpoint", runDir)
	}
	n := train.Len()
	idx := rand.New(rand.NewPCG(o.Seed, 0x747261636e)).Perm(n) // "tracin"
	if o.Examples > 0 && o.Examples < n {
		idx = idx[:o.Examples]
	}
	// The last layer: the last two parameter tensors (its weights and bias).
	params := net.Params()
	from := 0
	if o.LastLayer {
		flat := net.Flat()
		from = len(flat) - len(params[len(params)-1].Value) - len(params[len(params)-2].Value)
	}
	scores := make([]ScoredExample, len(idx))
	labels := make([]int, len(idx))
	x := make([]float32, numel(train.XShape()))
	y := make([]int32, 1)
	width := len(net.Flat()) - from // the gradient's length
	tr := newTracer(o, width, len(idx))
	if tr != nil {
		if err := tr.prepare(); err != nil {
			return nil, err
		}
		res.Projection, res.ProjectionSeed = o.Project, o.ProjectSeed
		res.Tests = make([]TestInfluence, len(o.Test))
	}
	logits := make([]float32, in.Classes)
	for t, c := range ckpts {
		copy(net.Flat(), c.Params)
		last := t == len(ckpts)-1
		if tr != nil {
			// The test examples' gradients at this checkpoint, under their
			// true labels.
			for j, i := range o.Test {
				test.Fill([]int{i}, x, y)
				loss, err := net.Step(x, y)
				if err != nil {
					return nil, err
				}
				tr.setTest(j, net.Grad()[from:])
				if last {
					if err := net.Predict(x, logits); err != nil {
						return nil, err
					}
					res.Tests[j] = TestInfluence{Index: i, Label: int(y[0]), Predicted: argmax(logits), Loss: loss}
				}
			}
			tr.startCheckpoint(res.LRs[t])
		}
		for k, i := range idx {
			train.Fill([]int{i}, x, y)
			loss, err := net.Step(x, y)
			if err != nil {
				return nil, err
			}
			var sq float64
			for _, g := range net.Grad()[from:] {
				sq += float64(g) * float64(g)
			}
			scores[k].Index = i
			scores[k].Score += res.LRs[t] * sq
			labels[k] = int(y[0])
			if last {
				scores[k].Loss = loss
			}
			if tr != nil {
				tr.addTrain(k, net.Grad()[from:])
			}
		}
		if tr != nil {
			tr.flush()
		}
	}
	if noisy != nil {
		for k := range scores {
			if noisy.Flipped(scores[k].Index) {
				scores[k].Mislabeled = true
				res.Flipped++
			}
		}
	}
	res.Examples = len(scores)
	found := func(less func(a, b ScoredExample) int) []float64 {
		s := slices.Clone(scores)
		slices.SortStableFunc(s, less)
		out := make([]float64, len(o.Top))
		for j, f := range o.Top {
			top := int(f * float64(len(s)))
			hit := 0
			for _, e := range s[:top] {
				if e.Mislabeled {
					hit++
				}
			}
			if res.Flipped > 0 {
				out[j] = float64(hit) / float64(res.Flipped)
			}
		}
		return out
	}
	desc := func(v func(ScoredExample) float64) func(a, b ScoredExample) int {
		return func(a, b ScoredExample) int {
			switch x, y := v(a), v(b); {
			case x > y:
				return -1
			case x < y:
				return 1
			}
			return 0
		}
	}
	res.Found["self-influence"] = found(desc(func(e ScoredExample) float64 { return e.Score }))
	res.Found["loss"] = found(desc(func(e ScoredExample) float64 { return e.Loss }))
	res.Found["random"] = slices.Clone(o.Top)
	for j := range res.Tests {
		res.Tests[j].Proponents, res.Tests[j].Opponents = tr.extremes(j, o.K, func(k int) Influencer {
			return Influencer{Index: scores[k].Index, Label: labels[k], Mislabeled: scores[k].Mislabeled}
		})
	}
	slices.SortStableFunc(scores, desc(func(e ScoredExample) float64 { return e.Score }))
	res.Self = scores
	out := o.Out
	if out == "" {
		out = filepath.Join(runDir, "influence.json")
	}
	return res, writeJSON(out, res)
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
