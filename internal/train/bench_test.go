package train

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
)

// BenchmarkReplicas measures one data-parallel step (2 logical workers, batch 64
// each, gradient all-reduce included) on 1 and on 2 replicas, for the speed-up
// that running replicas in parallel gives on the cores.
func BenchmarkReplicas(b *testing.B) {
	for _, tc := range []struct {
		model string
		in    models.Input
	}{
		{"lenet5", models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
		{"lstm", models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}},
	} {
		for _, replicas := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/replicas=%d", tc.model, replicas), func(b *testing.B) {
				const workers, batch = 2, 64
				members, err := dist.NewLocal(workers)
				if err != nil {
					b.Fatal(err)
				}
				reps := make([]dist.Replica, replicas)
				for r := range reps {
					net, err := models.New(models.Config{Name: tc.model}, tc.in, batch, 0, 1)
					if err != nil {
						b.Fatal(err)
					}
					reps[r] = net
				}
				e, err := dist.NewEngine(members, reps, nil)
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(1, 1))
				x := make([]float32, batch*784)
				y := make([]int32, batch)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				for i := range y {
					y[i] = int32(rng.IntN(10))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := e.Step(i, func(int) ([]float32, []int32) { return x, y }); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(workers*batch*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}
