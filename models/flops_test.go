package models

import "testing"

// TestTrainFLOPs checks the FLOP count against the layer shapes worked by hand,
// batch 2, 1x28x28 inputs, 10 classes; a training step is 3x the forward.
func TestTrainFLOPs(t *testing.T) {
	img := Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	// lenet5 forward per example: conv1 2*(28*28)*(1*5*5)*6 = 235,200; conv2
	// 2*(10*10)*(6*5*5)*16 = 480,000; fc 2*(400*120 + 120*84 + 84*10) =
	// 117,840; 833,040 in all.
	// mlp: 2*(784*512 + 512*256 + 256*10) = 1,070,080.
	// lstm (28 steps of 28 inputs, 128 units): x·Wx 2*28*28*512 = 802,816,
	// h·Wh over 27 steps 2*27*128*512 = 3,538,944, fc 2*128*10 = 2,560;
	// 4,344,320 in all.
	for _, c := range []struct {
		model   string
		forward int64
	}{{"lenet5", 833_040}, {"mlp", 1_070_080}, {"lstm", 4_344_320}} {
		for _, ops := range []string{OpsFast, OpsGorgonia} {
			n, err := New(Config{Name: c.model, Ops: ops}, img, 2, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := n.TrainFLOPs(), 3*2*c.forward; got != want {
				t.Errorf("%s (%s ops): %d FLOPs per training step, want %d", c.model, ops, got, want)
			}
		}
	}
}
