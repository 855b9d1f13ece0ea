package compress

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func qsgdConfig(levels, bucket int, norm string) Config {
	c := DefaultConfig()
	c.Name = "qsgd"
	c.QSGD = QSGDConfig{Levels: levels, BucketSize: bucket, Norm: norm}
	return c
}

// qsgdFixedDraws makes the compressor behind s draw u from us, in order.
func qsgdFixedDraws(t *testing.T, s *sender, us ...float64) {
	t.Helper()
	c := unwrapFeedback(s).(*qsgd)
	c.draw = func() float64 {
		if len(us) == 0 {
			t.Fatal("more draws than fixed")
		}
		u := us[0]
		us = us[1:]
		return u
	}
}

// The worked example of ALGORITHMS-COMPRESSORS2.md (QSGD): one 2x4 tensor, two
// workers, s = 2, bucket 4 (one row), 2-norm, so a = 2|v|/n and each element
// takes 1 sign bit + 2 level bits: 24 bits = 3 bytes of codes + 2 float32
// scales = 11 bytes per worker. A code is sign | level<<1 and element i's code
// sits at bits 3i..3i+2.
//
// Step 1. Worker 1, g = [0.4, -0.2, 0.1, 0 | -0.6, 0.3, 0.05, -0.1],
// u = [0.30, 0.90, 0.10, 0.50 | 0.70, 0.20, 0.60, 0.40]:
//
//	n0 = sqrt(0.16+0.04+0.01) = 0.458258, a = [1.7457, 0.8729, 0.4364, 0]
//	  u < p: [yes, no, yes, no] -> levels [2, 0, 1, 0]
//	n1 = sqrt(0.36+0.09+0.0025+0.01) = 0.680074, a = [1.7645, 0.8823, 0.1470, 0.2941]
//	  u < p: [no, yes, no, no] -> levels [2, 1, 0, 0]
//	Q = [0.4583, 0, 0.2291, 0 | -0.6801, 0.3400, 0, 0]
//	codes [4, 0, 2, 0, 5, 2, 0, 0] -> 4 + 2<<6 + 5<<12 + 2<<15 = 86148 = bytes [132, 80, 1]
//
// Worker 2, g = [0.2, -0.1, 0.3, -0.4 | -0.5, 0.1, 0, 0.2],
// u = [0.80, 0.15, 0.55, 0.05 | 0.35, 0.95, 0.25, 0.65]:
//
//	n0 = sqrt(0.04+0.01+0.09+0.16) = 0.547723, a = [0.7303, 0.3651, 1.0954, 1.4606] -> levels [0, 1, 1, 2]
//	n1 = sqrt(0.25+0.01+0.04) = 0.547723, a = [1.8257, 0.3651, 0, 0.7303] -> levels [2, 0, 0, 1]
//	Q = [0, -0.2739, 0.2739, -0.5477 | -0.5477, 0, 0, 0.2739]
//	codes [0, 3, 2, 5, 5, 0, 0, 2] -> bytes [152, 90, 64]
//
// Mean: [0.2291, -0.1369, 0.2515, -0.2739, -0.6139, 0.1700, 0, 0.1369] (as in the doc).
//
// Step 2 (no error feedback: the step starts afresh). Worker 1,
// g = [0.3, -0.1, 0.2, 0.1 | -0.4, 0.2, -0.05, 0], u = [0.25, 0.75, 0.45, 0.65 | 0.15, 0.85, 0.35, 0.55]:
//
//	n0 = sqrt(0.09+0.01+0.04+0.01) = 0.387298, a = [1.5492, 0.5164, 1.0328, 0.5164] -> levels [2, 0, 1, 0]
//	n1 = sqrt(0.16+0.04+0.0025) = 0.45, a = [1.7778, 0.8889, 0.2222, 0] -> levels [2, 1, 0, 0]
//	Q = [0.3873, 0, 0.1936, 0 | -0.45, 0.225, 0, 0]
//
// Worker 2, g = [0.1, 0, 0.2, -0.3 | -0.2, 0.1, 0.1, 0.1], u = [0.60, 0.40, 0.90, 0.10 | 0.50, 0.30, 0.70, 0.20]:
//
//	n0 = sqrt(0.01+0.04+0.09) = 0.374166, a = [0.5345, 0, 1.0690, 1.6036] -> levels [0, 0, 1, 2]
//	n1 = sqrt(0.04+0.01+0.01+0.01) = 0.264575, a = [1.5119, 0.7559, 0.7559, 0.7559] -> levels [2, 1, 1, 1]
//	Q = [0, 0, 0.1871, -0.3742 | -0.2646, 0.1323, 0.1323, 0.1323]
//	codes [0, 0, 2, 5, 5, 2, 2, 2] -> bytes [128, 90, 73]
//
// Mean: [0.1936, 0, 0.1904, -0.1871, -0.3573, 0.1786, 0.0661, 0.0661].
func TestQSGDHandWorked(t *testing.T) {
	tensors := baselineTensors([]int{2, 4})
	cfg := qsgdConfig(2, 4, "l2")
	w := []*sender{baselineBuild(t, "qsgd", cfg, tensors, 0, 2), baselineBuild(t, "qsgd", cfg, tensors, 1, 2)}
	steps := []struct {
		g, u      [2][]float64
		scales    [2][2]float32
		codes     [2][]byte
		q0, q1, m []float32
	}{{
		g:      [2][]float64{{0.4, -0.2, 0.1, 0, -0.6, 0.3, 0.05, -0.1}, {0.2, -0.1, 0.3, -0.4, -0.5, 0.1, 0, 0.2}},
		u:      [2][]float64{{0.30, 0.90, 0.10, 0.50, 0.70, 0.20, 0.60, 0.40}, {0.80, 0.15, 0.55, 0.05, 0.35, 0.95, 0.25, 0.65}},
		scales: [2][2]float32{{0.458258, 0.680074}, {0.547723, 0.547723}},
		codes:  [2][]byte{{132, 80, 1}, {152, 90, 64}},
		q0:     []float32{0.4583, 0, 0.2291, 0, -0.6801, 0.3400, 0, 0},
		q1:     []float32{0, -0.2739, 0.2739, -0.5477, -0.5477, 0, 0, 0.2739},
		m:      []float32{0.2291, -0.1369, 0.2515, -0.2739, -0.6139, 0.1700, 0, 0.1369},
	}, {
		g:      [2][]float64{{0.3, -0.1, 0.2, 0.1, -0.4, 0.2, -0.05, 0}, {0.1, 0, 0.2, -0.3, -0.2, 0.1, 0.1, 0.1}},
		u:      [2][]float64{{0.25, 0.75, 0.45, 0.65, 0.15, 0.85, 0.35, 0.55}, {0.60, 0.40, 0.90, 0.10, 0.50, 0.30, 0.70, 0.20}},
		scales: [2][2]float32{{0.387298, 0.45}, {0.374166, 0.264575}},
		codes:  [2][]byte{{132, 80, 1}, {128, 90, 73}},
		q0:     []float32{0.3873, 0, 0.1936, 0, -0.45, 0.225, 0, 0},
		q1:     []float32{0, 0, 0.1871, -0.3742, -0.2646, 0.1323, 0.1323, 0.1323},
		m:      []float32{0.1936, 0, 0.1904, -0.1871, -0.3573, 0.1786, 0.0661, 0.0661},
	}}
	for step, s := range steps {
		info := StepInfo{Step: step, Workers: 2}
		var ps [2]Payload
		for i := range w {
			if w[i].Feedback() != nil {
				t.Fatal("qsgd keeps a residual; the paper has no error feedback")
			}
			qsgdFixedDraws(t, w[i], s.u[i]...)
			g := make([]float32, 8)
			for j, v := range s.g[i] {
				g[j] = float32(v)
			}
			p, err := w[i].Compress(0, g, Combined{}, info)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Bytes) != 11 || p.Wire != 11 || !slices.Equal(p.TensorWire, []int64{11}) {
				t.Fatalf("step %d worker %d: %d bytes, wire %d, per tensor %v; want 11", step, i, len(p.Bytes), p.Wire, p.TensorWire)
			}
			for b := range 2 {
				got := math.Float32frombits(binary.LittleEndian.Uint32(p.Bytes[4*b:]))
				if math.Abs(float64(got-s.scales[i][b])) > 1e-6 {
					t.Fatalf("step %d worker %d: scale %d = %v, want %v", step, i, b, got, s.scales[i][b])
				}
			}
			if !bytes.Equal(p.Bytes[8:], s.codes[i]) {
				t.Fatalf("step %d worker %d: codes %v, want %v", step, i, p.Bytes[8:], s.codes[i])
			}
			one := make([]float32, 8)
			if err := unwrapFeedback(w[i]).DecodeAdd(p, one, info); err != nil {
				t.Fatal(err)
			}
			baselineClose(t, "decoded", one, [][]float32{s.q0, s.q1}[i], 5e-5)
			ps[i] = p
		}
		mean := make([]float32, 8)
		if err := w[0].Decompress(Combined{Bytes: [][]byte{ps[0].Bytes, ps[1].Bytes}, Workers: 2}, mean, info); err != nil {
			t.Fatal(err)
		}
		baselineClose(t, "mean", mean, s.m, 5e-5)
	}
}

// The draws come from a PCG stream per (seed, worker, step, tensor): the test
// rebuilds each stream and derives the levels itself, with the max norm and
// s = 5 on two tensors, the second with a short last bucket (7 = 3 + 3 + 1).
func TestQSGDSeededDraws(t *testing.T) {
	tensors := baselineTensors([]int{2, 4}, []int{7})
	cfg := qsgdConfig(5, 3, "max")
	g := []float32{0.4, -0.2, 0.1, 0, -0.6, 0.3, 0.05, -0.1, 1, -2, 3, 0.5, -0.25, 0.125, -7}
	const seed = 7 // baselineBuild's
	payload := func(worker, step int) []byte {
		c, err := Registry["qsgd"](cfg, tensors, worker, 2, seed, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Encode(0, slices.Clone(g), Combined{}, StepInfo{Step: step, Worker: worker, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		return p.Bytes
	}
	for _, tc := range []struct{ worker, step int }{{0, 0}, {1, 0}, {0, 3}, {1, 3}} {
		var want Encoder
		for ti, tn := range tensors {
			rng := rand.New(rand.NewPCG(dgcMix(seed, uint64(tc.worker)), dgcMix(uint64(tc.step), uint64(ti))))
			v := g[tn.Offset : tn.Offset+tn.Size]
			var scales []float32
			codes := make([]byte, (tn.Size*4+7)/8) // 1 sign + 3 level bits: two elements a byte
			for b := 0; b < len(v); b += 3 {
				n := float32(0)
				for _, x := range v[b:min(b+3, len(v))] {
					n = max(n, float32(math.Abs(float64(x))))
				}
				scales = append(scales, n)
				for j, x := range v[b:min(b+3, len(v))] {
					a := 5 * math.Abs(float64(x)) / float64(n)
					z := math.Floor(a)
					if rng.Float64() < a-z {
						z++
					}
					code := byte(z) << 1
					if x < 0 && z > 0 {
						code |= 1
					}
					codes[(b+j)/2] |= code << (4 * ((b + j) % 2))
				}
			}
			want.Float32s(scales)
			want.Raw(codes)
		}
		got := payload(tc.worker, tc.step)
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("worker %d step %d: payload\n %v\nwant\n %v", tc.worker, tc.step, got, want.Bytes())
		}
		if again := payload(tc.worker, tc.step); !bytes.Equal(again, got) {
			t.Fatalf("worker %d step %d: a rebuilt compressor sent %v, then %v", tc.worker, tc.step, got, again)
		}
	}
	if bytes.Equal(payload(0, 0), payload(1, 0)) || bytes.Equal(payload(0, 0), payload(0, 1)) {
		t.Fatal("two workers or two steps drew the same rounding")
	}
}

// QSGD is unbiased (Lemma 3.1): over 20,000 steps (fresh draws each), the mean
// decoded vector is within 5 standard errors of v, per coordinate, with
// Var_i = (n/s)^2 p_i (1 - p_i). Round-to-nearest misses by up to n/(2s) =
// 0.11 (2-norm) or 0.1 (max-norm) on this vector, against standard errors
// under 0.001. The sample variance must also match Var_i within 10%.
func TestQSGDUnbiased(t *testing.T) {
	g := []float32{0.4, -0.2, 0.1, 0, -0.6, 0.3, 0.05, -0.1}
	const draws = 20000
	for _, norm := range []string{"l2", "max"} {
		c, err := Registry["qsgd"](qsgdConfig(2, 4, norm), baselineTensors([]int{2, 4}), 1, 2, 11, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		sum, sq, one := make([]float64, 8), make([]float64, 8), make([]float32, 8)
		for step := range draws {
			info := StepInfo{Step: step, Worker: 1, Workers: 2}
			p, err := c.Encode(0, slices.Clone(g), Combined{}, info)
			if err != nil {
				t.Fatal(err)
			}
			clear(one)
			if err := c.DecodeAdd(p, one, info); err != nil {
				t.Fatal(err)
			}
			for i, v := range one {
				sum[i] += float64(v)
				sq[i] += float64(v) * float64(v)
			}
		}
		for i, v := range g {
			bucket := g[i/4*4 : i/4*4+4]
			var n float64
			for _, x := range bucket {
				if norm == "l2" {
					n += float64(x) * float64(x)
				} else {
					n = max(n, math.Abs(float64(x)))
				}
			}
			if norm == "l2" {
				n = math.Sqrt(n)
			}
			a := 2 * math.Abs(float64(v)) / n
			p := a - math.Floor(a)
			variance := (n / 2) * (n / 2) * p * (1 - p)
			mean := sum[i] / draws
			if tol := 5*math.Sqrt(variance/draws) + 1e-6; math.Abs(mean-float64(v)) > tol {
				t.Errorf("%s: coordinate %d: mean of %d draws %v, want %v within %v: biased rounding", norm, i, draws, mean, v, tol)
			}
			sampleVar := sq[i]/draws - mean*mean
			if math.Abs(sampleVar-variance) > 0.1*variance+1e-9 {
				t.Errorf("%s: coordinate %d: variance %v, want (n/s)^2 p(1-p) = %v", norm, i, sampleVar, variance)
			}
		}
	}
}

// The payload is 4 bytes a bucket plus 1+ceil(log2(s+1)) bits an element,
// rounded up to whole bytes per tensor, and Wire counts exactly that.
func TestQSGDBytes(t *testing.T) {
	tensors := baselineTensors([]int{3, 5}, []int{8, 8}, []int{1000})
	for _, tc := range []struct {
		levels, bucket int
		want           []int64
	}{
		// s = 1: 2 bits. 15 elements, bucket 4: 4 scales + ceil(30/8) = 16 + 4.
		{1, 4, []int64{16 + 4, 16*4 + 16, 250*4 + 250}},
		// s = 7 (default): 4 bits, bucket 512: 1 scale each.
		{7, 512, []int64{4 + 8, 4 + 32, 2*4 + 500}},
		// s = 127: 8 bits, bucket 128.
		{127, 128, []int64{4 + 15, 4 + 64, 8*4 + 1000}},
		// s = 8: 5 bits (levels 0..8 need 4), bucket 1000 = the whole last tensor.
		{8, 1000, []int64{4 + 10, 4 + 40, 4 + 625}},
	} {
		c, err := Registry["qsgd"](qsgdConfig(tc.levels, tc.bucket, "max"), tensors, 0, 2, 3, Hyper{})
		if err != nil {
			t.Fatal(err)
		}
		g := make([]float32, packedSize(tensors))
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		p, err := c.Encode(0, g, Combined{}, StepInfo{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, w := range tc.want {
			total += w
		}
		if !slices.Equal(p.TensorWire, tc.want) || p.Wire != total || int64(len(p.Bytes)) != total {
			t.Fatalf("s=%d bucket %d: %d bytes, wire %d, per tensor %v; want %v (sum %d)", tc.levels, tc.bucket, len(p.Bytes), p.Wire, p.TensorWire, tc.want, total)
		}
	}
}

func TestQSGDRejects(t *testing.T) {
	tensors := baselineTensors([]int{2, 4})
	for _, tc := range []struct {
		cfg  QSGDConfig
		want string
	}{
		{QSGDConfig{Levels: 0, BucketSize: 4, Norm: "max"}, "compress.qsgd.levels: 0"},
		{QSGDConfig{Levels: 1 << 16, BucketSize: 4, Norm: "max"}, "compress.qsgd.levels: 65536"},
		{QSGDConfig{Levels: 2, BucketSize: 0, Norm: "max"}, "compress.qsgd.bucket_size: 0"},
		{QSGDConfig{Levels: 2, BucketSize: 4, Norm: "l1"}, `compress.qsgd.norm: "l1"`},
	} {
		cfg := DefaultConfig()
		cfg.Name, cfg.QSGD = "qsgd", tc.cfg
		if _, err := newQSGD(cfg, tensors, 0, 1, 0, Hyper{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.want)
		}
		if ps := cfg.Problems(); len(ps) != 1 || !strings.Contains(ps[0].Error(), tc.want) {
			t.Errorf("%+v: Problems %v, want one naming %s", tc.cfg, ps, tc.want)
		}
	}
	c, err := newQSGD(qsgdConfig(2, 4, "max"), tensors, 0, 1, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	g := []float32{0.4, -0.2, 0.1, 0, -0.6, 0.3, 0.05, -0.1}
	p, err := c.Encode(0, slices.Clone(g), Combined{}, StepInfo{})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 8)
	for name, b := range map[string][]byte{"short": p.Bytes[:10], "long": append(slices.Clone(p.Bytes), 0)} {
		if err := c.DecodeAdd(Payload{Bytes: b}, dst, StepInfo{}); err == nil {
			t.Errorf("%s payload accepted", name)
		}
	}
	// Code 7 = level 3 with the sign set, above s = 2.
	bad := slices.Clone(p.Bytes)
	bad[8] |= 7
	if err := c.DecodeAdd(Payload{Bytes: bad}, dst, StepInfo{}); err == nil || !strings.Contains(err.Error(), "level 3") {
		t.Errorf("a level above s: error %v", err)
	}
	g[5] = float32(math.NaN())
	if _, err := c.Encode(0, g, Combined{}, StepInfo{}); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Errorf("NaN gradient: error %v", err)
	}
}

// TestBitsRoundTrip: putBits and getBits at every width from 1 to 33 bits,
// packed end to end from every starting offset in a byte, read back what was
// written, whether a field fits within one byte or straddles several, and
// leave the other bits alone.
func TestBitsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for n := uint(1); n <= 33; n++ {
		for start := range 8 {
			vals := make([]uint64, 50)
			b := make([]byte, (start+len(vals)*int(n))/8+2)
			for i := range vals {
				vals[i] = rng.Uint64() & (1<<n - 1)
				putBits(b, start+i*int(n), n, vals[i]|^(1<<n-1)) // bits above n must be ignored
			}
			for i, want := range vals {
				if got := getBits(b, start+i*int(n), n); got != want {
					t.Fatalf("width %d from bit %d: field %d reads %#x, wrote %#x", n, start, i, got, want)
				}
			}
			if got := getBits(b, 0, uint(start)); start > 0 && got != 0 {
				t.Fatalf("width %d from bit %d: the bits before were changed: %#x", n, start, got)
			}
		}
	}
}
