package optim

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	got := Names()
	if !slices.IsSorted(got) || len(got) != len(Registry) {
		t.Errorf("Names() = %v, want the %d Registry names sorted", got, len(Registry))
	}
	for _, name := range []string{"adam", "adamw", "lamb", "lars", "novograd", "sgd"} {
		if !slices.Contains(got, name) {
			t.Errorf("Names() = %v, missing %s", got, name)
		}
	}
}

func TestNewUnknownName(t *testing.T) {
	_, err := New(Config{Name: "adagrad", LR: 0.1})
	wantFieldError(t, err, "optim.name")
	wantErrorContaining(t, err, `"adagrad"`, strings.Join(Names(), ", "))
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
		{"lars momentum one", Config{Name: "lars", LR: 0.1, Momentum: 1}, "optim.momentum"},
		{"lars Nesterov without momentum", Config{Name: "lars", LR: 0.1, Nesterov: true}, "optim.nesterov"},
		{"negative lars_eta", Config{Name: "lars", LR: 0.1, LARSEta: -0.001}, "optim.lars_eta"},
		{"NaN lars_eta", Config{Name: "lars", LR: 0.1, LARSEta: math.NaN()}, "optim.lars_eta"},
		{"lars negative weight decay", Config{Name: "lars", LR: 0.1, WeightDecay: -1}, "optim.weight_decay"},
		{"lamb zero eps", withName(with(lambHyper, func(c *Config) { c.Eps = 0 }), "lamb", 0), "optim.eps"},
		{"lamb beta1 one", withName(with(lambHyper, func(c *Config) { c.Beta1 = 1 }), "lamb", 0), "optim.beta1"},
		{"negative lamb_max_grad_norm", withName(with(lambHyper, func(c *Config) { c.LAMBMaxGradNorm = -1 }), "lamb", 0), "optim.lamb_max_grad_norm"},
		{"infinite lamb_max_grad_norm", withName(with(lambHyper, func(c *Config) { c.LAMBMaxGradNorm = math.Inf(1) }), "lamb", 0), "optim.lamb_max_grad_norm"},
		{"novograd beta2 one", withName(with(novogradHyper, func(c *Config) { c.Beta2 = 1 }), "novograd", 0), "optim.beta2"},
		{"novograd zero lr", withName(with(novogradHyper, func(c *Config) { c.LR = 0 }), "novograd", 0), "optim.lr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantFieldError(t, c.cfg.Validate(), c.key)
		})
	}

	_, err := New(with(sgd, func(c *Config) { c.Momentum = 1.5 }))
	wantErrorContaining(t, err, "optim.momentum: 1.5:", "[0, 1)")

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

	for _, c := range []struct{ in, want Config }{
		{Config{Name: "lamb", LR: 1e-3}, Config{Name: "lamb", LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-6}},
		{Config{Name: "novograd", LR: 0.01, Eps: 1e-6}, Config{Name: "novograd", LR: 0.01, Beta1: 0.95, Beta2: 0.98, Eps: 1e-6}},
		{Config{Name: "lars", LR: 1, Momentum: 0.9}, Config{Name: "lars", LR: 1, Momentum: 0.9, LARSEta: 0.001}},
		{Config{Name: "lars", LR: 1, LARSEta: 0.02}, Config{Name: "lars", LR: 1, LARSEta: 0.02}},
		// Only the named optimizer's fields are filled: no lars_eta for Adam, no betas for LARS.
		{Config{Name: "adam", LR: 1}, Config{Name: "adam", LR: 1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}},
	} {
		got := c.in
		got.ApplyDefaults()
		if got != c.want {
			t.Errorf("%s: ApplyDefaults gave %+v, want %+v", c.in.Name, got, c.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: %v", c.in.Name, err)
		}
	}
}

// keepsState reports whether the optimizer configured by c has buffers after a step.
func keepsState(c Config) bool {
	return c.Momentum > 0 || (c.Name != "sgd" && c.Name != "lars")
}

// optimCase is one configuration run by the tests over every Registry entry.
type optimCase struct {
	name string
	cfg  Config
}

// registryCases covers every Registry entry (TestCasesCoverRegistry checks it), with
// and without its options: the listed cases, then, for an optimizer they do not
// name, its defaults with lr 0.1 and momentum 0.9, so a new entry is tested at once.
var registryCases = withRegistryDefaults([]optimCase{
	{"sgd", Config{Name: "sgd", LR: 0.1}},
	{"sgd-momentum", Config{Name: "sgd", LR: 0.1, Momentum: 0.9}},
	{"sgd-nesterov", Config{Name: "sgd", LR: 0.1, Momentum: 0.9, Nesterov: true}},
	{"adam", withName(adamHyper, "adam", 0)},
	{"adamw", withName(adamHyper, "adamw", 0)},
	{"lars", Config{Name: "lars", LR: 0.2, Momentum: 0.9, LARSEta: 0.02}},
	{"lars-clip-nesterov", Config{Name: "lars", LR: 0.2, Momentum: 0.9, Nesterov: true, LARSEta: 0.1, LARSClip: true}},
	{"lars-no-momentum-groups", Config{Name: "lars", LR: 0.2, LARSEta: 0.1, DecayNormBias: true, AdaptNormBias: true}},
	{"lamb", withName(lambHyper, "lamb", 0)},
	{"lamb-no-bias-correction-groups", Config{Name: "lamb", LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-6, LAMBNoBiasCorrection: true, DecayNormBias: true, AdaptNormBias: true}},
	{"novograd", withName(novogradHyper, "novograd", 0)},
	{"novograd-averaging-eps-inside", Config{Name: "novograd", LR: 0.1, Beta1: 0.95, Beta2: 0.98, Eps: 1e-8, NovoGradGradAveraging: true, NovoGradEpsInsideSqrt: true}},
})

func withRegistryDefaults(cases []optimCase) []optimCase {
	for _, name := range Names() {
		if slices.ContainsFunc(cases, func(c optimCase) bool { return c.cfg.Name == name }) {
			continue
		}
		c := Config{Name: name, LR: 0.1, Momentum: 0.9}
		c.ApplyDefaults()
		cases = append(cases, optimCase{name + "-defaults", c})
	}
	return cases
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
			if keepsState(c.cfg) {
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
		{"lamb moments at step 0", withName(lambHyper, "lamb", 0), State{Buffers: map[string][]float32{"m/w": buf(2), "v/w": buf(2)}}, []string{"lamb", "step 0"}},
		{"lars unknown slot", Config{Name: "lars", LR: 0.1, Momentum: 0.9}, State{Step: 1, Buffers: map[string][]float32{"v/w": buf(2)}}, []string{`unknown state key "v/w"`, "momentum"}},
		{"novograd v per element", withName(novogradHyper, "novograd", 0), State{Step: 1, Buffers: map[string][]float32{"m/w": buf(2), "v/w": buf(2)}},
			[]string{"v/w has 2 elements, want 1"}},
		{"novograd m without v", withName(novogradHyper, "novograd", 0), State{Step: 1, Buffers: map[string][]float32{"m/w": buf(2)}}, []string{"m/w", "no v/w"}},
		{"novograd negative step", withName(novogradHyper, "novograd", 0), State{Step: -1}, []string{"novograd", "step -1"}},
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

	for _, c := range registryCases {
		if !keepsState(c.cfg) {
			continue
		}
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

	// The shared step counter of bias correction (Adam, LAMB): a parameter joining after
	// step 1 is refused. The others, LAMB without bias correction included, accept it.
	for _, c := range registryCases {
		opt, _ := New(c.cfg)
		if err := opt.Step([]Param{param("a", 2)}, 0.1); err != nil {
			t.Fatal(err)
		}
		err := opt.Step([]Param{param("a", 2), param("late", 1)}, 0.1)
		if (c.cfg.Name == "adam" || c.cfg.Name == "adamw" || c.cfg.Name == "lamb") && !c.cfg.LAMBNoBiasCorrection {
			wantErrorContaining(t, err, `"late" has no state`)
		} else if err != nil {
			t.Errorf("%s: a parameter joining at step 2: %v", c.name, err)
		}
	}
}

// TestStateBytes: bytes of state per parameter, for the trainer's summary. A model of
// a 1000-element weight and a 10-element bias: SGD with momentum and LARS keep one
// float per element (4 bytes), Adam and LAMB two (8), NovoGrad one per element plus
// one per tensor (4 + 8/1010).
func TestStateBytes(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want int64
	}{
		{Config{Name: "sgd", LR: 0.1}, 0},
		{Config{Name: "sgd", LR: 0.1, Momentum: 0.9}, 4 * 1010},
		{withName(adamHyper, "adam", 0), 8 * 1010},
		{withName(adamHyper, "adamw", 0), 8 * 1010},
		{Config{Name: "lars", LR: 0.1, Momentum: 0.9}, 4 * 1010},
		{Config{Name: "lars", LR: 0.1}, 0},
		{withName(lambHyper, "lamb", 0), 8 * 1010},
		{withName(novogradHyper, "novograd", 0), 4*1010 + 4*2},
	} {
		opt, _ := New(c.cfg)
		if got := StateBytes(opt); got != 0 {
			t.Errorf("%+v: %d bytes before the first step, want 0", c.cfg, got)
		}
		params := []Param{
			{Name: "w", Value: make([]float32, 1000), Grad: make([]float32, 1000)},
			{Name: "b", Value: make([]float32, 10), Grad: make([]float32, 10), NoDecay: true},
		}
		if err := opt.Step(params, 0.1); err != nil {
			t.Fatal(err)
		}
		if got := StateBytes(opt); got != c.want {
			t.Errorf("%s: StateBytes = %d, want %d", c.cfg.Name, got, c.want)
		}
		// The fallback for other Optimizers, summing State, agrees.
		if got := StateBytes(stateOnly{opt}); got != c.want {
			t.Errorf("%s: StateBytes through State = %d, want %d", c.cfg.Name, got, c.want)
		}
	}
}

// stateOnly hides an optimizer's StateBytes method.
type stateOnly struct{ Optimizer }

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
