package train

import (
	"cmp"
	"math"
	"slices"
	"strings"
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

// bruteTracIn recomputes, with the reference (Gorgonia) layers, every
// TracInCP score sum_t lr_t grad l(z; w_t) . grad l(z'; w_t) of the training
// examples train (the run's, labels flipped as it trained) on the test
// examples test, and bound[j][k] = sum_t lr_t ||grad l(z)|| ||grad l(z')||.
func bruteTracIn(t *testing.T, dir string, trainIdx, testIdx []int) (scores, bound [][]float64) {
	t.Helper()
	back, err := configs.Load(dir+"/config.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, te, err := data.OpenTrainTest(data.Options{Name: back.Data.Name, Dir: back.Data.Dir, Normalize: back.Data.Normalize})
	if err != nil {
		t.Fatal(err)
	}
	noisy, _ := data.NewNoisyLabels(tr, back.Data.LabelNoise, uint64(back.Seed))
	mc := back.Model
	mc.Ops = models.OpsGorgonia
	ref, err := models.New(mc, models.Input{Shape: tr.XShape(), Classes: tr.Classes(), YLen: 1}, 1, 1, back.Seed)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := listCheckpoints(dir)
	lay := layoutOf(ref, 1, nil)
	x := make([]float32, 28*28)
	y := make([]int32, 1)
	grad := func(d data.Dataset, i int) []float64 {
		d.Fill([]int{i}, x, y)
		if _, err := ref.Step(x, y); err != nil {
			t.Fatal(err)
		}
		g := make([]float64, len(ref.Grad()))
		for k, v := range ref.Grad() {
			g[k] = float64(v)
		}
		return g
	}
	scores, bound = make([][]float64, len(testIdx)), make([][]float64, len(testIdx))
	for j := range testIdx {
		scores[j], bound[j] = make([]float64, len(trainIdx)), make([]float64, len(trainIdx))
	}
	for fi := len(files) - 1; fi >= 0; fi-- {
		c, err := loadCheckpoint(files[fi].path, lay)
		if err != nil {
			t.Fatal(err)
		}
		lr := c.Epochs[len(c.Epochs)-1].LR
		copy(ref.Flat(), c.Params)
		for j, ti := range testIdx {
			b := grad(te, ti)
			for k, zi := range trainIdx {
				a := grad(noisy, zi)
				var dot, na, nb float64
				for i := range a {
					dot, na, nb = dot+a[i]*b[i], na+a[i]*a[i], nb+b[i]*b[i]
				}
				scores[j][k] += lr * dot
				bound[j][k] += lr * math.Sqrt(na*nb)
			}
		}
	}
	return scores, bound
}

// TestInfluenceProponents: the proponents and opponents of three test
// examples among 12 scored training examples are those of a brute-force
// recomputation of every TracInCP score with the reference layers: the same
// examples in the same order, the same scores.
func TestInfluenceProponents(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=2", "data.label_noise=0.1")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	tests := []int{0, 5, 9}
	res, err := Influence(dir, InfluenceOptions{Examples: 12, Seed: 3, Top: []float64{0.5}, Test: tests, K: 3})
	if err != nil {
		t.Fatal(err)
	}
	var scored []int
	for _, e := range res.Self {
		scored = append(scored, e.Index)
	}
	want, _ := bruteTracIn(t, dir, scored, tests)
	if len(res.Tests) != len(tests) {
		t.Fatalf("%d test results", len(res.Tests))
	}
	for j, ti := range res.Tests {
		if ti.Index != tests[j] {
			t.Fatalf("test %d: index %d", j, ti.Index)
		}
		order := make([]int, len(scored))
		for k := range order {
			order[k] = k
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(want[j][b], want[j][a]) })
		var pro, opp []int
		for _, k := range order[:3] {
			if want[j][k] > 0 {
				pro = append(pro, k)
			}
		}
		for n := len(order) - 1; n >= len(order)-3; n-- {
			if want[j][order[n]] < 0 {
				opp = append(opp, order[n])
			}
		}
		check := func(kind string, got []Influencer, ks []int) {
			if len(got) != len(ks) {
				t.Fatalf("test %d: %d %s, brute force %d", ti.Index, len(got), kind, len(ks))
			}
			for r, k := range ks {
				if got[r].Index != scored[k] || math.Abs(got[r].Score-want[j][k]) > 1e-4*math.Abs(want[j][k])+1e-9 {
					t.Errorf("test %d %s %d: example %d score %v, brute force example %d score %v", ti.Index, kind, r+1, got[r].Index, got[r].Score, scored[k], want[j][k])
				}
			}
		}
		check("proponents", ti.Proponents, pro)
		check("opponents", ti.Opponents, opp)
		if len(pro)+len(opp) == 0 {
			t.Errorf("test %d: no proponent or opponent", ti.Index)
		}
	}
	if _, err := Influence(dir, InfluenceOptions{Examples: 12, Test: []int{64}, K: 3}); err == nil || !strings.Contains(err.Error(), "test example 64") {
		t.Errorf("a test index past the split: %v", err)
	}
	// Test gradients and scores beyond the memory available are refused
	// before any gradient is taken.
	t.Setenv(memoryLimitEnv, "1KiB")
	if _, err := Influence(dir, InfluenceOptions{Examples: 12, Test: []int{0, 1}, K: 3}); err == nil ||
		!strings.Contains(err.Error(), "influence: 2 test examples need about") || !strings.Contains(err.Error(), "("+memoryLimitEnv+")") {
		t.Errorf("test gradients over the memory limit: %v", err)
	}
}

// TestRandomProjectionUnbiased: over 4000 independent projections G (n = 50
// to d = 16), the mean of (G^T a).(G^T b) is a.b and the mean of ||G^T a||^2
// is ||a||^2, each within 4 standard errors, the variance of one draw being
// (||a||^2 ||b||^2 + (a.b)^2)/d. Entries of variance 1 instead of 1/d would
// be off by a factor 16, of 1/sqrt(d) by 4.
func TestRandomProjectionUnbiased(t *testing.T) {
	const n, d, draws = 50, 16, 4000
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(math.Sin(float64(i)))
		b[i] = float32(math.Cos(float64(2*i)) + 0.3*math.Sin(float64(i)))
	}
	ab, aa, bb := dot32(a, b), dot32(a, a), dot32(b, b)
	pa, pb := make([]float32, d), make([]float32, d)
	var sumAB, sumAA float64
	for s := range draws {
		p := newRandomProjection(n, d, uint64(s))
		p.apply(1, a, pa)
		p.apply(1, b, pb)
		sumAB += dot32(pa, pb)
		sumAA += dot32(pa, pa)
	}
	seAB := math.Sqrt((aa*bb + ab*ab) / d / draws)
	seAA := math.Sqrt(2 * aa * aa / d / draws)
	if m := sumAB / draws; math.Abs(m-ab) > 4*seAB {
		t.Errorf("mean projected a.b %v, exact %v (standard error %v)", m, ab, seAB)
	}
	if m := sumAA / draws; math.Abs(m-aa) > 4*seAA {
		t.Errorf("mean projected ||a||^2 %v, exact %v (standard error %v)", m, aa, seAA)
	}
	// Rows projected together equal rows projected one by one.
	p := newRandomProjection(n, d, 9)
	both := make([]float32, 2*d)
	p.apply(2, append(slices.Clone(a), b...), both)
	p.apply(1, a, pa)
	if !slices.Equal(both[:d], pa) {
		t.Error("a batch of two rows differs from one row")
	}
}

// TestInfluenceProjection: proponent scores through a random projection to
// 1024 dimensions against the exact ones (brute force). Each projected score
// is within 5 standard deviations, sum_t lr_t ||a_t|| ||b_t|| sqrt(2/1024),
// of the exact one, and the projected scores regress on the exact ones with
// a slope near 1 (a projection off by a scale would be off by that factor).
func TestInfluenceProjection(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=2", "data.label_noise=0.1")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	tests := []int{1, 2, 3, 4}
	const d = 1024
	res, err := Influence(dir, InfluenceOptions{Examples: 10, Seed: 4, Top: []float64{0.5}, Test: tests, K: 10, Project: d, ProjectSeed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Projection != d {
		t.Fatalf("projection %d", res.Projection)
	}
	var scored []int
	for _, e := range res.Self {
		scored = append(scored, e.Index)
	}
	want, bound := bruteTracIn(t, dir, scored, tests)
	pos := map[int]int{}
	for k, i := range scored {
		pos[i] = k
	}
	var sxy, sxx float64
	pairs := 0
	for j, ti := range res.Tests {
		for _, e := range append(slices.Clone(ti.Proponents), ti.Opponents...) {
			k := pos[e.Index]
			if err := math.Abs(e.Score - want[j][k]); err > 5*bound[j][k]*math.Sqrt(2.0/d) {
				t.Errorf("test %d, example %d: projected %v, exact %v (bound %v)", ti.Index, e.Index, e.Score, want[j][k], 5*bound[j][k]*math.Sqrt(2.0/d))
			}
			sxy += e.Score * want[j][k]
			sxx += want[j][k] * want[j][k]
			pairs++
		}
	}
	if pairs < 30 {
		t.Fatalf("%d scores compared", pairs)
	}
	if slope := sxy / sxx; math.Abs(slope-1) > 0.15 {
		t.Errorf("projected scores against exact: slope %v over %d pairs", slope, pairs)
	}
	if _, err := Influence(dir, InfluenceOptions{Examples: 10, Test: tests, K: 1, Project: 1 << 20}); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("an oversized projection: %v", err)
	}
}
