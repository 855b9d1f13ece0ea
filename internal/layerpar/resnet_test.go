package layerpar

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// randData is n random examples of a small image data set.
type randData struct {
	x       []float32
	y       []int32
	size, n int
}

func newRandData(n, size, classes int, seed uint64) randData {
	rng := rand.New(rand.NewPCG(seed, 7))
	d := randData{x: make([]float32, n*size), y: make([]int32, n), size: size, n: n}
	for i := range d.x {
		d.x[i] = float32(rng.NormFloat64())
	}
	for i := range d.y {
		d.y[i] = int32(rng.IntN(classes))
	}
	return d
}

func (d randData) Len() int { return d.n }
func (d randData) Fill(idx []int, x []float32, y []int32) {
	for i, j := range idx {
		copy(x[i*d.size:(i+1)*d.size], d.x[j*d.size:(j+1)*d.size])
		y[i] = d.y[j]
	}
}

var tinyIn = models.Input{Shape: []int{1, 8, 8}, Classes: 3, YLen: 1}

// resnetStages builds ResNet-20 on 1x8x8 inputs and its K stages with the
// net's parameters.
func resnetStages(t *testing.T, K, batch int) (*models.Net, []*models.Stage, [][]int) {
	t.Helper()
	cfg := models.Config{Name: "resnet20"}
	net, err := models.New(cfg, tinyIn, batch, 0, 3, models.WithOpWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	var stages []*models.Stage
	var bounds [][]int
	for k := range K {
		st, err := models.NewResNetStage(cfg, tinyIn, k, K, batch, models.WithOpWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := models.CopyParams(st.Params(), net.Params(), true); err != nil {
			t.Fatal(err)
		}
		stages = append(stages, st)
		if k < K-1 {
			bounds = append(bounds, st.OutShape())
		}
	}
	return net, stages, bounds
}

// TestLargeRhoRecoversSerialStep: with the auxiliary variables at the serial
// forward pass, one u-step (step 1/rho) and rho large, the stages'
// sub-problem gradients are the serial network's gradient, up to O(1/rho).
func TestLargeRhoRecoversSerialStep(t *testing.T) {
	const batch = 4
	net, stages, bounds := resnetStages(t, 2, batch)
	data := newRandData(batch, 64, 3, 1)
	x, y := make([]float32, batch*64), make([]int32, batch)
	perm := []int{0, 1, 2, 3}
	data.Fill(perm, x, y)
	if _, err := net.Step(x, y); err != nil {
		t.Fatal(err)
	}
	serial := map[string][]float32{}
	for _, p := range net.Params() {
		serial[p.Name] = append([]float32(nil), p.Grad...)
	}
	for _, rho := range []float64{1e2, 1e4} {
		_, stages, _ := resnetStages(t, 2, batch)
		cfg := Config{Method: MethodPenalty, Rho: rho, RhoGrowth: 1, RhoMax: rho, UCurvature: 0, Downsample: 1, Cycles: 1}
		ss := []Stage{stages[0], stages[1]}
		tr, err := NewTrainer(cfg, ss, []optim.Optimizer{sgd(t), sgd(t)}, data, 64, bounds, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Init(perm); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Round(perm, zeroLR); err != nil {
			t.Fatal(err)
		}
		// The sub-problems' gradients at the updated u.
		obj := tr.Objective(0)
		m := tr.Aux(0).F.Size()
		u := make([]float32, batch*m)
		for e, i := range perm {
			tr.Aux(0).V(i, u[e*m:(e+1)*m])
		}
		if _, err := obj.StageStep(stages[0], false, x, u, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.StageStep(stages[1], true, u, nil, y); err != nil {
			t.Fatal(err)
		}
		var diff, norm float64
		for _, st := range stages {
			for _, p := range st.Params() {
				s := serial[p.Name]
				for i, g := range p.Grad {
					d := float64(g - s[i])
					diff += d * d
					norm += float64(s[i]) * float64(s[i])
				}
			}
		}
		rel := math.Sqrt(diff / norm)
		t.Logf("rho %g: relative distance to the serial gradient %.2e", rho, rel)
		limit := 50 / rho
		if rel > limit {
			t.Errorf("rho %g: relative distance %.3e to the serial gradient, want < %.1e", rho, rel, limit)
		}
	}
	_ = stages
}

// TestStageObjectiveGradients checks an inner stage's AL sub-problem gradient
// (parameters; its value recomputed in float64 from the stage's output) and
// the last stage's input gradient (the u-step's g) against central
// differences of the objective's value, and the inner stage's gradient
// against the same stage built on Gorgonia's reference ops.
func TestStageObjectiveGradients(t *testing.T) {
	const batch = 8
	in := models.Input{Shape: []int{1, 16, 16}, Classes: 3, YLen: 1}
	obj := Objective{Method: MethodAL, Rho: 3}
	rng := rand.New(rand.NewPCG(5, 6))
	var s0 [2]*models.Stage
	for i, ops := range []string{models.OpsFast, models.OpsGorgonia} {
		s, err := models.NewResNetStage(models.Config{Name: "resnet20", Ops: ops}, in, 0, 2, batch)
		if err != nil {
			t.Fatal(err)
		}
		s0[i] = s
	}
	s1, err := models.NewResNetStage(models.Config{Name: "resnet20"}, in, 1, 2, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]float32{s0[0].Flat(), s1.Flat()} {
		for i := range f {
			f[i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	copy(s0[1].Flat(), s0[0].Flat())
	x := make([]float32, batch*256)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	target := make([]float32, batch*numel(s0[0].OutShape()))
	for i := range target {
		target[i] = float32(rng.NormFloat64())
	}
	value0 := func(s *models.Stage) float64 {
		if _, err := obj.StageStep(s, false, x, target, nil); err != nil {
			t.Fatal(err)
		}
		var v float64
		for i, f := range s.Output() {
			d := float64(f) - float64(target[i])
			v += d * d
		}
		return obj.Rho * 0.5 * v / batch
	}
	value0(s0[1])
	value0(s0[0])
	var diff, norm float64
	for i, g := range s0[0].Grad() {
		d := float64(g - s0[1].Grad()[i])
		diff, norm = diff+d*d, norm+float64(g)*float64(g)
	}
	if rel := math.Sqrt(diff / norm); rel > 1e-4 {
		t.Errorf("stage 0: fast and reference ops' gradients differ by %.2e (relative)", rel)
	}
	fdCheck(t, "stage 0 parameters", func() float64 { return value0(s0[0]) }, s0[0].Flat(), s0[0].Grad(), rng)

	u := make([]float32, batch*numel(s1.InShape()))
	for i := range u {
		u[i] = float32(math.Abs(rng.NormFloat64()))
	}
	y := []int32{0, 2, 1, 1, 0, 2, 2, 1}
	value1 := func() float64 {
		v, err := obj.StageStep(s1, true, u, nil, y)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fdCheck(t, "stage 1 input", value1, u, s1.InputGrad(), rng)
}

// fdCheck compares the derivative of f along a random unit direction of
// the values x with grad (f's gradient at x, read after a call of f).
func fdCheck(t *testing.T, what string, f func() float64, x, grad []float32, rng *rand.Rand) {
	t.Helper()
	f()
	g := append([]float32(nil), grad...)
	dir := unit(rng, len(g))
	var dot float64
	for i := range dir {
		dot += float64(dir[i]) * float64(g[i])
	}
	orig := append([]float32(nil), x...)
	const eps = 1e-3
	for i := range x {
		x[i] = orig[i] + eps*dir[i]
	}
	up := f()
	for i := range x {
		x[i] = orig[i] - eps*dir[i]
	}
	down := f()
	copy(x, orig)
	fd := (up - down) / (2 * eps)
	if math.Abs(fd-dot) > 0.03*math.Abs(dot)+1e-4 {
		t.Errorf("%s: directional derivative %.5f, finite difference %.5f", what, dot, fd)
	}
}

// unit is a random direction of norm 1.
func unit(rng *rand.Rand, n int) []float32 {
	d := make([]float32, n)
	var s float64
	for i := range d {
		x := rng.NormFloat64()
		d[i] = float32(x)
		s += x * x
	}
	for i := range d {
		d[i] /= float32(math.Sqrt(s))
	}
	return d
}
