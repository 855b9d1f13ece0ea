package layerpar

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// scalarStage is the package doc's toy stage F(x) = (1+a) x, applied to every
// value of an input of the given shape; as the last stage its loss is
// 0.5 mean_i ||F(x_i) - y_i||^2 with the label y_i read as a number.
type scalarStage struct {
	a      []float32 // the parameter a (one value)
	grad   []float32
	shape  []int
	batch  int
	last   bool
	out    []float32
	inGrad []float32
}

func newScalarStage(a float32, shape []int, batch int, last bool) *scalarStage {
	n := batch * numel(shape)
	return &scalarStage{a: []float32{a}, grad: make([]float32, 1), shape: shape, batch: batch, last: last,
		out: make([]float32, n), inGrad: make([]float32, n)}
}

func (s *scalarStage) Step(x, target []float32, y []int32) (float64, error) {
	m := numel(s.shape)
	k := 1 + s.a[0]
	var loss, ga float64
	for i := range s.batch {
		for j := range m {
			idx := i*m + j
			s.out[idx] = k * x[idx]
			var t float32
			if s.last {
				t = float32(y[i])
			} else {
				t = target[idx]
			}
			r := s.out[idx] - t
			loss += 0.5 * float64(r) * float64(r)
			ga += float64(r) * float64(x[idx])
			s.inGrad[idx] = r * k / float32(s.batch)
		}
	}
	b := float64(s.batch)
	s.grad[0] = float32(ga / b)
	return loss / b, nil
}
func (s *scalarStage) Output() []float32    { return s.out }
func (s *scalarStage) InputGrad() []float32 { return s.inGrad }
func (s *scalarStage) Params() []optim.Param {
	return []optim.Param{{Name: "a", Shape: []int{1}, Value: s.a, Grad: s.grad}}
}
func (s *scalarStage) Buffers() []models.Buffer { return nil }
func (s *scalarStage) Batch() int               { return s.batch }
func (s *scalarStage) InShape() []int           { return s.shape }
func (s *scalarStage) OutShape() []int          { return s.shape }

// constData is n examples with every input value x and label y.
type constData struct {
	n, size int
	x       float32
	y       int32
}

func (d constData) Len() int { return d.n }
func (d constData) Fill(idx []int, x []float32, y []int32) {
	for i := range idx {
		for j := range d.size {
			x[i*d.size+j] = d.x
		}
		y[i] = d.y
	}
}

func sgd(t *testing.T) optim.Optimizer {
	t.Helper()
	c := optim.DefaultConfig()
	c.WeightDecay = 0
	o, err := optim.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// toy builds the doc's two-stage scalar net (x = 1, y = 2, a = 0.1, b = 0.2).
func toy(t *testing.T, cfg Config) (*Trainer, *scalarStage, *scalarStage) {
	t.Helper()
	s1 := newScalarStage(0.1, []int{1, 1, 1}, 1, false)
	s2 := newScalarStage(0.2, []int{1, 1, 1}, 1, true)
	tr, err := NewTrainer(cfg, []Stage{s1, s2}, []optim.Optimizer{sgd(t), sgd(t)}, constData{n: 1, size: 1, x: 1, y: 2},
		1, [][]int{{1, 1, 1}}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tr, s1, s2
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6f, want %.6f (+- %g)", what, got, want, tol)
	}
}

func zeroLR(int) float64 { return 0 }

// TestScalarPenalty reproduces the package doc's worked example: at u = z1
// the b-gradient is exact and the a-gradient 0; after an exact u-step (u_curvature
// (1+b)^2) the two parallel gradients approach the serial ones as rho grows.
func TestScalarPenalty(t *testing.T) {
	want := map[float64][3]float64{
		1:    {1.434426, -0.334426, -0.399758},
		10:   {1.171329, -0.713287, -0.696244},
		100:  {1.108044, -0.804416, -0.742774},
		1000: {1.100815, -0.814827, -0.747478},
	}
	for _, rho := range []float64{1, 10, 100, 1000} {
		cfg := Config{Method: MethodPenalty, Rho: rho, RhoGrowth: 1, RhoMax: rho, UCurvature: 1.44, Downsample: 1, Cycles: 1}
		tr, s1, s2 := toy(t, cfg)
		if err := tr.Init([]int{0}); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, 1)
		tr.Aux(0).V(0, v)
		near(t, "initial u", float64(v[0]), 1.1, 1e-6)
		obj := Objective{Method: MethodPenalty, Rho: rho, UCurvature: 1.44}
		// At u = z1: dJ/db exact, dJ/da 0.
		if _, err := obj.StageStep(s1, false, []float32{1}, v, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.StageStep(s2, true, v, nil, []int32{2}); err != nil {
			t.Fatal(err)
		}
		near(t, "dJ/da at u=z1", float64(s1.grad[0]), 0, 1e-6)
		near(t, "dJ/db at u=z1", float64(s2.grad[0]), -0.748, 1e-5)
		// One round at learning rate 0: the u-step only.
		if _, err := tr.Round([]int{0}, zeroLR); err != nil {
			t.Fatal(err)
		}
		tr.Aux(0).V(0, v)
		w := want[rho]
		near(t, "u*", float64(v[0]), w[0], 2e-6)
		if _, err := obj.StageStep(s1, false, []float32{1}, v, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.StageStep(s2, true, v, nil, []int32{2}); err != nil {
			t.Fatal(err)
		}
		near(t, "dJ/da", float64(s1.grad[0]), w[1], 2e-4*math.Max(1, rho/100))
		near(t, "dJ/db", float64(s2.grad[0]), w[2], 2e-6)
	}
}

// TestScalarObjectiveValues checks J's value from the stages' parts.
func TestScalarObjectiveValues(t *testing.T) {
	s1 := newScalarStage(0.1, []int{1, 1, 1}, 1, false)
	s2 := newScalarStage(0.2, []int{1, 1, 1}, 1, true)
	for _, c := range []struct {
		method   string
		rho, u   float64
		mu, want float64
	}{
		{MethodPenalty, 10, 1.1, 0, 0.5 * 0.68 * 0.68},
		{MethodPenalty, 10, 1.2, 0, 0.5*0.56*0.56 + 5*0.01},
		{MethodAL, 10, 1.2, 0.5, 0.5*0.56*0.56 + 5*0.01 + 0.5*0.1},
	} {
		obj := Objective{Method: c.method, Rho: c.rho}
		target := []float32{float32(c.u + c.mu/c.rho)}
		p1, err := obj.StageStep(s1, false, []float32{1}, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := obj.StageStep(s2, true, []float32{float32(c.u)}, nil, []int32{2})
		if err != nil {
			t.Fatal(err)
		}
		near(t, c.method+" J", obj.Value([]float64{p1, p2}, []float64{c.mu * c.mu}), c.want, 1e-5)
		// dJ/da = -rho x (u - (1+a) x) - mu x.
		near(t, c.method+" dJ/da", float64(s1.grad[0]), -c.rho*(c.u-1.1)-c.mu, 1e-4)
	}
}

// TestScalarALMultipliers: from lambda = 0, rho = 1, a and b fixed, exact
// u-steps give the doc's multiplier sequence, converging to 0.816; with
// lambda* the a-gradient at u = z1 is exact.
func TestScalarALMultipliers(t *testing.T) {
	cfg := Config{Method: MethodAL, Rho: 1, RhoGrowth: 1, RhoMax: 1, UCurvature: 1.44, Downsample: 1, Cycles: 1}
	tr, s1, _ := toy(t, cfg)
	if err := tr.Init([]int{0}); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.334, 0.532, 0.648, 0.717, 0.758, 0.782}
	for r, w := range want {
		if _, err := tr.Round([]int{0}, zeroLR); err != nil {
			t.Fatal(err)
		}
		near(t, "lambda", float64(tr.Aux(0).Mu(0)[0]), w, 5e-4)
		_ = r
	}
	for range 60 {
		if _, err := tr.Round([]int{0}, zeroLR); err != nil {
			t.Fatal(err)
		}
	}
	near(t, "lambda limit", float64(tr.Aux(0).Mu(0)[0]), 0.816, 1e-4)
	obj := Objective{Method: MethodAL, Rho: 1}
	if _, err := obj.StageStep(s1, false, []float32{1}, []float32{1.1 + 0.816}, nil); err != nil {
		t.Fatal(err)
	}
	near(t, "dJ/da with lambda*", float64(s1.grad[0]), -0.816, 1e-5)
}

// TestFilterAndBytes: the filter's sizes, D U = I, block means, and the
// traffic a round counts.
func TestFilterAndBytes(t *testing.T) {
	f := Filter{C: 16, H: 28, W: 28, S: 2}
	if f.Size() != 16*14*14 {
		t.Fatalf("size %d", f.Size())
	}
	if g := (Filter{C: 64, H: 7, W: 7, S: 2}); g.Size() != 64*4*4 {
		t.Fatalf("7x7 by 2: size %d, want %d", g.Size(), 64*16)
	}
	g := Filter{C: 2, H: 3, W: 5, S: 2}
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, g.Size())
	for i := range v {
		v[i] = rng.Float32()
	}
	up := make([]float32, g.Full())
	back := make([]float32, g.Size())
	g.Up(up, v, 1)
	g.Down(back, up, 1, 1)
	for i := range v {
		if math.Abs(float64(back[i]-v[i])) > 1e-6 {
			t.Fatalf("D U v != v at %d: %v vs %v", i, back[i], v[i])
		}
	}
	z := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	d := make([]float32, 6)
	Filter{C: 1, H: 3, W: 5, S: 2}.Down(d, z, 1, 1)
	wantD := []float32{(1 + 2 + 6 + 7) / 4., (3 + 4 + 8 + 9) / 4., (5 + 10) / 2., (11 + 12) / 2., (13 + 14) / 2., 15}
	for i := range d {
		if d[i] != wantD[i] {
			t.Fatalf("Down = %v, want %v", d, wantD)
		}
	}
	for _, fp16 := range []bool{false, true} {
		cfg := Config{Method: MethodAL, Rho: 1, RhoGrowth: 1, RhoMax: 1, UCurvature: 1, Downsample: 2, AuxFP16: fp16, Cycles: 1}
		shape := []int{2, 3, 3}
		s1 := newScalarStage(0.1, shape, 2, false)
		s2 := newScalarStage(0.2, shape, 2, true)
		tr, err := NewTrainer(cfg, []Stage{s1, s2}, []optim.Optimizer{sgd(t), sgd(t)}, constData{n: 4, size: 18, x: 1, y: 2},
			18, [][]int{shape}, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		per := int64(2 * 2 * 2 * 4) // 2 channels of 2x2, float32
		if fp16 {
			per /= 2
		}
		if got := tr.Aux(0).ExampleBytes(); got != per {
			t.Fatalf("fp16 %v: %d bytes per example, want %d", fp16, got, per)
		}
		if err := tr.Init([]int{0, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		st, err := tr.Round([]int{3, 1, 0, 2}, func(int) float64 { return 0.01 })
		if err != nil {
			t.Fatal(err)
		}
		if st.AuxBytes != 2*4*per || tr.Traffic.InitBytes != 4*per {
			t.Fatalf("fp16 %v: round bytes %d (want %d), init %d (want %d)", fp16, st.AuxBytes, 2*4*per, tr.Traffic.InitBytes, 4*per)
		}
	}
}

func TestConfigProblems(t *testing.T) {
	c := DefaultConfig()
	if ps := c.Problems(); len(ps) != 0 {
		t.Fatalf("defaults: %v", ps)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Method = "admm" }, `layer_parallel.method: "admm": must be one of penalty, augmented_lagrangian`},
		{func(c *Config) { c.Rho = 0 }, "layer_parallel.rho: 0: must be a finite number > 0"},
		{func(c *Config) { c.RhoGrowth = 0.5 }, "layer_parallel.rho_growth: 0.5: must be a finite number >= 1"},
		{func(c *Config) { c.Downsample = 0 }, "layer_parallel.downsample: 0: must be at least 1"},
		{func(c *Config) { c.Downsample = 9 }, "layer_parallel.downsample: 9: must be at most 8"},
		{func(c *Config) { c.UCurvature = -1 }, "layer_parallel.u_curvature: -1: must be a finite number >= 0"},
		{func(c *Config) { c.Cycles = 0 }, "layer_parallel.cycles: 0: must be at least 1"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		ps := c.Problems()
		if len(ps) == 0 || !strings.Contains(ps[0].Error(), tc.want) {
			t.Errorf("got %v, want %q", ps, tc.want)
		}
	}
	c = DefaultConfig()
	c.SerialEpochs = 4
	if ps := c.CrossProblems(2, 9, 4); len(ps) == 0 || !strings.Contains(ps[0].Error(), "layer_parallel.serial_epochs: 4: must be below train.epochs (4)") {
		t.Errorf("serial_epochs = epochs: %v", ps)
	}
	if ps := c.CrossProblems(10, 9, 8); len(ps) == 0 || !strings.Contains(ps[0].Error(), "dist.workers: 10") {
		t.Errorf("10 stages of 9 blocks: %v", ps)
	}
}

func TestSchedule(t *testing.T) {
	c := DefaultConfig()
	c.SerialEpochs = 2
	got := c.Schedule(8)
	if len(got) != 2 || !got[0].Parallel || got[0].Epochs != 6 || got[1].Parallel || got[1].First != 6 || got[1].Epochs != 2 {
		t.Fatalf("one cycle: %+v", got)
	}
	c.Cycles = 2
	got = c.Schedule(8)
	if len(got) != 4 || got[0].Epochs != 3 || got[1].Epochs != 1 || got[2].First != 4 || got[3].First != 7 {
		t.Fatalf("two cycles: %+v", got)
	}
	c = Config{Rho: 1, RhoGrowth: 10, RhoMax: 500}
	if c.RhoAt(0) != 1 || c.RhoAt(2) != 100 || c.RhoAt(3) != 500 {
		t.Fatalf("rho schedule %v %v %v", c.RhoAt(0), c.RhoAt(2), c.RhoAt(3))
	}
}
