package optim

import (
	"math"
	"testing"
)

// All cases use lr = 0.1 and are worked by hand from the rules in the SGD doc comment.

func TestSGDPlain(t *testing.T) {
	// No momentum, no decay: w -= 0.1*g.
	//   step 1: [1, -2, 0.5]      - 0.1*[0.5, -1, 2]   = [0.95, -1.9, 0.3]
	//   step 2: [0.95, -1.9, 0.3] - 0.1*[0.25, 0.5, -1] = [0.925, -1.95, 0.4]
	//   step 3: [0.925, -1.95, 0.4] - 0.1*[1, 1, 1]    = [0.825, -2.05, 0.3]
	c := stepCase{
		cfg:    Config{Name: "sgd", LR: 0.1},
		params: []Param{{Name: "w", Value: []float32{1, -2, 0.5}}},
		grads:  [][][]float32{{{0.5, -1, 2}}, {{0.25, 0.5, -1}}, {{1, 1, 1}}},
		want:   [][][]float64{{{0.95, -1.9, 0.3}}, {{0.925, -1.95, 0.4}}, {{0.825, -2.05, 0.3}}},
	}
	c.run(t)
	opt, _ := New(c.cfg)
	params := []Param{{Name: "w", Value: []float32{1}, Grad: []float32{1}}}
	if err := opt.Step(params, 0.1); err != nil {
		t.Fatal(err)
	}
	if st := opt.State(); len(st.Buffers) != 0 {
		t.Errorf("momentum 0 keeps buffers %v, want none", keys(st.Buffers))
	}
}

func TestSGDMomentum(t *testing.T) {
	// m = 0.9, b = 0.9*b + g (b = g on the first step), w -= 0.1*b.
	//   step 1: b = [1, 2];                                w = [1-0.1, -2-0.2]       = [0.9, -2.2]
	//   step 2: b = 0.9*[1, 2] + [0.5, -1] = [1.4, 0.8];    w = [0.9-0.14, -2.2-0.08]  = [0.76, -2.28]
	//   step 3: b = 0.9*[1.4, 0.8] + [-1, 0] = [0.26, 0.72]; w = [0.76-0.026, -2.28-0.072] = [0.734, -2.352]
	stepCase{
		cfg:       Config{Name: "sgd", LR: 0.1, Momentum: 0.9},
		params:    []Param{{Name: "fc1.w", Value: []float32{1, -2}}},
		grads:     [][][]float32{{{1, 2}}, {{0.5, -1}}, {{-1, 0}}},
		want:      [][][]float64{{{0.9, -2.2}}, {{0.76, -2.28}}, {{0.734, -2.352}}},
		wantState: map[string][]float64{"momentum/fc1.w": {0.26, 0.72}},
	}.run(t)
}

func TestSGDNesterov(t *testing.T) {
	// Same gradients as TestSGDMomentum, so the same buffers b; the step is d = g + 0.9*b.
	//   step 1: b = [1, 2];       d = [1+0.9, 2+1.8]        = [1.9, 3.8];     w = [1-0.19, -2-0.38]       = [0.81, -2.38]
	//   step 2: b = [1.4, 0.8];   d = [0.5+1.26, -1+0.72]   = [1.76, -0.28];  w = [0.81-0.176, -2.38+0.028] = [0.634, -2.352]
	//   step 3: b = [0.26, 0.72]; d = [-1+0.234, 0+0.648]   = [-0.766, 0.648]; w = [0.634+0.0766, -2.352-0.0648] = [0.7106, -2.4168]
	stepCase{
		cfg:       Config{Name: "sgd", LR: 0.1, Momentum: 0.9, Nesterov: true},
		params:    []Param{{Name: "fc1.w", Value: []float32{1, -2}}},
		grads:     [][][]float32{{{1, 2}}, {{0.5, -1}}, {{-1, 0}}},
		want:      [][][]float64{{{0.81, -2.38}}, {{0.634, -2.352}}, {{0.7106, -2.4168}}},
		wantState: map[string][]float64{"momentum/fc1.w": {0.26, 0.72}},
	}.run(t)
}

func TestSGDWeightDecay(t *testing.T) {
	// m = 0.9, wd = 0.1 on "w"; "b" is NoDecay. Gradient 0.5 everywhere, every step.
	// w: d = 0.5 + 0.1*w, b = 0.9*b + d, w -= 0.1*b.
	//   step 1: d = [0.5+0.1, 0.5-0.2] = [0.6, 0.3]; b = [0.6, 0.3]; w = [1-0.06, -2-0.03] = [0.94, -2.03]
	//   step 2: d = [0.5+0.094, 0.5-0.203] = [0.594, 0.297]; b = [0.54+0.594, 0.27+0.297] = [1.134, 0.567]
	//           w = [0.94-0.1134, -2.03-0.0567] = [0.8266, -2.0867]
	//   step 3: d = [0.5+0.08266, 0.5-0.20867] = [0.58266, 0.29133]
	//           b = [1.0206+0.58266, 0.5103+0.29133] = [1.60326, 0.80163]
	//           w = [0.8266-0.160326, -2.0867-0.080163] = [0.666274, -2.166863]
	// b (no decay): buffer 0.5, 0.95, 1.355; value 0.5-0.05 = 0.45, 0.45-0.095 = 0.355, 0.355-0.1355 = 0.2195.
	stepCase{
		cfg: Config{Name: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 0.1},
		params: []Param{
			{Name: "w", Value: []float32{1, -2}},
			{Name: "b", Value: []float32{0.5}, NoDecay: true},
		},
		grads: [][][]float32{{{0.5, 0.5}, {0.5}}, {{0.5, 0.5}, {0.5}}, {{0.5, 0.5}, {0.5}}},
		want: [][][]float64{
			{{0.94, -2.03}, {0.45}},
			{{0.8266, -2.0867}, {0.355}},
			{{0.666274, -2.166863}, {0.2195}},
		},
		wantState: map[string][]float64{"momentum/w": {1.60326, 0.80163}, "momentum/b": {1.355}},
	}.run(t)
}

// A tensor named in PlainSteps (momentum applied by the exchange) takes
// w -= lr*g with no momentum and no weight decay, while its neighbour gets both:
// w = 1, g = 0.5, lr 0.1: 1 - 0.1*0.5 = 0.95 exactly as float32 arithmetic allows.
func TestSGDPlainSteps(t *testing.T) {
	s, err := NewSGD(Config{Name: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	s.PlainSteps("a")
	pre := Param{Name: "a", Value: []float32{1}, Grad: []float32{0.5}}
	plain := Param{Name: "b", Value: []float32{1}, Grad: []float32{0.5}}
	for step := 0; step < 2; step++ {
		if err := s.Step([]Param{pre, plain}, 0.1); err != nil {
			t.Fatal(err)
		}
	}
	// Two plain steps: 1 - 0.05 - 0.05 = 0.9.
	if d := pre.Value[0] - 0.9; d > 1e-6 || d < -1e-6 {
		t.Fatalf("plain-step tensor %v after two steps, want 0.9", pre.Value[0])
	}
	// Momentum and decay: d1 = 0.5 + 0.1*1 = 0.6, b1 = 0.6, w1 = 1 - 0.06 = 0.94;
	// d2 = 0.5 + 0.094 = 0.594, b2 = 0.9*0.6 + 0.594 = 1.134, w2 = 0.94 - 0.1134 = 0.8266.
	if d := plain.Value[0] - 0.8266; d > 1e-6 || d < -1e-6 {
		t.Fatalf("plain tensor %v after two steps, want 0.8266", plain.Value[0])
	}
}

// A tensor named in DecaySteps (DGC's reference optimizer, DGCSGD) takes the
// gradient as it is and the weight decay with a momentum buffer of its own.
// w = 1, g = 0.5 each step, lr 0.1, m 0.9, wd 0.1, worked by hand:
//
//	heavy ball: b1 = 0.1, w1 = 1 - 0.1*(0.1 + 0.5) = 0.94;
//	            b2 = 0.09 + 0.094 = 0.184, w2 = 0.94 - 0.1*(0.184 + 0.5) = 0.8716.
//	Nesterov:   b1 = 0.1, d1 = 0.1 + 0.09 = 0.19, w1 = 1 - 0.069 = 0.931;
//	            b2 = 0.09 + 0.0931 = 0.1831, d2 = 0.0931 + 0.16479 = 0.25789,
//	            w2 = 0.931 - 0.075789 = 0.855211.
//	momentum 0: w1 = 0.94, w2 = 0.94 - 0.1*(0.094 + 0.5) = 0.8806.
//	NoDecay:    w2 = 1 - 0.05 - 0.05 = 0.9, its buffer left at 0.
func TestSGDDecaySteps(t *testing.T) {
	for _, tc := range []struct {
		name               string
		momentum           float64
		nesterov           bool
		wantW, wantB, noWD float32
	}{
		{"heavy ball", 0.9, false, 0.8716, 0.184, 0.9},
		{"nesterov", 0.9, true, 0.855211, 0.1831, 0.9},
		{"no momentum", 0, false, 0.8806, 0, 0.9},
	} {
		s, err := NewSGD(Config{Name: "sgd", LR: 0.1, Momentum: tc.momentum, Nesterov: tc.nesterov, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		s.DecaySteps("a", "bias")
		a := Param{Name: "a", Value: []float32{1}, Grad: []float32{0.5}}
		bias := Param{Name: "bias", Value: []float32{1}, Grad: []float32{0.5}, NoDecay: true}
		for step := 0; step < 2; step++ {
			if err := s.Step([]Param{a, bias}, 0.1); err != nil {
				t.Fatal(err)
			}
		}
		if d := a.Value[0] - tc.wantW; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: w %v after two steps, want %v", tc.name, a.Value[0], tc.wantW)
		}
		if d := bias.Value[0] - tc.noWD; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: NoDecay w %v after two steps, want %v", tc.name, bias.Value[0], tc.noWD)
		}
		st := s.State()
		if tc.momentum == 0 {
			if len(st.Buffers) != 0 {
				t.Errorf("%s: buffers %v without momentum", tc.name, st.Buffers)
			}
			continue
		}
		if b := st.Buffers["momentum/a"]; len(b) != 1 || math.Abs(float64(b[0]-tc.wantB)) > 1e-6 {
			t.Errorf("%s: decay buffer %v, want [%v]", tc.name, b, tc.wantB)
		}
		if b := st.Buffers["momentum/bias"]; len(b) != 1 || b[0] != 0 {
			t.Errorf("%s: NoDecay buffer %v, want [0]", tc.name, b)
		}
	}
}
