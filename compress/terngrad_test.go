package compress

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ternExchange runs one TernGrad step on every worker (one payload each,
// all-gathered) and returns the payloads and worker 0's mean.
func ternExchange(t *testing.T, ws []*sender, grads [][]float32, step int) ([]Payload, []float32) {
	t.Helper()
	n := len(ws)
	var ps []Payload
	var all [][]byte
	for w, s := range ws {
		p, err := s.Compress(0, slices.Clone(grads[w]), Combined{}, StepInfo{Step: step, Worker: w, Workers: n})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, Payload{Bytes: slices.Clone(p.Bytes), Wire: p.Wire})
		all = append(all, ps[w].Bytes)
	}
	dst := make([]float32, len(grads[0]))
	if err := ws[0].Decompress(Combined{Bytes: all, Workers: n}, dst, StepInfo{Step: step, Workers: n}); err != nil {
		t.Fatal(err)
	}
	return ps, dst
}

// The shared 2x4 example of ALGORITHMS-COMPRESSORS2.md, two workers, two
// steps, seed 7, c = 2.5. The uniform draws are those of the PCG seeded by
// (7, worker, step, tensor 0), to 4 decimals (checked below).
//
// Step 0, worker 0: g = [0.4, -0.2, 0.1, 0, -0.6, 0.3, 0.05, -0.1]; mean
// -0.00625, sigma 0.289868, bound 0.724670: nothing clipped; s = 0.6;
// |g|/s = [.6667, .3333, .1667, 0, 1, .5, .0833, .1667];
// u = [.5992, .3667, .3910, .3212, .7682, .0415, .8157, .8442];
// t = [1, 0, 0, 0, -1, 1, 0, 0]; codes t+1 = [2,1,1,1 | 0,2,1,1]:
// bytes 2+1*4+1*16+1*64 = 86 and 0+2*4+1*16+1*64 = 88, then float32 0.6.
// Worker 1: g = [0.2, -0.1, 0.3, -0.4, -0.5, 0.1, 0, 0.2]; sigma 0.272718,
// bound 0.681795: nothing clipped; s = 0.5; |g|/s = [.4, .2, .6, .8, 1, .2, 0, .4];
// u = [.1101, .4697, .3518, .4711, .2283, .9600, .4927, .9801];
// t = [1, 0, 1, -1, -1, 0, 0, 0].
// Mean: ([.6, 0, 0, 0, -.6, .6, 0, 0] + [.5, 0, .5, -.5, -.5, 0, 0, 0]) / 2
// = [0.55, 0, 0.25, -0.25, -0.55, 0.3, 0, 0].
//
// Step 1, worker 0: g = [0.3, -0.1, 0.2, 0.1, -0.4, 0.2, -0.05, 0]; sigma
// 0.207572, bound 0.518929: nothing clipped; s = 0.4;
// |g|/s = [.75, .25, .5, .25, 1, .5, .125, 0];
// u = [.5863, .4729, .0190, .0764, .6577, .4984, .7672, .8070];
// t = [1, 0, 1, 1, -1, 1, 0, 0].
// Worker 1: g = [0.1, 0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1]; sigma 0.161536,
// bound 0.403839: nothing clipped; s = 0.3;
// |g|/s = [.3333, 0, .6667, 1, .6667, .3333, .3333, .3333];
// u = [.9773, .3041, .7765, .3260, .0890, .4934, .8097, .2871];
// t = [0, 0, 0, -1, -1, 0, 0, 1].
// Mean: ([.4, 0, .4, .4, -.4, .4, 0, 0] + [0, 0, 0, -.3, -.3, 0, 0, .3]) / 2
// = [0.2, 0, 0.2, 0.05, -0.35, 0.2, 0, 0.15].
// No error feedback: nothing carries from step 0 to step 1.
func TestTernGradHandWorked(t *testing.T) {
	draws := [2][2][8]float64{
		{{.5992, .3667, .3910, .3212, .7682, .0415, .8157, .8442}, {.1101, .4697, .3518, .4711, .2283, .9600, .4927, .9801}},
		{{.5863, .4729, .0190, .0764, .6577, .4984, .7672, .8070}, {.9773, .3041, .7765, .3260, .0890, .4934, .8097, .2871}},
	}
	for step := range 2 {
		for w := range 2 {
			r := rand.New(rand.NewPCG(dgcMix(7, uint64(w)), dgcMix(uint64(step), 0)))
			for i, want := range draws[step][w] {
				if u := r.Float64(); math.Abs(u-want) > 5e-5 {
					t.Fatalf("step %d worker %d draw %d = %v, the comment says %v", step, w, i, u, want)
				}
			}
		}
	}
	tensors := baselineTensors([]int{2, 4})
	ws := []*sender{
		baselineBuild(t, "terngrad", DefaultConfig(), tensors, 0, 2),
		baselineBuild(t, "terngrad", DefaultConfig(), tensors, 1, 2),
	}
	if ws[0].Feedback() != nil {
		t.Fatal("terngrad keeps error feedback; the paper has none")
	}
	ps, mean := ternExchange(t, ws, [][]float32{
		{0.4, -0.2, 0.1, 0.0, -0.6, 0.3, 0.05, -0.1},
		{0.2, -0.1, 0.3, -0.4, -0.5, 0.1, 0.0, 0.2},
	}, 0)
	want0 := append([]byte{86, 88}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.6))...)
	if !bytes.Equal(ps[0].Bytes, want0) || ps[0].Wire != 6 {
		t.Fatalf("worker 0's payload %v (wire %d), want %v in 6 bytes", ps[0].Bytes, ps[0].Wire, want0)
	}
	baselineClose(t, "step 0 mean", mean, []float32{0.55, 0, 0.25, -0.25, -0.55, 0.3, 0, 0}, 1e-6)
	_, mean = ternExchange(t, ws, [][]float32{
		{0.3, -0.1, 0.2, 0.1, -0.4, 0.2, -0.05, 0.0},
		{0.1, 0.0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1},
	}, 1)
	baselineClose(t, "step 1 mean", mean, []float32{0.2, 0, 0.2, 0.05, -0.35, 0.2, 0, 0.15}, 1e-6)

	// A fresh compressor (a resumed run) draws the same numbers at step 1.
	fresh := baselineBuild(t, "terngrad", DefaultConfig(), tensors, 1, 2)
	a, _ := ws[1].Compress(0, []float32{0.1, 0.0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1}, Combined{}, StepInfo{Step: 1, Worker: 1, Workers: 2})
	a.Bytes = slices.Clone(a.Bytes)
	b, _ := fresh.Compress(0, []float32{0.1, 0.0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1}, Combined{}, StepInfo{Step: 1, Worker: 1, Workers: 2})
	if !bytes.Equal(a.Bytes, b.Bytes) {
		t.Fatalf("same (seed, worker, step, tensor), different payloads %v and %v", a.Bytes, b.Bytes)
	}
}

// The doc's clipping example: g = [1.2, 0.1, -0.1, 0.05, 0, -0.05, 0.1, -0.1]
// has mean 0.15 and squared deviations 1.1025, .0025, .0625, .01, .0225, .04,
// .0025, .0625 (sum 1.305), so sigma = sqrt(1.305/8) = 0.403887 and the bound
// 2.5 sigma = 1.009718: only 1.2 is clipped, and s = 1.009718. The clipped
// maximum has |g|/s = 1, so it is sent as +1 whatever the draw. The second
// worker's g = [0.3, -0.2, 0.25, -0.1, 0.15, -0.3, 0.05, 0.2] (sigma 0.206817,
// bound 0.517044) is left alone: s = 0.3. With clip_c = 0, s = 1.2.
func TestTernGradClipping(t *testing.T) {
	g := []float32{1.2, 0.1, -0.1, 0.05, 0.0, -0.05, 0.1, -0.1}
	clipped := slices.Clone(g)
	ternClip(clipped, 2.5)
	baselineClose(t, "clipped", clipped, []float32{1.009718, 0.1, -0.1, 0.05, 0.0, -0.05, 0.1, -0.1}, 1e-6)
	g2 := []float32{0.3, -0.2, 0.25, -0.1, 0.15, -0.3, 0.05, 0.2}
	kept := slices.Clone(g2)
	ternClip(kept, 2.5)
	baselineClose(t, "second worker", kept, g2, 0)
	flat := []float32{0.5, 0.5, 0.5, 0.5}
	ternClip(flat, 2.5)
	baselineClose(t, "sigma 0", flat, []float32{0.5, 0.5, 0.5, 0.5}, 0)

	scaleOf := func(cfg Config, g []float32, step int) (float32, byte) {
		c := baselineBuild(t, "terngrad", cfg, baselineTensors([]int{2, 4}), 0, 1)
		p, err := c.Compress(0, slices.Clone(g), Combined{}, StepInfo{Step: step, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(p.Bytes[2:])), p.Bytes[0] & 3
	}
	for step := range 20 {
		if s, code := scaleOf(DefaultConfig(), g, step); math.Abs(float64(s)-1.009718) > 1e-6 || code != 2 {
			t.Fatalf("step %d: scale %v, first code %d; want 1.009718 and 2 (+1)", step, s, code)
		}
	}
	if s, _ := scaleOf(DefaultConfig(), g2, 0); s != 0.3 {
		t.Fatalf("unclipped scale %v, want 0.3", s)
	}
	off := DefaultConfig()
	off.TernGrad.ClipC = 0
	if s, _ := scaleOf(off, g, 0); s != 1.2 {
		t.Fatalf("clip_c 0: scale %v, want 1.2", s)
	}
}

// Over many steps (fresh draws each), the decoded s*t averages to the
// gradient (no clipping bites on this one: bound 0.7247 > 0.6), and its
// variance to s|g| - g^2. The mean's standard error is at most
// sqrt(0.09/20000) = 0.0021, so 0.01 is 4.7 of them; rounding to the nearest
// level instead would be off by up to 0.2 (0.1 -> 0, 0.3 -> 0 or 0.6).
func TestTernGradUnbiased(t *testing.T) {
	g := []float32{0.4, -0.2, 0.1, 0.0, -0.6, 0.3, 0.05, -0.1}
	const s, draws = 0.6, 20000
	c := baselineBuild(t, "terngrad", DefaultConfig(), baselineTensors([]int{2, 4}), 3, 4)
	sum, sq := make([]float64, len(g)), make([]float64, len(g))
	for step := range draws {
		p, err := c.Compress(0, slices.Clone(g), Combined{}, StepInfo{Step: step, Worker: 3, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float32, len(g))
		if err := c.c.DecodeAdd(p, dst, StepInfo{}); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			if v != 0 && math.Abs(float64(v)) != float64(float32(s)) {
				t.Fatalf("step %d: decoded [%d] = %v, not in {-s, 0, s}", step, i, v)
			}
			sum[i] += float64(v)
			sq[i] += float64(v) * float64(v)
		}
	}
	for i, v := range g {
		mean := sum[i] / draws
		variance := sq[i]/draws - mean*mean
		want := s*math.Abs(float64(v)) - float64(v)*float64(v)
		if math.Abs(mean-float64(v)) > 0.01 {
			t.Errorf("[%d]: mean of %d decoded values %v, want the gradient %v", i, draws, mean, v)
		}
		if math.Abs(variance-want) > 0.006 {
			t.Errorf("[%d]: variance %v, want s|g|-g^2 = %v", i, variance, want)
		}
	}
}

// Payloads are checked before they are decoded: wrong length, a code 3, a
// negative or NaN scale.
func TestTernGradRejects(t *testing.T) {
	c := baselineBuild(t, "terngrad", DefaultConfig(), baselineTensors([]int{2, 4}), 0, 1)
	p, _ := c.Compress(0, []float32{1, -1, 0, 0, 0, 0, 0, 0}, Combined{}, StepInfo{Workers: 1})
	good := slices.Clone(p.Bytes)
	dst := make([]float32, 8)
	if err := c.c.DecodeAdd(Payload{Bytes: good}, dst, StepInfo{}); err != nil {
		t.Fatalf("a good payload was rejected: %v", err)
	}
	for name, b := range map[string][]byte{
		"short":    good[:5],
		"code 3":   append([]byte{good[0] | 3}, good[1:]...),
		"negative": append(slices.Clone(good[:2]), binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1))...),
		"NaN":      append(slices.Clone(good[:2]), binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))...),
	} {
		if err := c.c.DecodeAdd(Payload{Bytes: b}, dst, StepInfo{}); err == nil {
			t.Errorf("%s payload %v was accepted", name, b)
		}
	}
	bad := DefaultConfig()
	bad.TernGrad.ClipC = -1
	if _, err := newTernGrad(bad, nil, 0, 1, 0, Hyper{}); err == nil {
		t.Fatal("clip_c -1 was accepted")
	}
}

// Counted bytes are the encoding: 2 bits an element rounded up to a byte per
// tensor, plus a float32 scale per tensor (a 3x3 tensor: 3 + 4 bytes; 2x4:
// 2 + 4).
func TestTernGradWire(t *testing.T) {
	c := baselineBuild(t, "terngrad", DefaultConfig(), baselineTensors([]int{3, 3}, []int{2, 4}), 0, 1)
	g := make([]float32, 17)
	for i := range g {
		g[i] = float32(i%5) - 2
	}
	p, err := c.Compress(0, g, Combined{}, StepInfo{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Bytes) != 13 || p.Wire != 13 || !slices.Equal(p.TensorWire, []int64{7, 6}) {
		t.Fatalf("payload %d bytes, wire %d, per tensor %v; want 13, 13, [7 6]", len(p.Bytes), p.Wire, p.TensorWire)
	}
}
