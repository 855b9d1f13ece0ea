package compress

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// conformanceParams is a small model: a conv weight, a linear weight, a bias
// and a BatchNorm scale (the last two always travel dense), plus a small linear
// weight below the size threshold.
func conformanceParams() []optim.Param {
	shapes := []struct {
		name  string
		kind  optim.Kind
		shape []int
	}{
		{"conv.w", optim.KindConv, []int{8, 4, 3, 3}},
		{"conv.b", optim.KindBias, []int{8}},
		{"fc.w", optim.KindLinear, []int{40, 30}},
		{"bn.scale", optim.KindNorm, []int{1, 8, 1, 1}},
		{"small.w", optim.KindLinear, []int{4, 5}},
	}
	var out []optim.Param
	for _, s := range shapes {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		out = append(out, optim.Param{Name: s.name, Kind: s.kind, Shape: s.shape, Value: make([]float32, n), Grad: make([]float32, n)})
	}
	return out
}

// conformanceConfig makes every algorithm compress from the first step, so
// that the invariants are exercised on compressed tensors.
func conformanceConfig(name string) Config {
	c := DefaultConfig()
	c.Name = name
	c.MinSize = 64
	c.Density = 0.05
	c.DGC.WarmupEpochs = 0
	c.PowerSGD.StartIter = 0
	c.PowerSGD.Rank = 2
	// GradiVeQ: steps 0-1 sampled (dense), 2-4 compressed, 5-6 sampled, ...;
	// slices of 64 (the last of each tensor zero-padded) keep the PCA small.
	c.GradiVeQ.WarmupSteps, c.GradiVeQ.SampleSteps, c.GradiVeQ.CompressSteps = 0, 2, 3
	c.GradiVeQ.SliceSize = 64
	// LGC: one dense step, one step training the autoencoder, then compressed.
	c.LGC.DenseSteps, c.LGC.TrainSteps = 1, 1
	return c
}

type workerRun struct {
	x     *Exchange
	grads [][]float32 // per step: the gradient handed in
	outs  [][]float32 // per step: the mean gradient returned
}

// runWorkers runs `steps` exchanges on n in-process workers with random
// gradients and returns each worker's record.
func runWorkers(t *testing.T, name string, n, steps int) []*workerRun {
	t.Helper()
	runs := newWorkerRuns(t, name, n)
	stepWorkers(t, name, runs, 0, steps)
	return runs
}

// newWorkerRuns builds n in-process workers' exchanges for name.
func newWorkerRuns(t *testing.T, name string, n int) []*workerRun {
	t.Helper()
	params := conformanceParams()
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	flatParams := make([]float32, size)
	for i := range flatParams {
		flatParams[i] = float32(math.Sin(float64(i)))
	}
	members, err := dist.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	runs := make([]*workerRun, n)
	for w := range runs {
		info := func(step int) StepInfo {
			return StepInfo{Step: step, StepsPerEpoch: 10, Worker: w, Workers: n, Params: flatParams}
		}
		x, err := NewExchange(conformanceConfig(name), params, members[w], 42, Hyper{Momentum: 0.9, WeightDecay: 1e-4}, info)
		if err != nil {
			t.Fatal(err)
		}
		runs[w] = &workerRun{x: x}
	}
	return runs
}

// stepWorkers runs steps from..to-1 on runs, each worker's gradient drawn
// from a generator seeded by (step, worker), appending to the records, and
// checks the error-feedback invariants after each step.
func stepWorkers(t *testing.T, name string, runs []*workerRun, from, to int) {
	t.Helper()
	n := len(runs)
	size := len(runs[0].x.dbuf) + len(runs[0].x.cbuf)
	prevResidual := make([][]float32, n)
	for step := from; step < to; step++ {
		for w, r := range runs {
			if ef := r.x.Feedback(); ef != nil {
				prevResidual[w] = append(prevResidual[w][:0], ef.Residual()...)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for w, r := range runs {
			g := workerGrad(step, w, size)
			r.grads = append(r.grads, append([]float32(nil), g...))
			wg.Add(1)
			go func(w int, r *workerRun, g []float32) {
				defer wg.Done()
				errs[w] = r.x.Exchange(g, step)
				r.outs = append(r.outs, g)
			}(w, r, g)
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("%s: worker %d step %d: %v", name, w, step, err)
			}
		}
		for w, r := range runs {
			ef := r.x.Feedback()
			if ef == nil {
				continue
			}
			c, s, e := ef.Compensated(), ef.Sent(), ef.Residual()
			grad := r.grads[len(r.grads)-1]
			// Error feedback adds the previous residual to the new gradient
			// (compressors that apply momentum first accumulate velocity instead).
			if !r.x.Compressor().Needs().OwnsMomentum {
				for _, tn := range r.x.packed {
					for i := 0; i < tn.Size; i++ {
						want := grad[tn.FlatOffset+i] + prevResidual[w][tn.Offset+i]
						if d := math.Abs(float64(c[tn.Offset+i] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
							t.Fatalf("%s: worker %d step %d: compensated %s[%d] = %v, want gradient + previous residual = %v",
								name, w, step, tn.Name, i, c[tn.Offset+i], want)
						}
					}
				}
			}
			for i := range c {
				if d := math.Abs(float64(c[i]) - float64(s[i]) - float64(e[i])); d > 1e-5*(1+math.Abs(float64(c[i]))) {
					t.Fatalf("%s: worker %d step %d: compensated[%d] %v != sent %v + residual %v", name, w, step, i, c[i], s[i], e[i])
				}
			}
		}
	}
}

func TestConformance(t *testing.T) {
	for _, name := range Names() {
		for _, n := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/workers=%d", name, n), func(t *testing.T) {
				runs := runWorkers(t, name, n, 4)
				x := runs[0].x
				// Dense tensors are exactly the worker mean; everyone gets the
				// same result (every algorithm here promises identical updates).
				for step := range runs[0].outs {
					for w := 1; w < n; w++ {
						for i, v := range runs[w].outs[step] {
							if math.Float32bits(v) != math.Float32bits(runs[0].outs[step][i]) {
								t.Fatalf("step %d: worker %d's result differs from worker 0's at %d", step, w, i)
							}
						}
					}
					for _, d := range x.dense {
						for i := d.FlatOffset; i < d.FlatOffset+d.Size; i++ {
							var mean float64
							for w := 0; w < n; w++ {
								mean += float64(runs[w].grads[step][i])
							}
							mean /= float64(n)
							if math.Abs(float64(runs[0].outs[step][i])-mean) > 1e-5 {
								t.Fatalf("dense tensor %s: %v, mean %v", d.Name, runs[0].outs[step][i], mean)
							}
						}
					}
				}
				if name != "none" && len(x.packed) != 2 {
					t.Fatalf("compressed tensors %v, want conv.w and fc.w", x.packed)
				}
				// Shapes survive: the packed layout covers each tensor once.
				for _, p := range x.packed {
					if p.Size != p.Shape[0]*(p.Size/p.Shape[0]) {
						t.Fatalf("tensor %s: size %d does not match shape %v", p.Name, p.Size, p.Shape)
					}
				}
				tr := x.Traffic()
				if n == 1 && tr.Wire != 0 {
					t.Fatalf("one worker counted %d bytes on the wire", tr.Wire)
				}
				if n > 1 && (tr.Wire <= 0 || tr.Dense != int64(4*4*len(runs[0].grads[0]))) {
					t.Fatalf("traffic %+v: dense baseline must be 4 steps x 4 bytes x %d values", tr, len(runs[0].grads[0]))
				}
				var byKind int64
				for _, v := range tr.WireByKind {
					byKind += v
				}
				if byKind != tr.Wire {
					t.Fatalf("per-kind wire %d != total %d", byKind, tr.Wire)
				}
			})
		}
	}
}

// countingMember checks that the exchange counts exactly the payload bytes it
// hands to the collective (all-gather) or their encoded size (all-reduce).
type countingMember struct {
	dist.Collective
	gathered int64
	reduced  int64
}

func (c *countingMember) AllGather(p []byte) ([][]byte, error) {
	c.gathered += int64(len(p))
	return c.Collective.AllGather(p)
}

func (c *countingMember) AllReduce(b []float32) error {
	c.reduced += int64(len(b))
	return c.Collective.AllReduce(b)
}

func TestCountedBytesEqualEncodedLength(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			const n = 2
			members, err := dist.NewLocal(n)
			if err != nil {
				t.Fatal(err)
			}
			params := conformanceParams()
			size := 0
			for _, p := range params {
				size += len(p.Value)
			}
			flat := make([]float32, size)
			cms := make([]*countingMember, n)
			xs := make([]*Exchange, n)
			for w := range xs {
				cms[w] = &countingMember{Collective: members[w]}
				info := func(step int) StepInfo {
					return StepInfo{Step: step, StepsPerEpoch: 10, Worker: w, Workers: n, Params: flat}
				}
				if xs[w], err = NewExchange(conformanceConfig(name), params, cms[w], 1, Hyper{Momentum: 0.9}, info); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for w := range xs {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					g := make([]float32, size)
					for i := range g {
						g[i] = float32(i%7) - 3
					}
					if err := xs[w].Exchange(g, 0); err != nil {
						t.Error(err)
					}
				}(w)
			}
			wg.Wait()
			tr := xs[0].Traffic()
			// Per-kind accounting covers every byte, and an element-wise
			// compressor books each kind at its own size: fp16 halves every
			// kind's dense float32 bytes.
			want := map[string]int64{} // fp16: 2 bytes per compressed value, 4 per dense one
			for _, t := range xs[0].packed {
				want[string(t.Kind)] += int64(2 * t.Size)
			}
			for _, t := range xs[0].dense {
				want[string(t.Kind)] += int64(4 * t.Size)
			}
			var wireSum, denseSum int64
			for k, wv := range tr.WireByKind {
				wireSum += wv
				denseSum += tr.DenseByKind[k]
				if name == "fp16" && wv != want[k] {
					t.Errorf("fp16: kind %s booked %d bytes, want %d", k, wv, want[k])
				}
			}
			if wireSum != tr.Wire || denseSum != tr.Dense {
				t.Errorf("per-kind bytes sum to %d wire, %d dense; totals %d, %d", wireSum, denseSum, tr.Wire, tr.Dense)
			}
			denseBytes := 4 * int64(len(xs[0].dbuf))
			if xs[0].Compressor() == nil { // none: everything dense
				if tr.Wire != denseBytes || cms[0].reduced != int64(len(xs[0].dbuf)) {
					t.Fatalf("counted %d bytes, the collective carried %d values", tr.Wire, cms[0].reduced)
				}
				return
			}
			if needs := xs[0].Compressor().Needs(); len(needs.RoundOps) > 0 {
				// Rounds with different collectives (ScaleCom): gathered bytes as
				// handed over, all-reduced values at 4 bytes.
				if want := denseBytes + cms[0].gathered + 4*(cms[0].reduced-int64(len(xs[0].dbuf))); tr.Wire != want {
					t.Fatalf("counted %d bytes, the collectives carried %d", tr.Wire, want)
				}
				return
			}
			switch xs[0].Compressor().Needs().Collective {
			case dist.OpAllGather:
				if tr.Wire != denseBytes+cms[0].gathered {
					t.Fatalf("counted %d bytes, the collective carried %d dense + %d gathered", tr.Wire, denseBytes, cms[0].gathered)
				}
			case dist.OpAllReduce:
				// All-reduce payloads are counted at their encoded size (fp16: 2
				// bytes per value), never more than the float32 buffer carried.
				if tr.Wire > 4*cms[0].reduced || tr.Wire < denseBytes {
					t.Fatalf("counted %d bytes for %d all-reduced values", tr.Wire, cms[0].reduced)
				}
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			runs := runWorkers(t, name, 2, 3)
			if runs[0].x.Compressor() == nil {
				return // none: no state
			}
			st := runs[0].x.State()
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string][]float32
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if err := runs[0].x.SetState(back); err != nil {
				t.Fatal(err)
			}
			if len(st) > 0 {
				bad := map[string][]float32{}
				for k := range st {
					bad[k] = []float32{1}
					break
				}
				if err := runs[0].x.SetState(bad); err == nil {
					t.Fatal("SetState accepted a buffer of the wrong length")
				}
			}
		})
	}
}

// TestResumeEqualsUninterrupted: workers rebuilt from every worker's State
// and Traffic after `cut` steps, as a resumed run rebuilds them from a
// checkpoint (through JSON, which carries no NaN, so a state must not hold
// one by construction), go on exactly as the uninterrupted workers do: the
// same means bit for bit, the same traffic and the same final state. The
// cuts fall after step 0, 2 and 5; for GradiVeQ (see conformanceConfig)
// inside its first sampling phase, inside a compressed phase and inside its
// second sampling phase.
func TestResumeEqualsUninterrupted(t *testing.T) {
	const n, steps = 2, 8
	for _, name := range Names() {
		for _, cut := range []int{1, 3, 6} {
			t.Run(fmt.Sprintf("%s/cut=%d", name, cut), func(t *testing.T) {
				want := runWorkers(t, name, n, steps)
				head := runWorkers(t, name, n, cut)
				resumed := resumeWorkers(t, name, head, steps)
				for w := range n {
					for s := cut; s < steps; s++ {
						for i, v := range resumed[w].outs[s-cut] {
							if math.Float32bits(v) != math.Float32bits(want[w].outs[s][i]) {
								t.Fatalf("worker %d step %d: resumed mean [%d] = %v, uninterrupted %v", w, s, i, v, want[w].outs[s][i])
							}
						}
					}
					if got, wt := resumed[w].x.Traffic(), want[w].x.Traffic(); !reflect.DeepEqual(got, wt) {
						t.Fatalf("worker %d: resumed traffic %+v, uninterrupted %+v", w, got, wt)
					}
					if got, wt := resumed[w].x.State(), want[w].x.State(); !reflect.DeepEqual(got, wt) {
						t.Fatalf("worker %d: the resumed run ends with another state", w)
					}
				}
			})
		}
	}
}

// resumeWorkers builds fresh workers from head's state (through JSON) and
// traffic and runs them from step len(head[0].outs) to steps on runWorkers'
// gradients; outs[i] is step len(head[0].outs)+i.
func resumeWorkers(t *testing.T, name string, head []*workerRun, steps int) []*workerRun {
	t.Helper()
	runs := newWorkerRuns(t, name, len(head))
	for w, r := range runs {
		b, err := json.Marshal(head[w].x.State())
		if err != nil {
			t.Fatal(err)
		}
		var st map[string][]float32
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if err := r.x.SetState(st); err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
		r.x.SetTraffic(head[w].x.Traffic())
	}
	stepWorkers(t, name, runs, len(head[0].outs), steps)
	return runs
}

// recordingMember keeps a copy of the last payload this worker handed to the
// collective (the exchange's last call of a step is the compressor's last
// round) and the bytes and values it carried.
type recordingMember struct {
	dist.Collective
	floats   []float32
	bytes    []byte
	gathered int64 // bytes handed to all-gathers
	reduced  int64 // values handed to all-reduces
}

func (c *recordingMember) AllGather(p []byte) ([][]byte, error) {
	c.bytes, c.floats = append([]byte(nil), p...), nil
	c.gathered += int64(len(p))
	return c.Collective.AllGather(p)
}

func (c *recordingMember) AllReduce(b []float32) error {
	c.floats, c.bytes = append([]float32(nil), b...), nil
	c.reduced += int64(len(b))
	return c.Collective.AllReduce(b)
}

// TestExchangeOracle checks every registered compressor against an oracle:
// the exchanged mean is exactly what decoding each worker's payload (as
// handed to the collective) on its own and summing in rank order gives, what each worker sends is closer to its compensated gradient than
// nothing, lossless compressors return the true mean, and the counted bytes are
// the payloads' encoded sizes. PowerSGD's second round depends on the
// aggregate of the first, so its payloads cannot be decoded on their own
// (it is a CombinedDecoder); its own tests check it by hand. ScaleCom's last
// round can: values at the indices every worker took from round 0.
func TestExchangeOracle(t *testing.T) {
	for _, name := range Names() {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/workers=%d", name, n), func(t *testing.T) { checkOracle(t, name, n) })
		}
	}
}

func checkOracle(t *testing.T, name string, n int) {
	params := conformanceParams()
	size := 0
	for _, p := range params {
		size += len(p.Value)
	}
	flat := make([]float32, size)
	members, err := dist.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*recordingMember, n)
	xs := make([]*Exchange, n)
	stepInfo := func(w int) func(int) StepInfo {
		return func(step int) StepInfo {
			return StepInfo{Step: step, StepsPerEpoch: 10, Worker: w, Workers: n, Params: flat}
		}
	}
	for w := range xs {
		recs[w] = &recordingMember{Collective: members[w]}
		if xs[w], err = NewExchange(conformanceConfig(name), params, recs[w], 5, Hyper{Momentum: 0.9}, stepInfo(w)); err != nil {
			t.Fatal(err)
		}
	}
	comp := xs[0].Compressor()
	var wantWire int64
	for step := range 3 {
		grads := make([][]float32, n)
		outs := make([][]float32, n)
		var wg sync.WaitGroup
		for w := range xs {
			grads[w] = workerGrad(step, w, size)
			outs[w] = append([]float32(nil), grads[w]...)
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				if err := xs[w].Exchange(outs[w], step); err != nil {
					t.Error(err)
				}
			}(w)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		wantWire += int64(4 * len(xs[0].dbuf))
		if comp == nil {
			continue // every tensor dense: checked below
		}
		needs := comp.Needs()
		packed := len(xs[0].cbuf)
		got := make([]float32, packed)
		for _, tn := range xs[0].packed {
			copy(got[tn.Offset:tn.Offset+tn.Size], outs[0][tn.FlatOffset:tn.FlatOffset+tn.Size])
		}
		if _, whole := comp.(CombinedDecoder); !whole {
			// Decode each worker's last payload on its own; sum in rank order.
			sum, one := make([]float32, packed), make([]float32, packed)
			for w, r := range recs {
				clear(one)
				if err := comp.DecodeAdd(Payload{Floats: r.floats, Bytes: r.bytes}, one, stepInfo(0)(step)); err != nil {
					t.Fatalf("step %d: decoding worker %d's payload alone: %v", step, w, err)
				}
				for i, v := range one {
					sum[i] += v
				}
			}
			// What a worker sends is a contraction of what it had to send
			// (Karimireddy et al. 2019's delta-approximate compressor):
			// strictly closer to the compensated gradient than sending
			// nothing.
			for w, x := range xs {
				if ef := x.Feedback(); ef != nil {
					var miss, norm float64
					for i, c := range ef.Compensated() {
						miss += math.Pow(float64(c-ef.Sent()[i]), 2)
						norm += math.Pow(float64(c), 2)
					}
					if !(miss < norm) {
						t.Fatalf("step %d: worker %d sent %v away from its compensated gradient of norm %v: no better than sending nothing", step, w, math.Sqrt(miss), math.Sqrt(norm))
					}
				}
			}
			for i, v := range got {
				mean := sum[i] / float32(n)
				if needs.Reciprocal {
					mean = sum[i] * (1 / float32(n))
				}
				if math.Float32bits(v) != math.Float32bits(mean) {
					t.Fatalf("step %d: exchanged [%d] = %v, but the workers' payloads decoded one by one sum to %v (mean %v)", step, i, v, sum[i], mean)
				}
			}
		}
		if name == "fp16" {
			for i, v := range got {
				var mean float64
				for w := range grads {
					mean += float64(grads[w][flatIndex(xs[0], i)])
				}
				mean /= float64(n)
				if math.Abs(float64(v)-mean) > 2e-3*math.Max(1, math.Abs(mean)) {
					t.Fatalf("step %d: fp16 [%d] = %v, true mean %v", step, i, v, mean)
				}
			}
		}
	}
	// Counted bytes: dense float32 values, all-gathered bytes as handed over,
	// all-reduced values at 2 bytes (fp16) or 4.
	tr := xs[0].Traffic()
	bpv := int64(4)
	if name == "fp16" {
		bpv = 2
	}
	wantWire += recs[0].gathered + bpv*(recs[0].reduced-int64(3*len(xs[0].dbuf)))
	if tr.Wire != wantWire {
		t.Fatalf("counted %d bytes, the payloads' encoded sizes sum to %d", tr.Wire, wantWire)
	}
}

// flatIndex is the position in the model's flat buffers of packed index i.
func flatIndex(x *Exchange, i int) int {
	for _, t := range x.packed {
		if i >= t.Offset && i < t.Offset+t.Size {
			return t.FlatOffset + i - t.Offset
		}
	}
	return -1
}

// TestContributeKeepsState: a worker that only contributes (Contribute:
// the mean it would write is not read) must leave its compressor and error
// feedback in the state that Exchange leaves, with the same byte counts, for
// every compressor: those that skip decoding there (statelessDecoder) must
// not change anything in DecodeAdd that a later step reads. Four workers,
// all exchanging against worker 0 exchanging and the others contributing,
// over steps that cover every stage (GradiVeQ's sampling and compression,
// LGC's dense, training and compressed steps); the states are compared bit
// for bit after every step, and so is worker 0's mean.
func TestContributeKeepsState(t *testing.T) {
	const n, steps = 4, 8
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			all, some := newWorkerRuns(t, name, n), newWorkerRuns(t, name, n)
			for step := range steps {
				exchanged := stepRuns(t, all, step, func(_ int, x *Exchange, g []float32) error { return x.Exchange(g, step) })
				contributed := stepRuns(t, some, step, func(w int, x *Exchange, g []float32) error {
					if w > 0 {
						return x.Contribute(g, step)
					}
					return x.Exchange(g, step)
				})
				if !reflect.DeepEqual(bitsOf(exchanged[0]), bitsOf(contributed[0])) {
					t.Fatalf("step %d: worker 0's mean differs", step)
				}
				for w := range n {
					a, b := all[w].x.State(), some[w].x.State()
					if len(a) != len(b) {
						t.Fatalf("step %d worker %d: %d state buffers against %d", step, w, len(b), len(a))
					}
					for k, v := range a {
						if !reflect.DeepEqual(bitsOf(v), bitsOf(b[k])) {
							t.Fatalf("step %d worker %d: state %q differs after Contribute", step, w, k)
						}
					}
					if !reflect.DeepEqual(all[w].x.Traffic(), some[w].x.Traffic()) {
						t.Fatalf("step %d worker %d: traffic %+v after Contribute, %+v after Exchange", step, w, some[w].x.Traffic(), all[w].x.Traffic())
					}
				}
			}
		})
	}
}

// workerGrad is worker w's gradient of a step in these tests: size values
// from a generator seeded by (step, w).
func workerGrad(step, w, size int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(step), uint64(w)))
	g := make([]float32, size)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	return g
}

// stepRuns runs one step on every worker of runs at once, worker w's
// exchange called by call on its workerGrad, and returns the gradients as
// the calls left them (the means, where Exchange wrote them).
func stepRuns(t *testing.T, runs []*workerRun, step int, call func(w int, x *Exchange, g []float32) error) [][]float32 {
	t.Helper()
	size := len(runs[0].x.dbuf) + len(runs[0].x.cbuf)
	grads := make([][]float32, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for w, r := range runs {
		grads[w] = workerGrad(step, w, size)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = call(w, r.x, grads[w])
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("step %d worker %d: %v", step, w, err)
		}
	}
	return grads
}

// bitsOf is v's bit patterns, so that NaNs and signed zeros compare exactly.
func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
