package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/models"
)

// plainMember hides dist.Averager: only the Collective methods are left.
type plainMember struct{ dist.Collective }

// plainExchange hides dist.Contributor: every worker receives the mean.
type plainExchange struct{ x *compress.Exchange }

func (p plainExchange) Exchange(g []float32, step int) error { return p.x.Exchange(g, step) }

// packedOnly hides a compressor's unexported fast paths (round 0 from the
// flat gradient, skipped decoding): only the Compressor methods are left.
type packedOnly struct{ compress.Compressor }

// packedOnlyCombined is packedOnly for a compressor that decodes the
// combined result itself (PowerSGD).
type packedOnlyCombined struct {
	compress.Compressor
	compress.CombinedDecoder
}

// registerPackedOnly adds "<name>-packed" to the compressor registry for the
// test: name's compressor behind packedOnly. "none" has no compressor.
func registerPackedOnly(t *testing.T, name string) string {
	build := compress.Registry[name]
	if build == nil {
		return name
	}
	packed := name + "-packed"
	compress.Registry[packed] = func(cfg compress.Config, ts []compress.Tensor, worker, workers int, seed int64, h compress.Hyper) (compress.Compressor, error) {
		cfg.Name = name
		c, err := build(cfg, ts, worker, workers, seed, h)
		if err != nil {
			return nil, err
		}
		if cd, ok := c.(compress.CombinedDecoder); ok {
			return packedOnlyCombined{c, cd}, nil
		}
		return packedOnly{c}, nil
	}
	t.Cleanup(func() { delete(compress.Registry, packed) })
	return packed
}

func f32bits(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// TestEngineShortcutsKeepResults trains the same steps twice, once with the
// engine's shortcuts (workers other than 0 only contribute, the in-process
// all-reduce scales the sums and writes them only where they are read, DGC
// and PowerSGD encode from the flat gradient, DGC's contributors skip
// decoding) and once without them (every worker exchanges in full, with a
// plain AllReduce and the exchange's own scaling, from the packed copy): the
// parameters, every replica's BatchNorm statistics, every worker's
// compressor state and its byte counts must agree to the bit after every
// step. Fused replicas (dist.Engine.Fuse) are left out: they round
// differently.
func TestEngineShortcutsKeepResults(t *testing.T) {
	variants := []struct {
		model string
		set   func(c *compress.Config)
	}{
		{"lenet5", func(c *compress.Config) { c.Name = "none" }},
		{"lenet5", func(c *compress.Config) { c.Name, c.DenseFP16 = "none", true }},
		{"lenet5", func(c *compress.Config) { c.Name = "dgc" }},
		{"lenet5", func(c *compress.Config) { c.Name, c.FP16Values, c.DenseFP16 = "dgc", true, true }},
		{"lenet5", func(c *compress.Config) { c.Name, c.DGC.ClipNorm, c.DGC.Sampling = "dgc", 0.5, false }},
		{"lenet5", func(c *compress.Config) { c.Name, c.DGC.MomentumCorrection, c.DGC.WarmupEpochs = "dgc", false, 1 }},
		{"lenet5", func(c *compress.Config) { c.Name = "powersgd" }},
		{"lenet5", func(c *compress.Config) { c.Name, c.MinSize, c.PowerSGD.Rank = "powersgd", 0, 2 }},
		{"lenet5", func(c *compress.Config) {
			c.Name, c.PowerSGD.StartIter, c.PowerSGD.ErrorFeedback = "powersgd", 2, false
		}},
		{"lenet5", func(c *compress.Config) { c.Name = "topk" }},
		{"lenet5", func(c *compress.Config) { c.Name = "qsgd" }},
		{"resnet20", func(c *compress.Config) { c.Name = "none" }},
	}
	for vi, v := range variants {
		c, err := NewCase(v.model, 16, models.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := engineConfig(c, Scenario{Workers: 8, Replicas: 2})
		v.set(&cfg.Compress)
		name := fmt.Sprintf("variant %d (%s, %s)", vi, v.model, cfg.Compress.Name)
		// Fused steps change the rounding; dist's
		// TestFusedStepMatchesWorkerByWorker compares them.
		fast, err := buildEngineRun(c, cfg, engineHooks{noFuse: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pcfg := cfg
		pcfg.Compress.Name = registerPackedOnly(t, cfg.Compress.Name)
		plain, err := buildEngineRun(c, pcfg, engineHooks{
			member:   func(m dist.Collective) dist.Collective { return plainMember{m} },
			exchange: func(x *compress.Exchange) dist.Exchanger { return plainExchange{x} },
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for step := range 5 {
			for _, r := range []*engineRun{fast, plain} {
				if err := r.trainStep(); err != nil {
					t.Fatalf("%s step %d: %v", name, step, err)
				}
			}
			if !bytes.Equal(f32bits(fast.net.Flat()), f32bits(plain.net.Flat())) {
				t.Fatalf("%s step %d: parameters differ", name, step)
			}
			for i := range fast.nets {
				fb, pb := fast.nets[i].Buffers(), plain.nets[i].Buffers()
				for k := range fb {
					if !bytes.Equal(f32bits(fb[k].Value), f32bits(pb[k].Value)) {
						t.Fatalf("%s step %d: replica %d buffer %s differs", name, step, i, fb[k].Name)
					}
				}
			}
			for w := range fast.exchanges {
				fs, ps := fast.exchanges[w].State(), plain.exchanges[w].State()
				if len(fs) != len(ps) {
					t.Fatalf("%s step %d: worker %d has %d state buffers, %d without shortcuts", name, step, w, len(fs), len(ps))
				}
				for k, b := range fs {
					if !bytes.Equal(f32bits(b), f32bits(ps[k])) {
						t.Fatalf("%s step %d: worker %d state %s differs", name, step, w, k)
					}
				}
				ft, _ := json.Marshal(fast.exchanges[w].Traffic())
				pt, _ := json.Marshal(plain.exchanges[w].Traffic())
				if string(ft) != string(pt) {
					t.Fatalf("%s step %d: worker %d traffic %s, without shortcuts %s", name, step, w, ft, pt)
				}
			}
		}
		fast.close()
		plain.close()
	}
}

func TestMeasureEngine(t *testing.T) {
	c, err := NewCase("lenet5", 8, models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc := []Scenario{{1, 1, "none", false}, {4, 2, "none", true}, {4, 2, "none", false}, {4, 2, "dgc", false}, {2, 1, "powersgd", false}}
	r, err := MeasureEngine(context.Background(), EngineCase{Case: c, Scenarios: sc}, 2, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Params != 61706 || r.GlobalBatch != 8 || r.Steps != 2 || r.Warmup != 1 || r.Trials != 3 || len(r.Scenarios) != 5 || r.Machine == "" {
		t.Fatalf("result %+v", r)
	}
	for i, s := range r.Scenarios {
		if s.Scenario != sc[i].String() || s.Unfused != sc[i].Unfused || s.WorkerBatch != 8/sc[i].Workers || s.OpWorkers != max(1, r.GOMAXPROCS/sc[i].Replicas) || len(s.TrialSeconds) != 3 {
			t.Errorf("scenario %d: %+v", i, s)
		}
		if st := Summarize(s.TrialSeconds); st.Best != s.BestSeconds || st.Median != s.MedianSeconds || st.Spread != s.Spread {
			t.Errorf("scenario %s: summary %+v, result %v %v %v", s.Scenario, st, s.BestSeconds, s.MedianSeconds, s.Spread)
		}
		base := r.Scenarios[0]
		if s.BestRatio != s.BestSeconds/base.BestSeconds || s.MedianRatio != s.MedianSeconds/base.MedianSeconds {
			t.Errorf("scenario %s: ratios %v %v", s.Scenario, s.BestRatio, s.MedianRatio)
		}
		if s.ComputeSeconds <= 0 || s.ComputeSeconds > 10*s.MedianSeconds {
			t.Errorf("scenario %s: compute %v s, step %v s", s.Scenario, s.ComputeSeconds, s.MedianSeconds)
		}
	}
	// dgc is compared with 4/2/none (fused, as the trainer runs it), not
	// 4/2/none/unfused; 2/1/powersgd has no uncompressed scenario of its shape.
	dense, dgc, psgd := r.Scenarios[2], r.Scenarios[3], r.Scenarios[4]
	if dgc.BestOverhead == nil || math.Abs(*dgc.BestOverhead-(dgc.BestSeconds/dense.BestSeconds-1)) > 1e-12 ||
		*dgc.MedianOverhead != dgc.MedianSeconds/dense.MedianSeconds-1 {
		t.Errorf("dgc overhead %v %v", dgc.BestOverhead, dgc.MedianOverhead)
	}
	if psgd.BestOverhead != nil || dense.BestOverhead != nil || r.Scenarios[1].BestOverhead != nil {
		t.Errorf("overheads without a reference: %v %v", psgd.BestOverhead, r.Scenarios[1].BestOverhead)
	}
}

func TestParseScenario(t *testing.T) {
	s, err := ParseScenario("8/2/dgc")
	if err != nil || s != (Scenario{8, 2, "dgc", false}) || s.String() != "8/2/dgc" {
		t.Fatalf("%v %v", s, err)
	}
	s, err = ParseScenario("8/2/none/unfused")
	if err != nil || s != (Scenario{8, 2, "none", true}) || s.String() != "8/2/none/unfused" {
		t.Fatalf("%v %v", s, err)
	}
	for in, want := range map[string]string{
		"8/2":         "expected WORKERS/REPLICAS/COMPRESSOR",
		"x/2/none":    "whole numbers",
		"2/4/none":    "replicas <= workers",
		"0/0/none":    "whole numbers",
		"8/2/zipper":  `unknown compressor "zipper"`,
		"8/2/none/x":  "expected WORKERS/REPLICAS/COMPRESSOR",
		"-1/1/none":   "whole numbers",
		"8/2/powersg": "powersgd",
	} {
		if _, err := ParseScenario(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error mentioning %q", in, err, want)
		}
	}
	c, _ := NewCase("lenet5", 6, models.Config{})
	if _, err := MeasureEngine(context.Background(), EngineCase{Case: c, Scenarios: []Scenario{{4, 2, "none", false}}}, 1, 0, 1); err == nil || !strings.Contains(err.Error(), "global batch 6") {
		t.Errorf("uneven batch: %v", err)
	}
	if _, err := MeasureEngine(context.Background(), EngineCase{Case: c, Scenarios: []Scenario{{1, 1, "none", false}}}, 0, 0, 1); err == nil {
		t.Error("0 steps accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureEngine(ctx, EngineCase{Case: c, Scenarios: []Scenario{{1, 1, "none", false}}}, 1, 1, 1); err != context.Canceled {
		t.Errorf("cancelled context: %v", err)
	}
}

// relDiff is |a - b| / |b| in the Euclidean norm.
func relDiff(a, b []float32) float64 {
	var d, n float64
	for i := range a {
		d += (float64(a[i]) - float64(b[i])) * (float64(a[i]) - float64(b[i]))
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// TestFusedPowerSGDMatchesWorkerByWorker runs PowerSGD steps fused
// (dist.Engine.Fuse: one forward and backward per replica, worker 0's
// exchange run once on the mean gradient) and checks each against a
// worker-by-worker step from the same parameters and exchange state (every
// worker holding the fused run's mean state, after SyncState): the exchanged
// mean gradient must agree up to float32 rounding, the byte counts of every
// worker exactly, and the fused run's state afterwards must be the mean of
// the workers' states. (Over many steps the two runs drift apart faster than
// dense ones: PowerSGD's warm-started power iteration turns rounding into a
// rotation of Q when singular values are close.) 30 steps cover the vanilla
// phase, its end and a sampled step (every worker timed on its own).
func TestFusedPowerSGDMatchesWorkerByWorker(t *testing.T) {
	variants := []func(c *compress.Config){
		func(c *compress.Config) { c.Name, c.PowerSGD.StartIter = "powersgd", 3 },
		func(c *compress.Config) { c.Name, c.MinSize, c.PowerSGD.Rank = "powersgd", 0, 2 },
		func(c *compress.Config) {
			c.Name, c.PowerSGD.ErrorFeedback, c.PowerSGD.WarmStart = "powersgd", false, false
		},
	}
	for vi, set := range variants {
		c, err := NewCase("lenet5", 16, models.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := engineConfig(c, Scenario{Workers: 8, Replicas: 2})
		set(&cfg.Compress)
		name := fmt.Sprintf("variant %d", vi)
		fused, err := buildEngineRun(c, cfg, engineHooks{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !fused.engine.Fused() {
			t.Fatalf("%s: PowerSGD's steps are not fused", name)
		}
		plain, err := buildEngineRun(c, cfg, engineHooks{noFuse: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for step := range 30 {
			if err := fused.engine.SyncState(); err != nil {
				t.Fatal(err)
			}
			for w, x := range plain.exchanges {
				if err := x.SetState(fused.exchanges[w].State()); err != nil {
					t.Fatal(err)
				}
			}
			copy(plain.net.Flat(), fused.net.Flat())
			plain.engine.SyncReplicas()
			var grads [2][]float32
			for i, r := range []*engineRun{fused, plain} {
				if _, err := r.engine.Step(step, r.batch); err != nil {
					t.Fatalf("%s step %d: %v", name, step, err)
				}
				grads[i] = append([]float32(nil), r.net.Grad()...)
			}
			if d := relDiff(grads[0], grads[1]); d > 1e-5 {
				t.Fatalf("%s step %d: fused mean gradient off by %.3g (relative)", name, step, d)
			}
			for w := range fused.exchanges {
				ft, _ := json.Marshal(fused.exchanges[w].Traffic())
				pt, _ := json.Marshal(plain.exchanges[w].Traffic())
				if string(ft) != string(pt) {
					t.Fatalf("%s step %d: worker %d traffic %s, worker by worker %s", name, step, w, ft, pt)
				}
			}
			if err := fused.engine.SyncState(); err != nil {
				t.Fatal(err)
			}
			mean := map[string][]float32{}
			for k, v := range plain.exchanges[0].State() {
				m := make([]float32, len(v))
				for _, x := range plain.exchanges {
					for i, u := range x.State()[k] {
						m[i] += u / float32(len(plain.exchanges))
					}
				}
				mean[k] = m
			}
			for w, x := range fused.exchanges {
				st := x.State()
				if len(st) != len(mean) {
					t.Fatalf("%s: worker %d has %d state buffers, want %d", name, w, len(st), len(mean))
				}
				for k, v := range st {
					if d := relDiff(v, mean[k]); d > 1e-5 {
						t.Fatalf("%s step %d: worker %d state %s off the workers' mean by %.3g (relative)", name, step, w, k, d)
					}
				}
			}
			if err := fused.opt.Step(fused.net.Params(), 0.05); err != nil {
				t.Fatal(err)
			}
			fused.engine.SyncReplicas()
		}
		// The sampled step 25 timed the compressor for the time model.
		if c := fused.exchanges[0].CodecSeconds(); !(c > 0) {
			t.Errorf("%s: worker 0's compressor time per step %v after a sampled step", name, c)
		}
		fused.close()
		plain.close()
	}
}

// TestScenarioPasses: a scenario runs its replicas' workers the way the
// trainer would (fused for none, grouped for DGC on lenet5, one by one with
// BatchNorm), and /unfused one by one.
func TestScenarioPasses(t *testing.T) {
	for _, c := range []struct {
		model, scenario, want string
	}{
		{"lenet5", "8/2/none", "fused"},
		{"lenet5", "8/2/dgc", "grouped"},
		{"lenet5", "8/2/dgc/unfused", "one by one"},
		{"resnet20", "4/2/dgc", "one by one"},
	} {
		cs, err := NewCase(c.model, 8, models.Config{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseScenario(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		r, err := newEngineRun(cs, s)
		if err != nil {
			t.Fatalf("%s %s: %v", c.model, c.scenario, err)
		}
		if got := r.engine.Passes(); got != c.want {
			t.Errorf("%s %s: passes %q, expected %q", c.model, c.scenario, got, c.want)
		}
		r.close()
	}
}

// TestEngineMemoryCheck: scenarios that together need more than the memory
// available are refused before any is built, with each one's share (they are
// all built before the first step; 64 workers of the MLP with DGC hold about
// 64 x 2.1 MB x 5 in gradients, exchange buffers and DGC state).
func TestEngineMemoryCheck(t *testing.T) {
	t.Setenv("GRADWIRE_MEMORY_LIMIT", "64MiB")
	c, err := NewCase("mlp", 64, models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc := []Scenario{{1, 1, "none", false}, {64, 2, "dgc", false}}
	_, err = MeasureEngine(context.Background(), EngineCase{Case: c, Scenarios: sc}, 1, 0, 1)
	for _, want := range []string{"mlp at global batch 64", "(1/1/none 0.0 GiB, 64/2/dgc ", "more than the 0.1 GiB available (GRADWIRE_MEMORY_LIMIT)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one naming %q", err, want)
		}
	}
	if _, err := MeasureEngine(context.Background(), EngineCase{Case: c, Scenarios: sc[:1]}, 1, 0, 1); err != nil {
		t.Errorf("one worker under the limit: %v", err)
	}
}
