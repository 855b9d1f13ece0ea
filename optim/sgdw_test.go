package optim

import "testing"

// All cases use lr = 0.1 and are worked by hand from the rules in the SGDW doc comment.

func TestSGDWMomentumDecay(t *testing.T) {
	// m = 0.9, wd = 0.1 on "w"; "b" is NoDecay. Gradient 0.5 everywhere, every step, so
	// the buffer is the same for both: b = 0.5, 0.95, 1.355 (the decay stays out of it).
	// w -= 0.1*b + 0.1*0.1*w:
	//   step 1: [1 - 0.05 - 0.01, -2 - 0.05 + 0.02]             = [0.94, -2.03]
	//   step 2: [0.94 - 0.095 - 0.0094, -2.03 - 0.095 + 0.0203]  = [0.8356, -2.1047]
	//   step 3: [0.8356 - 0.1355 - 0.008356, -2.1047 - 0.1355 + 0.021047] = [0.691744, -2.219153]
	// (SGD's L2 decay gives 0.666274 for the first element: there the decay is amplified by momentum.)
	// b (no decay): 0.5 - 0.05 = 0.45, 0.45 - 0.095 = 0.355, 0.355 - 0.1355 = 0.2195.
	stepCase{
		cfg: Config{Name: "sgdw", LR: 0.1, Momentum: 0.9, WeightDecay: 0.1},
		params: []Param{
			{Name: "w", Value: []float32{1, -2}},
			{Name: "b", Value: []float32{0.5}, NoDecay: true},
		},
		grads: [][][]float32{{{0.5, 0.5}, {0.5}}, {{0.5, 0.5}, {0.5}}, {{0.5, 0.5}, {0.5}}},
		want: [][][]float64{
			{{0.94, -2.03}, {0.45}},
			{{0.8356, -2.1047}, {0.355}},
			{{0.691744, -2.219153}, {0.2195}},
		},
		wantState: map[string][]float64{"momentum/w": {1.355, 1.355}, "momentum/b": {1.355}},
	}.run(t)
}

func TestSGDWPlainDecay(t *testing.T) {
	// No momentum: w = w - 0.1*g - 0.01*w = 0.99*w - 0.1*g.
	//   step 1: 0.99 - 0.05         = 0.94
	//   step 2: 0.9306 + 0.1        = 1.0306
	//   step 3: 1.020294 - 0.2      = 0.820294
	// DecayNormBias decays the NoDecay tensor too, with the same numbers.
	stepCase{
		cfg:    Config{Name: "sgdw", LR: 0.1, WeightDecay: 0.1, DecayNormBias: true},
		params: []Param{{Name: "w", Value: []float32{1}}, {Name: "bn", Value: []float32{1}, NoDecay: true}},
		grads:  [][][]float32{{{0.5}, {0.5}}, {{-1}, {-1}}, {{2}, {2}}},
		want:   [][][]float64{{{0.94}, {0.94}}, {{1.0306}, {1.0306}}, {{0.820294}, {0.820294}}},
	}.run(t)
}

func TestSGDWNesterov(t *testing.T) {
	// m = 0.9, wd = 0.1, g = 1 every step: b = 1, 1.9, 2.71; d = 1 + 0.9*b = 1.9, 2.71, 3.439.
	//   step 1: 1 - 0.19 - 0.01         = 0.8
	//   step 2: 0.8 - 0.271 - 0.008     = 0.521
	//   step 3: 0.521 - 0.3439 - 0.00521 = 0.17189
	stepCase{
		cfg:       Config{Name: "sgdw", LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1},
		params:    []Param{{Name: "w", Value: []float32{1}}},
		grads:     [][][]float32{{{1}}, {{1}}, {{1}}},
		want:      [][][]float64{{{0.8}}, {{0.521}}, {{0.17189}}},
		wantState: map[string][]float64{"momentum/w": {2.71}},
	}.run(t)
}
