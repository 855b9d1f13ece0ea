package train

import (
	"math"
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/models"
)

// TestInfluenceAgainstReference trains a small run with 10% of its labels
// flipped, scores 6 examples, and recomputes each self-influence
// sum_t lr_t ||grad l(z; w_t)||^2 with the reference (Gorgonia) layers from
// the same checkpoints.
func TestInfluenceAgainstReference(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=2", "data.label_noise=0.1")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	res, err := Influence(dir, InfluenceOptions{Examples: 6, Seed: 3, Top: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Checkpoints) != 2 || len(res.Self) != 6 {
		t.Fatalf("%d checkpoints and %d scores, want 2 and 6", len(res.Checkpoints), len(res.Self))
	}
	back, err := configs.Load(dir+"/config.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := data.OpenTrainTest(data.Options{Name: back.Data.Name, Dir: back.Data.Dir, Normalize: back.Data.Normalize})
	if err != nil {
		t.Fatal(err)
	}
	noisy, _ := data.NewNoisyLabels(train, 0.1, uint64(back.Seed))
	mc := back.Model
	mc.Ops = models.OpsGorgonia
	ref, err := models.New(mc, models.Input{Shape: train.XShape(), Classes: train.Classes(), YLen: 1}, 1, 1, back.Seed)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := listCheckpoints(dir)
	lay := layoutOf(ref, 1, nil)
	x := make([]float32, 28*28)
	y := make([]int32, 1)
	for _, e := range res.Self {
		var want float64
		for fi := len(files) - 1; fi >= 0; fi-- {
			c, err := loadCheckpoint(files[fi].path, lay)
			if err != nil {
				t.Fatal(err)
			}
			copy(ref.Flat(), c.Params)
			noisy.Fill([]int{e.Index}, x, y)
			if _, err := ref.Step(x, y); err != nil {
				t.Fatal(err)
			}
			var sq float64
			for _, g := range ref.Grad() {
				sq += float64(g) * float64(g)
			}
			want += c.Epochs[len(c.Epochs)-1].LR * sq
		}
		if math.Abs(e.Score-want) > 1e-4*want+1e-9 {
			t.Errorf("example %d: self-influence %v, reference %v", e.Index, e.Score, want)
		}
		if e.Mislabeled != noisy.Flipped(e.Index) {
			t.Errorf("example %d: mislabeled %v", e.Index, e.Mislabeled)
		}
	}
	for i := 1; i < len(res.Self); i++ {
		if res.Self[i].Score > res.Self[i-1].Score {
			t.Fatal("self-influences not sorted highest first")
		}
	}
	last, err := Influence(dir, InfluenceOptions{Examples: 6, Seed: 3, LastLayer: true, Top: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if last.Self[0].Score >= res.Self[0].Score*1.0001 {
		t.Errorf("the last layer's self-influence %v exceeds the whole model's %v", last.Self[0].Score, res.Self[0].Score)
	}
}
