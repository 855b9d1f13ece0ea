package data

import (
	"math"
	"testing"
)

func TestNormalization(t *testing.T) {
	// The published constants, written out again so that a typo in the catalogue shows.
	for _, tc := range []struct {
		name      string
		mean, std []float64
	}{
		{"fashion-mnist", []float64{0.2860}, []float64{0.3530}},
		{"mnist", []float64{0.1307}, []float64{0.3081}},
		{"cifar10", []float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616}},
		{"cifar100", []float64{0.5071, 0.4865, 0.4409}, []float64{0.2673, 0.2564, 0.2762}},
	} {
		info, err := Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		channels := len(tc.mean)
		if info.Shape[0] != channels {
			t.Fatalf("%s: %d channels, want %d", tc.name, info.Shape[0], channels)
		}
		// One 1x3 image per channel with pixels 0, 128 and 255.
		pix := make([]uint8, 0, channels*3)
		for range channels {
			pix = append(pix, 0, 128, 255)
		}
		for _, normalize := range []bool{true, false} {
			ds := newImages(tc.name, []int{channels, 1, 3}, info.Classes, pix, []uint8{0}, info.Mean, info.Std, normalize)
			x := make([]float32, len(pix))
			ds.Fill([]int{0}, x, make([]int32, 1))
			for c := range channels {
				for k, p := range []float64{0, 128, 255} {
					want := p / 255
					if normalize {
						want = (want - tc.mean[c]) / tc.std[c]
					}
					if got := x[c*3+k]; math.Abs(float64(got)-want) > 1e-6 {
						t.Errorf("%s normalize=%v channel %d pixel %v: %v, want %v", tc.name, normalize, c, p, got, want)
					}
				}
			}
		}
	}
}
