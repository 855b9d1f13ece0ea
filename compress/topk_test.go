package compress

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/dist"
)

// baselineTensors lays out tensors of the given shapes in a packed buffer.
func baselineTensors(shapes ...[]int) []Tensor {
	var ts []Tensor
	off := 0
	for i, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		ts = append(ts, Tensor{Name: string(rune('a' + i)), Shape: s, Offset: off, FlatOffset: off, Size: n})
		off += n
	}
	return ts
}

// baselineBuild builds a registered compressor for worker of workers, inside
// the exchange's generic step (error feedback).
func baselineBuild(t testing.TB, name string, cfg Config, tensors []Tensor, worker, workers int) *sender {
	t.Helper()
	c, err := Registry[name](cfg, tensors, worker, workers, 7, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	return newSender(name, c, packedSize(tensors))
}

// unwrapFeedback returns the algorithm behind the generic step.
func unwrapFeedback(s *sender) Compressor { return s.c }

func topKConfig(density float64, residual, fp16 bool) Config {
	c := DefaultConfig()
	c.Name, c.Density, c.Residual, c.FP16Values = "topk", density, residual, fp16
	return c
}

// baselineClose fails unless got matches want element-wise within tol.
func baselineClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-float64(want[i])) > tol {
			t.Fatalf("%s: [%d] = %v, want %v\n got  %v\n want %v", what, i, got[i], want[i], got, want)
		}
	}
}

// decodeTopK reads a one-tensor top-k payload of k entries.
func decodeTopK(t *testing.T, b []byte, k int, fp16 bool) ([]int32, []float32) {
	t.Helper()
	d := NewDecoder(b)
	idx, vals := make([]int32, k), make([]float32, k)
	d.Int32s(idx)
	if fp16 {
		d.Float16s(vals)
	} else {
		d.Float32s(vals)
	}
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	return idx, vals
}

// baselineGather compresses g on a single worker and decompresses it.
func baselineGather(t *testing.T, c *sender, g []float32, step int) (Payload, []float32) {
	t.Helper()
	info := StepInfo{Step: step, Workers: 1}
	p, err := c.Compress(0, slices.Clone(g), Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, len(g))
	if err := c.Decompress(Combined{Bytes: [][]byte{p.Bytes}, Workers: 1}, dst, info); err != nil {
		t.Fatal(err)
	}
	return p, dst
}

// The small vector of the hand-worked top-k cases: one 2x4 tensor at density
// 0.25, so k = ceil(8*0.25) = 2.
var (
	topKG1 = []float32{0.1, -0.5, 0.3, 0.05, -0.2, 0.4, 0, -0.45}
	topKG2 = []float32{0.1, 0.1, -0.1, 0, 0.1, 0, 0.1, 0.35}
)

func TestTopKHandWorkedWithoutResidual(t *testing.T) {
	c := baselineBuild(t, "topk", topKConfig(0.25, false, false), baselineTensors([]int{2, 4}), 0, 1)
	if c.Feedback() != nil {
		t.Fatal("topk without compress.residual claims to keep a residual")
	}
	// Step 1: |g1| = .1 .5 .3 .05 .2 .4 0 .45: the two largest are 0.5 at 1
	// and 0.45 at 7. Payload: 2 int32 + 2 float32 = 16 bytes.
	p, dst := baselineGather(t, c, topKG1, 0)
	if p.Wire != 16 || len(p.Bytes) != 16 || !slices.Equal(p.TensorWire, []int64{16}) {
		t.Fatalf("wire %d, %d bytes, per tensor %v; want 16, 16, [16]", p.Wire, len(p.Bytes), p.TensorWire)
	}
	idx, vals := decodeTopK(t, p.Bytes, 2, false)
	if !slices.Equal(idx, []int32{1, 7}) || !slices.Equal(vals, []float32{-0.5, -0.45}) {
		t.Fatalf("step 1 sent %v %v, want [1 7] [-0.5 -0.45]", idx, vals)
	}
	baselineClose(t, "step 1 decompressed", dst, []float32{0, -0.5, 0, 0, 0, 0, 0, -0.45}, 0)
	// Step 2, nothing carried over: |g2| = .1 .1 .1 0 .1 0 .1 .35: 0.35 at 7,
	// then five ties at 0.1, of which the lowest index, 0, wins.
	p, dst = baselineGather(t, c, topKG2, 1)
	idx, vals = decodeTopK(t, p.Bytes, 2, false)
	if !slices.Equal(idx, []int32{0, 7}) || !slices.Equal(vals, []float32{0.1, 0.35}) {
		t.Fatalf("step 2 sent %v %v, want [0 7] [0.1 0.35]", idx, vals)
	}
	baselineClose(t, "step 2 decompressed", dst, []float32{0.1, 0, 0, 0, 0, 0, 0, 0.35}, 0)
	if st := c.State(); len(st) != 0 {
		t.Fatalf("state without residual: %v", st)
	}
}

func TestTopKHandWorkedWithResidual(t *testing.T) {
	c := baselineBuild(t, "topk", topKConfig(0.25, true, false), baselineTensors([]int{2, 4}), 0, 1)
	ef := c.Feedback()
	// Step 1 sends the same as without residual; the residual is g1 with the
	// sent entries (1 and 7) zeroed.
	p, _ := baselineGather(t, c, topKG1, 0)
	idx, _ := decodeTopK(t, p.Bytes, 2, false)
	if !slices.Equal(idx, []int32{1, 7}) {
		t.Fatalf("step 1 sent %v, want [1 7]", idx)
	}
	baselineClose(t, "step 1 residual", ef.Residual(), []float32{0.1, 0, 0.3, 0.05, -0.2, 0.4, 0, 0}, 0)
	baselineClose(t, "step 1 sent", ef.Sent(), []float32{0, -0.5, 0, 0, 0, 0, 0, -0.45}, 0)
	// Step 2: compensated = g2 + residual = .2 .1 .2 .05 -.1 .4 .1 .35; the
	// residual's 0.4 at 5 now beats every 0.1 of g2 alone: 5 and 7 are sent
	// (without residual: 0 and 7).
	p, dst := baselineGather(t, c, topKG2, 1)
	idx, vals := decodeTopK(t, p.Bytes, 2, false)
	if !slices.Equal(idx, []int32{5, 7}) {
		t.Fatalf("step 2 sent %v, want [5 7]", idx)
	}
	baselineClose(t, "step 2 values", vals, []float32{0.4, 0.35}, 0)
	baselineClose(t, "step 2 compensated", ef.Compensated(), []float32{0.2, 0.1, 0.2, 0.05, -0.1, 0.4, 0.1, 0.35}, 1e-7)
	baselineClose(t, "step 2 residual", ef.Residual(), []float32{0.2, 0.1, 0.2, 0.05, -0.1, 0, 0.1, 0}, 1e-7)
	baselineClose(t, "step 2 decompressed", dst, []float32{0, 0, 0, 0, 0, 0.4, 0, 0.35}, 0)

	// The residual is the whole state: a fresh compressor given it sends the
	// same at step 3 as the one that ran.
	fresh := baselineBuild(t, "topk", topKConfig(0.25, true, false), baselineTensors([]int{2, 4}), 0, 1)
	if err := fresh.SetState(c.State()); err != nil {
		t.Fatal(err)
	}
	g3 := []float32{0, 0, 0, 0, 0.3, 0, 0, 0}
	a, _ := baselineGather(t, c, g3, 2)
	b, _ := baselineGather(t, fresh, g3, 2)
	if !slices.Equal(a.Bytes, b.Bytes) {
		t.Fatal("a compressor restored from State sends differently")
	}
}

func TestTopKFP16Values(t *testing.T) {
	c := baselineBuild(t, "topk", topKConfig(0.25, true, true), baselineTensors([]int{2, 4}), 0, 1)
	// Same selection as in float32; the values travel as half precision:
	// -0.5 is exact; 0.45 = 1.8*2^-2 keeps 10 mantissa bits, 0.8*1024 = 819.2
	// -> 819, so -(1+819/1024)/4 = -0.449951171875. The residual keeps the
	// rounding error: float32(-0.45) - (-0.449951171875) = -4.8816204e-5.
	// Payload: 2*(4+2) = 12 bytes.
	p, dst := baselineGather(t, c, topKG1, 0)
	if p.Wire != 12 || len(p.Bytes) != 12 || !slices.Equal(p.TensorWire, []int64{12}) {
		t.Fatalf("wire %d, %d bytes, per tensor %v; want 12", p.Wire, len(p.Bytes), p.TensorWire)
	}
	idx, vals := decodeTopK(t, p.Bytes, 2, true)
	if !slices.Equal(idx, []int32{1, 7}) || !slices.Equal(vals, []float32{-0.5, -0.449951171875}) {
		t.Fatalf("sent %v %v, want [1 7] [-0.5 -0.449951171875]", idx, vals)
	}
	baselineClose(t, "decompressed", dst, []float32{0, -0.5, 0, 0, 0, 0, 0, -0.449951171875}, 0)
	baselineClose(t, "residual", c.Feedback().Residual(), []float32{0.1, 0, 0.3, 0.05, -0.2, 0.4, 0, -4.8816204e-5}, 1e-11)
}

func TestTopKNarrowIndices(t *testing.T) {
	// topKG1's selection (indices 1 and 7) with uint16 indices and fp32
	// values: 2*(2+4) = 12 bytes, decoded to the same gradient.
	cfg := topKConfig(0.25, false, false)
	cfg.NarrowIndices = true
	c := baselineBuild(t, "topk", cfg, baselineTensors([]int{2, 4}), 0, 1)
	p, dst := baselineGather(t, c, topKG1, 0)
	if p.Wire != 12 || len(p.Bytes) != 12 || !slices.Equal(p.TensorWire, []int64{12}) {
		t.Fatalf("wire %d, %d bytes, per tensor %v; want 12", p.Wire, len(p.Bytes), p.TensorWire)
	}
	if want := []byte{1, 0, 7, 0}; !bytes.Equal(p.Bytes[:4], want) {
		t.Fatalf("indices % x, want % x", p.Bytes[:4], want)
	}
	baselineClose(t, "decompressed", dst, []float32{0, -0.5, 0, 0, 0, 0, 0, -0.45}, 0)
}

func TestTopKTwoTensorsTwoWorkers(t *testing.T) {
	// Tensors 2x4 (k = 2) and 3x3 (k = ceil(2.25) = 3), packed at 0 and 8.
	tensors := baselineTensors([]int{2, 4}, []int{3, 3})
	cfg := topKConfig(0.25, false, false)
	w0 := baselineBuild(t, "topk", cfg, tensors, 0, 2)
	w1 := baselineBuild(t, "topk", cfg, tensors, 1, 2)
	// Worker 0: tensor a sends 1, 7 (-0.5, -0.45); tensor b = 0 1 -2 .5 0 0 3
	// 0 -.25 sends its three largest, local indices 1, 2, 6 (1, -2, 3).
	g0 := append(slices.Clone(topKG1), 0, 1, -2, 0.5, 0, 0, 3, 0, -0.25)
	// Worker 1: tensor a sends 1, 2 (0.3, 0.6); tensor b sends 0, 1, 2 (the
	// 1s: ties go to the lowest indices).
	g1 := []float32{0, 0.3, 0.6, 0, 0, 0, 0, 0.1, 1, 1, 1, 1, 1, 0, 0, 0, 0}
	info := StepInfo{Workers: 2}
	p0, err := w0.Compress(0, slices.Clone(g0), Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := w1.Compress(0, slices.Clone(g1), Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	// 2*8 + 3*8 bytes.
	if p0.Wire != 40 || !slices.Equal(p0.TensorWire, []int64{16, 24}) {
		t.Fatalf("wire %d, per tensor %v; want 40, [16 24]", p0.Wire, p0.TensorWire)
	}
	// Mean: a[1] = (-0.5+0.3)/2, a[2] = 0.6/2, a[7] = -0.45/2; b[0] = 1/2,
	// b[1] = (1+1)/2, b[2] = (-2+1)/2, b[6] = 3/2.
	want := []float32{0, -0.1, 0.3, 0, 0, 0, 0, -0.225, 0.5, 1, -0.5, 0, 0, 0, 1.5, 0, 0}
	last := Combined{Bytes: [][]byte{p0.Bytes, p1.Bytes}, Workers: 2}
	var outs [2][]float32
	for w, c := range []*sender{w0, w1} {
		outs[w] = make([]float32, len(want))
		if err := c.Decompress(last, outs[w], info); err != nil {
			t.Fatal(err)
		}
	}
	baselineClose(t, "mean", outs[0], want, 1e-7)
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatal("the workers decompress differently")
	}
}

// baselineGarbled returns variants of a valid all-gather result that must be rejected.
func baselineGarbled(p []byte, workers int) map[string]Combined {
	one := func(b []byte) Combined {
		bs := make([][]byte, workers)
		for w := range bs {
			bs[w] = p
		}
		bs[workers-1] = b
		return Combined{Bytes: bs, Workers: workers}
	}
	return map[string]Combined{
		"truncated":       one(p[:len(p)-1]),
		"empty":           one(nil),
		"trailing":        one(append(slices.Clone(p), 0)),
		"missing worker":  {Bytes: [][]byte{p}, Workers: workers},
		"no workers":      {Workers: 0},
		"too many copies": {Bytes: [][]byte{p, p, p}, Workers: workers},
	}
}

func TestTopKRejectsBadPayloads(t *testing.T) {
	tensors := baselineTensors([]int{2, 4})
	c := baselineBuild(t, "topk", topKConfig(0.25, true, false), tensors, 0, 2)
	p, err := c.Compress(0, slices.Clone(topKG1), Combined{}, StepInfo{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	cases := baselineGarbled(p.Bytes, 2)
	for name, idx := range map[string]uint32{"index past the end": 8, "negative index": 0xffffffff} {
		b := slices.Clone(p.Bytes)
		b[4], b[5], b[6], b[7] = byte(idx), byte(idx>>8), byte(idx>>16), byte(idx>>24) // the second index
		cases[name] = Combined{Bytes: [][]byte{p.Bytes, b}, Workers: 2}
	}
	dst := make([]float32, 8)
	for name, last := range cases {
		if err := c.Decompress(last, dst, StepInfo{Workers: 2}); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "topk: ") {
			t.Errorf("%s: error %q does not name the compressor", name, err)
		}
	}
}

func TestSparsifierConfigErrors(t *testing.T) {
	tensors := baselineTensors([]int{2, 4})
	for _, name := range []string{"topk", "randomk"} {
		for _, d := range []float64{0, -0.1, 1.5, math.NaN()} {
			cfg := topKConfig(d, true, false)
			_, err := Registry[name](cfg, tensors, 0, 1, 1, Hyper{})
			if err == nil || !strings.Contains(err.Error(), "compress.density") {
				t.Errorf("%s density %v: error %v, want one naming compress.density", name, d, err)
			}
		}
	}
}

func TestSparsifierStateErrors(t *testing.T) {
	tensors := baselineTensors([]int{2, 4})
	for _, name := range []string{"topk", "randomk", "onebit"} {
		c := baselineBuild(t, name, topKConfig(0.25, true, false), tensors, 0, 1)
		for what, st := range map[string]map[string][]float32{
			"missing":      {},
			"wrong length": {"residual": make([]float32, 7)},
			"unknown":      {"residual": make([]float32, 8), "momentum": make([]float32, 8)},
		} {
			if err := c.SetState(st); err == nil {
				t.Errorf("%s: %s state accepted", name, what)
			}
		}
		if err := c.SetState(map[string][]float32{"residual": make([]float32, 8)}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"topk", "randomk"} {
		c := baselineBuild(t, name, topKConfig(0.25, false, false), tensors, 0, 1)
		if err := c.SetState(map[string][]float32{"residual": make([]float32, 8)}); err == nil {
			t.Errorf("%s without residual accepted a residual", name)
		}
		if err := c.SetState(nil); err != nil {
			t.Errorf("%s without residual: %v", name, err)
		}
	}
}

func TestBaselinesDoNotAllocatePerStep(t *testing.T) {
	tensors := baselineTensors([]int{100, 100}, []int{50, 20})
	g := make([]float32, 11000)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, name := range []string{"topk", "randomk", "onebit"} {
		c := baselineBuild(t, name, topKConfig(0.01, true, true), tensors, 0, 1)
		dst := make([]float32, len(g))
		gathered := make([][]byte, 1)
		step := 0
		run := func() {
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			info := StepInfo{Step: step, Workers: 1}
			step++
			p, err := c.Compress(0, g, Combined{}, info)
			if err != nil {
				t.Fatal(err)
			}
			last := Combined{Floats: p.Floats, Workers: 1}
			if c.needs.Collective == dist.OpAllGather {
				gathered[0] = p.Bytes
				last = Combined{Bytes: gathered, Workers: 1}
			}
			if err := c.Decompress(last, dst, info); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if a := testing.AllocsPerRun(5, run); a != 0 {
			t.Errorf("%s: %v allocations per step", name, a)
		}
	}
}

// benchBaseline measures compress+decompress of one worker on one tensor of
// 1M and 10M elements, with the default config (density 0.001, residual).
func benchBaseline(b *testing.B, name string) {
	cfg := DefaultConfig()
	cfg.Name = name
	for _, sz := range []struct {
		name  string
		shape []int
	}{{"1M", []int{1000, 1000}}, {"10M", []int{1000, 10000}}} {
		b.Run(sz.name, func(b *testing.B) {
			tensors := baselineTensors(sz.shape)
			n := tensors[0].Size
			c := baselineBuild(b, name, cfg, tensors, 0, 1)
			rng := rand.New(rand.NewPCG(1, 2))
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			grad, dst := make([]float32, n), make([]float32, n)
			gathered := make([][]byte, 1)
			step := 0
			run := func() {
				info := StepInfo{Step: step, Workers: 1}
				step++
				p, err := c.Compress(0, grad, Combined{}, info)
				if err != nil {
					b.Fatal(err)
				}
				last := Combined{Floats: p.Floats, Workers: 1}
				if c.needs.Collective == dist.OpAllGather {
					gathered[0] = p.Bytes
					last = Combined{Bytes: gathered, Workers: 1}
				}
				if err := c.Decompress(last, dst, info); err != nil {
					b.Fatal(err)
				}
			}
			// Buffers that grow on first use (payload, selection scratch) are
			// steady-state after one step: the allocations reported are per step.
			copy(grad, src)
			run()
			b.ReportAllocs()
			for b.Loop() {
				// The exchange's copy into the packed buffer is not the compressor's work.
				b.StopTimer()
				copy(grad, src)
				b.StartTimer()
				run()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
		})
	}
}

func BenchmarkTopK(b *testing.B) { benchBaseline(b, "topk") }

// decodeMean is the exchange's mean over a combined result, for compressor c.
func decodeMean(c Compressor, last Combined, dst []float32, info StepInfo) error {
	return newSender("test", c, len(dst)).Decompress(last, dst, info)
}
