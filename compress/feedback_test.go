package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// denseFeedback hides a compressor's sparseSender: its sender keeps the
// error feedback in dense mode, the reference for the sparse one.
type denseFeedback struct{ Compressor }

// TestSparseFeedbackMatchesDense: topk and randomk with compress.residual
// keep their error feedback in sparse mode (the residual changes only where
// the own payload has entries); payloads, residual, compensated and sent
// gradients, and the decoded mean must equal dense mode's bit for bit over
// many steps, with float16 values (rounding kept in the residual), with
// gradients that hold signed zeros, ties and values sent again, and across
// a State/SetState round trip.
func TestSparseFeedbackMatchesDense(t *testing.T) {
	bitsEqual := func(a, b []float32) bool {
		return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
	}
	for _, name := range []string{"topk", "randomk"} {
		for _, fp16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fp16=%v", name, fp16), func(t *testing.T) {
				cfg := topKConfig(0.02, true, fp16)
				cfg.Name = name
				tensors := baselineTensors([]int{40, 50}, []int{7}, []int{300})
				n := packedSize(tensors)
				build := func() Compressor {
					c, err := Registry[name](cfg, tensors, 0, 2, 7, Hyper{})
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
				sparse, dense := newSender(name, build(), n), newSender(name, denseFeedback{build()}, n)
				if sparse.sparse == nil || dense.sparse != nil {
					t.Fatalf("modes: sparse %v, dense %v", sparse.sparse != nil, dense.sparse != nil)
				}
				rng := rand.New(rand.NewPCG(9, 10))
				for step := range 40 {
					g := make([]float32, n)
					for i := range g {
						switch rng.IntN(6) {
						case 0:
							g[i] = float32(math.Copysign(0, -1))
						case 1:
							g[i] = 0.25 * float32(rng.IntN(3)-1) // ties
						default:
							g[i] = float32(rng.NormFloat64())
						}
					}
					info := StepInfo{Step: step, Workers: 2}
					var out [2][]float32
					for side, s := range []*sender{sparse, dense} {
						grad := slices.Clone(g)
						p, err := s.Compress(0, grad, Combined{}, info)
						if err != nil {
							t.Fatal(err)
						}
						// The other worker's payload: this one's again.
						var last Combined
						if p.Floats != nil {
							sum := slices.Clone(p.Floats)
							for i := range sum {
								sum[i] *= 2
							}
							last = Combined{Floats: sum, Workers: 2}
						} else {
							last = Combined{Bytes: [][]byte{slices.Clone(p.Bytes), slices.Clone(p.Bytes)}, Workers: 2}
						}
						out[side] = make([]float32, n)
						if err := s.Decompress(last, out[side], info); err != nil {
							t.Fatal(err)
						}
					}
					for what, pair := range map[string][2][]float32{
						"residual":    {sparse.Residual(), dense.Residual()},
						"compensated": {sparse.Compensated(), dense.Compensated()},
						"sent":        {sparse.Sent(), dense.Sent()},
						"mean":        {out[0], out[1]},
					} {
						if !bitsEqual(pair[0], pair[1]) {
							t.Fatalf("step %d: %s differs:\n sparse %v\n dense  %v", step, what, pair[0], pair[1])
						}
					}
					if step == 20 { // a restored sender goes on as before
						fresh := newSender(name, build(), n)
						if err := fresh.SetState(sparse.State()); err != nil {
							t.Fatal(err)
						}
						sparse = fresh
					}
				}
			})
		}
	}
}

// TestExchangeSparseFeedbackMatchesDense: through the exchange, topk and
// randomk compensate while taking the gradient and swap the compensated
// buffer in as the residual; four workers' means and residuals must equal
// those of exchanges whose senders keep dense error feedback, bit for bit,
// over steps taken through Exchange alone, through Prepare first, and
// through Prepare twice for the same step.
func TestExchangeSparseFeedbackMatchesDense(t *testing.T) {
	const n, steps = 4, 12
	for _, name := range []string{"topk", "randomk"} {
		t.Run(name, func(t *testing.T) {
			sparse, dense := newWorkerRuns(t, name, n), newWorkerRuns(t, name, n)
			for _, r := range dense {
				r.x.send = newSender(name, denseFeedback{r.x.comp}, len(r.x.cbuf))
			}
			if sparse[0].x.send.sparse == nil || dense[0].x.send.sparse != nil {
				t.Fatal("the two sides do not keep their feedback in the two modes")
			}
			for step := range steps {
				var outs [2][][]float32
				for side, runs := range [][]*workerRun{sparse, dense} {
					outs[side] = stepRuns(t, runs, step, func(_ int, x *Exchange, g []float32) error {
						for range step % 3 { // 0, 1 or 2 Prepares before the exchange
							if _, err := x.Prepare(g, step); err != nil {
								return err
							}
						}
						return x.Exchange(g, step)
					})
				}
				for w := range n {
					if !slices.Equal(bitsOf(outs[0][w]), bitsOf(outs[1][w])) {
						t.Fatalf("step %d worker %d: the means differ", step, w)
					}
					if !slices.Equal(bitsOf(sparse[w].x.Feedback().Residual()), bitsOf(dense[w].x.Feedback().Residual())) {
						t.Fatalf("step %d worker %d: the residuals differ", step, w)
					}
					if !slices.Equal(bitsOf(sparse[w].x.Feedback().Compensated()), bitsOf(dense[w].x.Feedback().Compensated())) {
						t.Fatalf("step %d worker %d: the compensated gradients differ", step, w)
					}
				}
			}
		})
	}
}
