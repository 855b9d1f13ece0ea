package dist

import (
	"math"
	"testing"

	"github.com/gradwire/gradwire/optim"
)

// TestPipelineMomentumStability: width-2 pipelining with SGD's heavy-ball
// momentum on f(w) = w^2/2 (h = 1). From the third step on, the engine's
// weights follow w_{t+1} = (1+beta) w_t - (beta + lr h) w_{t-1}, whose roots
// multiply to beta + lr h: the delayed update is stable only for lr h <
// 1 - beta (0.1 at beta 0.9), where the synchronous one is stable up to
// 2 (1 + beta) = 3.8. So at lr 0.11 the pipelined run grows while the
// synchronous run converges, and at lr 0.09 both converge.
func TestPipelineMomentumStability(t *testing.T) {
	const beta, steps = 0.9, 3000
	run := func(lr float64, pipelined bool) (final float64, recurrenceErr float64) {
		e, fakes := newTestEngine(t, 1, 1, 1)
		fakes[0].flat[0] = 1
		if pipelined {
			if err := e.EnablePipeline(); err != nil {
				t.Fatal(err)
			}
		}
		sgd, err := optim.NewSGD(optim.Config{Name: "sgd", LR: lr, Momentum: beta})
		if err != nil {
			t.Fatal(err)
		}
		params := []optim.Param{{Name: "w", Shape: []int{1}, Value: fakes[0].flat, Grad: fakes[0].grad}}
		zero := []float32{0}
		batch := func(int) ([]float32, []int32) { return zero, nil }
		var hist []float64
		for s := range steps {
			applied := true
			if pipelined {
				_, applied, err = e.StepPipelined(s, batch)
			} else {
				_, err = e.Step(s, batch)
			}
			if err != nil {
				t.Fatal(err)
			}
			if applied {
				if err := sgd.Step(params, lr); err != nil {
					t.Fatal(err)
				}
			}
			w := float64(fakes[0].flat[0])
			if n := len(hist); pipelined && n >= 3 && math.Abs(w) < 1e3 {
				want := (1+beta)*hist[n-1] - (beta+lr)*hist[n-2]
				recurrenceErr = max(recurrenceErr, math.Abs(w-want)/max(1, math.Abs(want)))
			}
			hist = append(hist, w)
		}
		return math.Abs(hist[len(hist)-1]), recurrenceErr
	}
	for _, tc := range []struct {
		lr                        float64
		pipelinedGrows, syncGrows bool
	}{
		{0.09, false, false},
		{0.11, true, false},
	} {
		pw, recErr := run(tc.lr, true)
		sw, _ := run(tc.lr, false)
		if recErr > 1e-4 { // float32 rounding of w and the momentum buffer; a wrong delay is off by O(1)
			t.Errorf("lr %v: pipelined weights leave the delayed heavy-ball recurrence by %.3g", tc.lr, recErr)
		}
		if grows := pw > 1; grows != tc.pipelinedGrows {
			t.Errorf("lr %v: pipelined |w| after %d steps = %.3g; want growth %v (stable only for lr h < 1 - beta = %.2f)", tc.lr, steps, pw, tc.pipelinedGrows, 1-beta)
		}
		if grows := sw > 1; grows != tc.syncGrows {
			t.Errorf("lr %v: synchronous |w| after %d steps = %.3g; want growth %v", tc.lr, steps, sw, tc.syncGrows)
		}
	}
}
