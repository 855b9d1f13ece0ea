package optim_test

import (
	"fmt"

	"github.com/gradwire/gradwire/optim"
)

// One training step: clip the gradients, then update with the scheduled learning rate.
func ExampleNew() {
	cfg := optim.Config{Name: "adamw", LR: 1e-3, WeightDecay: 0.01, ClipNorm: 1}
	cfg.ApplyDefaults() // beta1 0.9, beta2 0.999, eps 1e-8
	opt, err := optim.New(cfg)
	if err != nil {
		panic(err)
	}
	params := []optim.Param{
		{Name: "fc.w", Kind: optim.KindLinear, Value: []float32{0.5, -0.5}, Grad: []float32{3, 4}},
		{Name: "fc.b", Kind: optim.KindBias, Value: []float32{0}, Grad: []float32{0}, NoDecay: true},
	}
	norm := optim.ClipGlobalNorm(params, cfg.ClipNorm)
	if err := opt.Step(params, cfg.LR); err != nil {
		panic(err)
	}
	fmt.Printf("gradient norm %.1f, fc.w = %.6f\n", norm, params[0].Value)
	// Output: gradient norm 5.0, fc.w = [0.498995 -0.500995]
}

// Goyal et al.'s recipe: base rate 0.1 per 256 samples, batch 8192, 5 warm-up epochs,
// then x0.1 at epochs 30, 60 and 80.
func ExampleNewSchedule() {
	sc := optim.ScheduleConfig{Name: "step", Milestones: []float64{30, 60, 80}, Gamma: 0.1, WarmupEpochs: 5, BaseBatch: 256}
	s, err := optim.NewSchedule(sc, 0.1, 8192, 156, 90*156)
	if err != nil {
		panic(err)
	}
	for _, epoch := range []int{0, 5, 30, 60, 80} {
		fmt.Printf("epoch %2d: lr %.4g\n", epoch, s.LR(epoch*156))
	}
	// Output:
	// epoch  0: lr 0.1
	// epoch  5: lr 3.2
	// epoch 30: lr 0.32
	// epoch 60: lr 0.032
	// epoch 80: lr 0.0032
}

func ExampleConfig_Validate() {
	err := optim.Config{Name: "sgd", LR: 0.1, Momentum: 1}.Validate()
	fmt.Println(err)
	// Output: optim.momentum: 1: must be in [0, 1)
}

// Bytes of optimizer state per parameter, as the trainer reports it: NovoGrad keeps one
// second moment per tensor instead of one per element, about half of Adam's state.
func ExampleStateBytes() {
	params := []optim.Param{
		{Name: "fc.w", Kind: optim.KindLinear, Value: make([]float32, 1000), Grad: make([]float32, 1000)},
		{Name: "fc.b", Kind: optim.KindBias, Value: make([]float32, 10), Grad: make([]float32, 10), NoDecay: true},
	}
	for _, name := range []string{"adam", "novograd"} {
		cfg := optim.Config{Name: name, LR: 1e-3}
		cfg.ApplyDefaults()
		opt, err := optim.New(cfg)
		if err != nil {
			panic(err)
		}
		if err := opt.Step(params, cfg.LR); err != nil { // allocates the state
			panic(err)
		}
		fmt.Printf("%s: %.3f bytes per parameter\n", name, float64(optim.StateBytes(opt))/1010)
	}
	// Output:
	// adam: 8.000 bytes per parameter
	// novograd: 4.008 bytes per parameter
}
