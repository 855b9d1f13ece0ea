package optim

import (
	"maps"
	"math"
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	want := []string{"adam", "adamw", "sgd"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

func TestNewUnknownName(t *testing.T) {
	_, err := New(Config{Name: "adagrad", LR: 0.1})
	wantFieldError(t, err, "optim.name")
	wantErrorContaining(t, err, `"adagrad"`, "adam, adamw, sgd")
}

func TestConfigValidate(t *testing.T) {
	sgd := Config{Name: "sgd", LR: 0.1, Momentum: 0.9}
	adam := withName(adamHyper, "adam", 0)
	with := func(c Config, f func(*Config)) Config { f(&c); return c }
	for _, c := range []struct {
		name string
		cfg  Config
		key  string
	}{
		{"no name", Config{LR: 0.1}, "optim.name"},
		{"zero lr", with(sgd, func(c *Config) { c.LR = 0 }), "optim.lr"},
		{"NaN lr", with(adam, func(c *Config) { c.LR = math.NaN() }), "optim.lr"},
		{"infinite lr", with(sgd, func(c *Config) { c.LR = math.Inf(1) }), "optim.lr"},
		{"momentum one", with(sgd, func(c *Config) { c.Momentum = 1 }), "optim.momentum"},
		{"negative momentum", with(sgd, func(c *Config) { c.Momentum = -0.1 }), "optim.momentum"},
		{"Nesterov without momentum", with(sgd, func(c *Config) { c.Momentum, c.Nesterov = 0, true }), "optim.nesterov"},
		{"negative weight decay", with(sgd, func(c *Config) { c.WeightDecay = -1e-4 }), "optim.weight_decay"},
		{"negative clip norm", with(adam, func(c *Config) { c.ClipNorm = -1 }), "optim.clip_norm"},
		{"beta1 one", with(adam, func(c *Config) { c.Beta1 = 1 }), "optim.beta1"},
		{"negative beta2", with(adam, func(c *Config) { c.Beta2 = -0.5 }), "optim.beta2"},
		{"beta2 above one", withName(with(adamHyper, func(c *Config) { c.Beta2 = 1.5 }), "adamw", 0), "optim.beta2"},
		{"zero eps", with(adam, func(c *Config) { c.Eps = 0 }), "optim.eps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantFieldError(t, c.cfg.Validate(), c.key)
		})
	}

	_, err := New(with(sgd, func(c *Config) { c.Momentum = 1.5 }))
	wantErrorContaining(t, err, "optim.momentum = 1.5", "[0, 1)")

	// Valid configurations, including fields an optimizer does not use.
	for _, c := range []Config{sgd, adam, with(sgd, func(c *Config) { c.Nesterov, c.WeightDecay, c.ClipNorm = true, 5e-4, 1 }), {Name: "sgd", LR: 1}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestConfigApplyDefaults(t *testing.T) {
	for _, name := range []string{"adam", "adamw"} {
		c := Config{Name: name, LR: 1e-3, Beta2: 0.98}
		c.ApplyDefaults()
		if c.Beta1 != 0.9 || c.Beta2 != 0.98 || c.Eps != 1e-8 {
			t.Errorf("%s: defaults gave %+v, want beta1 0.9, beta2 kept at 0.98, eps 1e-8", name, c)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := Config{Name: "sgd", LR: 0.1}
	c.ApplyDefaults()
	if c != (Config{Name: "sgd", LR: 0.1}) {
		t.Errorf("sgd: defaults changed the config to %+v", c)
	}
}

// optimCase is one configuration run by the tests over every Registry entry.
type optimCase struct {
	name string
	cfg  Config
}

// registryCases covers every Registry entry (TestCasesCoverRegistry checks it), with
// and without its options.
var registryCases = []optimCase{
	{"sgd", Config{Name: "sgd", LR: 0.1}},
	{"sgd-momentum", Config{Name: "sgd", LR: 0.1, Momentum: 0.9}},
	{"sgd-nesterov", Config{Name: "sgd", LR: 0.1, Momentum: 0.9, Nesterov: true}},
	{"adam", withName(adamHyper, "adam", 0)},
	{"adamw", withName(adamHyper, "adamw", 0)},
}

// withDecay returns the registry cases with weight decay on, for tests that do not
// need the unregularised minimum.
func withDecay() []optimCase {
	var out []optimCase
	for _, c := range registryCases {
		c.name += "-wd"
		c.cfg.WeightDecay = 0.01
		out = append(out, c)
	}
	return out
}

func TestCasesCoverRegistry(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range registryCases {
		covered[c.cfg.Name] = true
	}
	if got, want := slices.Sorted(maps.Keys(covered)), Names(); !slices.Equal(got, want) {
		t.Errorf("registryCases cover %v, Registry has %v", got, want)
	}
}

// quadratic is f(w) = 0.5*sum(a_i*(w_i-c_i)^2) over two tensors, the second NoDecay.
type quadratic struct {
	a, c   []float64
	params []Param
}

func newQuadratic() *quadratic {
	q := &quadratic{a: []float64{1, 4, 0.5, 2}, c: []float64{1, -2, 3, 0.5}}
	q.params = []Param{
		{Name: "layer/w", Kind: KindLinear, Value: make([]float32, 3), Grad: make([]float32, 3)},
		{Name: "layer/b", Kind: KindBias, Value: make([]float32, 1), Grad: make([]float32, 1), NoDecay: true},
	}
	return q
}

// each calls f with every element's parameter, gradient, a_i and c_i.
func (q *quadratic) each(f func(w, g *float32, a, c float64)) {
	k := 0
	for _, p := range q.params {
		for j := range p.Value {
			f(&p.Value[j], &p.Grad[j], q.a[k], q.c[k])
			k++
		}
	}
}

// grad sets the gradient a_i*(w_i-c_i).
func (q *quadratic) grad() {
	q.each(func(w, g *float32, a, c float64) { *g = float32(a * (float64(*w) - c)) })
}

// steps runs n gradient-and-update steps with learning rate lr(step).
func (q *quadratic) steps(t *testing.T, opt Optimizer, n int, lr func(int) float64) {
	t.Helper()
	for i := range n {
		q.grad()
		if err := opt.Step(q.params, lr(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func (q *quadratic) values() [][]float32 {
	var out [][]float32
	for _, p := range q.params {
		out = append(out, slices.Clone(p.Value))
	}
	return out
}

// TestConformanceQuadratic: every optimizer minimises a convex quadratic with
// curvatures 0.5 to 4 from w = 0 to within 1e-3 of the minimum, with its learning rate
// decayed by a cosine schedule (Adam's steps are about lr long, so it needs lr -> 0).
func TestConformanceQuadratic(t *testing.T) {
	const steps = 1000
	for _, c := range registryCases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSchedule(ScheduleConfig{Name: "cosine", WarmupEpochs: 1}, c.cfg.LR, 1, 100, steps)
			if err != nil {
				t.Fatal(err)
			}
			q := newQuadratic()
			q.steps(t, opt, steps, s.LR)
			q.each(func(w, _ *float32, _, c float64) {
				if math.Abs(float64(*w)-c) > 1e-3 {
					t.Errorf("w = %v after %d steps, want %v +- 1e-3", *w, steps, c)
				}
			})
		})
	}
}

// TestStateRoundTrip: 5 steps, save, 5 steps; a fresh optimizer restored from the saved
// state and parameters then gives bit-identical parameters after 5 steps.
func TestStateRoundTrip(t *testing.T) {
	lr := func(i int) float64 { return 0.05 / float64(i%3+1) } // not constant, to catch a mixed-up step
	for _, c := range append(slices.Clone(registryCases), withDecay()...) {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := New(c.cfg)
			q := newQuadratic()
			q.steps(t, opt, 5, lr)
			saved := opt.State()
			savedCopy := cloneState(saved)
			savedValues := q.values()
			q.steps(t, opt, 5, lr)
			want := q.values()
			if !stateEqual(saved, savedCopy) {
				t.Fatal("State() shares memory with the optimizer: it changed after more steps")
			}
			if saved.Step != 5 {
				t.Errorf("State().Step = %d, want 5", saved.Step)
			}
			if c.cfg.Momentum > 0 || c.cfg.Name != "sgd" {
				if len(saved.Buffers) == 0 {
					t.Error("stateful optimizer saved no buffers")
				}
			}

			fresh, _ := New(c.cfg)
			if err := fresh.SetState(saved); err != nil {
				t.Fatal(err)
			}
			for _, b := range saved.Buffers {
				b[0] = float32(math.NaN()) // SetState must have copied
			}
			r := newQuadratic()
			for i := range r.params {
				copy(r.params[i].Value, savedValues[i])
			}
			r.steps(t, fresh, 5, lr)
			got := r.values()
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Errorf("restored run: %s[%d] = %v, uninterrupted run %v", r.params[i].Name, j, got[i][j], want[i][j])
					}
				}
			}
			if st := fresh.State(); st.Step != 10 {
				t.Errorf("restored State().Step = %d, want 10", st.Step)
			}
		})
	}
}

func cloneState(s State) State {
	out := State{Step: s.Step, Buffers: map[string][]float32{}}
	for k, v := range s.Buffers {
		out.Buffers[k] = slices.Clone(v)
	}
	return out
}

func stateEqual(a, b State) bool {
	return a.Step == b.Step && maps.EqualFunc(a.Buffers, b.Buffers, func(x, y []float32) bool { return slices.Equal(x, y) })
}

func TestSetStateErrors(t *testing.T) {
	sgd := Config{Name: "sgd", LR: 0.1, Momentum: 0.9}
	adam := withName(adamHyper, "adam", 0)
	buf := func(n int) []float32 { return make([]float32, n) }
	for _, c := range []struct {
		name    string
		cfg     Config
		st      State
		mention []string
	}{
		{"negative step", sgd, State{Step: -1}, []string{"step -1"}},
		{"negative Adam step", adam, State{Step: -2}, []string{"step -2"}},
		{"malformed key", sgd, State{Step: 1, Buffers: map[string][]float32{"w": buf(2)}}, []string{`"w"`, "<slot>/<param name>"}},
		{"unknown slot", sgd, State{Step: 1, Buffers: map[string][]float32{"m/w": buf(2)}}, []string{`unknown state key "m/w"`, "momentum"}},
		{"no momentum, no buffers", Config{Name: "sgd", LR: 0.1}, State{Step: 1, Buffers: map[string][]float32{"momentum/w": buf(2)}},
			[]string{`"momentum/w"`, "keeps no buffers"}},
		{"m without v", adam, State{Step: 1, Buffers: map[string][]float32{"m/w": buf(2)}}, []string{"m/w", "no v/w"}},
		{"m and v lengths", adam, State{Step: 1, Buffers: map[string][]float32{"m/w": buf(2), "v/w": buf(3)}}, []string{"m/w", "v/w", "differ in length"}},
		{"moments at step 0", adam, State{Buffers: map[string][]float32{"m/w": buf(2), "v/w": buf(2)}}, []string{"step 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := New(c.cfg)
			wantErrorContaining(t, opt.SetState(c.st), c.mention...)
			if st := opt.State(); st.Step != 0 || len(st.Buffers) != 0 {
				t.Errorf("failed SetState changed the state to %+v", st)
			}
		})
	}
}

func TestStepErrors(t *testing.T) {
	param := func(name string, n int) Param {
		return Param{Name: name, Value: make([]float32, n), Grad: make([]float32, n)}
	}
	for _, c := range registryCases {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := New(c.cfg)
			bad := []Param{param("a", 2), {Name: "b", Value: []float32{1, 2}, Grad: []float32{1}}}
			bad[0].Grad[0] = 1
			wantErrorContaining(t, opt.Step(bad, 0.1), `"b"`, "2 values but 1 gradients")
			if bad[0].Value[0] != 0 || opt.State().Step != 0 {
				t.Error("a failed Step changed parameters or state")
			}
			wantErrorContaining(t, opt.Step([]Param{param("a", 2)}, math.NaN()), "learning rate NaN")
			wantErrorContaining(t, opt.Step([]Param{param("a", 2)}, -0.1), "learning rate -0.1")
		})
	}

	stateful := []optimCase{registryCases[1], registryCases[3], registryCases[4]}
	for _, c := range stateful {
		t.Run(c.name+"/state", func(t *testing.T) {
			opt, _ := New(c.cfg)
			wantErrorContaining(t, opt.Step([]Param{param("a", 2), param("a", 2)}, 0.1), `two parameters are named "a"`)
			wantErrorContaining(t, opt.Step([]Param{param("", 2)}, 0.1), "no name")

			if err := opt.Step([]Param{param("a", 2)}, 0.1); err != nil {
				t.Fatal(err)
			}
			wantErrorContaining(t, opt.Step([]Param{param("a", 3)}, 0.1), "/a has 2 elements", `"a" has 3`)

			// A restored state for a differently shaped model is caught on the next step.
			fresh, _ := New(c.cfg)
			if err := fresh.SetState(opt.State()); err != nil {
				t.Fatal(err)
			}
			wantErrorContaining(t, fresh.Step([]Param{param("a", 5)}, 0.1), "has 2 elements")
		})
	}

	// Adam's shared step counter: a parameter joining after step 1 is refused.
	opt, _ := New(withName(adamHyper, "adam", 0))
	if err := opt.Step([]Param{param("a", 2)}, 0.1); err != nil {
		t.Fatal(err)
	}
	wantErrorContaining(t, opt.Step([]Param{param("a", 2), param("late", 1)}, 0.1), `"late" has no state`)
}

// TestStepAllocs: after the first step, a step over the same parameters allocates nothing.
func TestStepAllocs(t *testing.T) {
	for _, c := range withDecay() {
		opt, _ := New(c.cfg)
		q := newQuadratic()
		q.grad()
		step := func() {
			if err := opt.Step(q.params, 0.01); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%s: %v allocations per step, want 0", c.name, n)
		}
	}
}

// BenchmarkStep: one update of a 1M-parameter model (one 2^20-element tensor).
func BenchmarkStep(b *testing.B) {
	const n = 1 << 20
	for _, c := range withDecay() {
		b.Run(c.name, func(b *testing.B) {
			opt, _ := New(c.cfg)
			p := []Param{{Name: "w", Value: make([]float32, n), Grad: make([]float32, n)}}
			for i := range n {
				p[0].Value[i] = float32(i%97) / 97
				p[0].Grad[i] = float32(i%89)/89 - 0.5
			}
			if err := opt.Step(p, 1e-3); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(4 * n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := opt.Step(p, 1e-3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClipGlobalNorm: the norm of 1M gradients (no scaling: maxNorm is large).
func BenchmarkClipGlobalNorm(b *testing.B) {
	const n = 1 << 20
	p := []Param{{Name: "w", Grad: make([]float32, n)}}
	for i := range n {
		p[0].Grad[i] = float32(i%89)/89 - 0.5
	}
	b.SetBytes(4 * n)
	for b.Loop() {
		ClipGlobalNorm(p, math.MaxFloat64)
	}
}
