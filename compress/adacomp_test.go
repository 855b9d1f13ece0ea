package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/optim"
)

// adaCompTensors packs one tensor of the given size per kind.
func adaCompTensors(size int, kinds ...optim.Kind) []Tensor {
	ts := make([]Tensor, len(kinds))
	for i, k := range kinds {
		ts[i] = Tensor{Name: fmt.Sprintf("t%d.%s", i, k), Shape: []int{2, size / 2}, Kind: k,
			Offset: i * size, FlatOffset: i * size, Size: size}
	}
	return ts
}

// newAdaCompTest builds worker 0 of 1 with bin lengths conv/fc and residues r
// (one slice per tensor; nil leaves them zero).
func newAdaCompTest(t *testing.T, tensors []Tensor, conv, fc int, fp32 bool, r ...[]float32) *adaComp {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AdaComp = AdaCompConfig{BinConv: conv, BinFC: fc, FP32Values: fp32}
	c, err := newAdaComp(cfg, tensors, 0, 1, 0, Hyper{})
	if err != nil {
		t.Fatal(err)
	}
	ac := c.(*adaComp)
	if len(r) > 0 {
		st := map[string][]float32{}
		for i, tt := range tensors {
			st["residual/"+tt.Name] = r[i]
		}
		if err := ac.SetState(st); err != nil {
			t.Fatal(err)
		}
	}
	return ac
}

func adaCompClose(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-float64(want[i])) > 1e-6 {
			t.Fatalf("%s[%d] = %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// adaCompRoundTrip compresses g, checks the payload's accounting and returns
// it with the one-worker decompression.
func adaCompRoundTrip(t *testing.T, c *adaComp, g []float32) (Payload, []float32) {
	t.Helper()
	p, err := c.Encode(0, g, Combined{}, StepInfo{})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, w := range p.TensorWire {
		sum += w
	}
	if p.Wire != int64(len(p.Bytes)) || sum != p.Wire || len(p.TensorWire) != len(c.tensors) {
		t.Fatalf("wire %d, %d bytes, per tensor %v", p.Wire, len(p.Bytes), p.TensorWire)
	}
	out := make([]float32, len(g))
	if err := decodeMean(c, Combined{Bytes: [][]byte{p.Bytes}, Workers: 1}, out, StepInfo{}); err != nil {
		t.Fatal(err)
	}
	return p, out
}

// adaCompExample is a two-bin tensor (L_T = 4) with known residue R and
// gradient g:
//
//	        bin 0                      | bin 1
//	R   = [1.5, 2.75, 0.25, 0       | -4,  0.5,  0,   1   ]
//	g   = [0.5, -2.5, -0.5, 1.75    |  1,  0.25, 0.5, -0.5]
//	G   = [2,   0.25, -0.25, 1.75   | -3,  0.75, 0.5, 0.5 ]   R + g
//	H   = [2.5, -2.25, -0.75, 3.5   | -2,  1,    1,   0   ]   G + g
//	gmax: 2                           3
//
// Bin 0 sends 0 (|H| 2.5), 1 (2.25: the fresh gradient flips H's sign, the
// value keeps G's sign, +) and 3 (3.5: |G| = 1.75 is below gmax, the latest
// gradient pushes it over); 2 stays (0.75). In bin 1 no |H| reaches 3 (the
// maximum's gradient opposes its residue: |H_4| = 2), so the element attaining
// gmax, 4, is sent. scale = (2 + 3)/2 = 2.5.
var (
	adaCompR = []float32{1.5, 2.75, 0.25, 0, -4, 0.5, 0, 1}
	adaCompG = []float32{0.5, -2.5, -0.5, 1.75, 1, 0.25, 0.5, -0.5}
)

func TestAdaCompSelection(t *testing.T) {
	c := newAdaCompTest(t, adaCompTensors(8, optim.KindLinear), 99, 4, false, append([]float32(nil), adaCompR...))
	p, out := adaCompRoundTrip(t, c, append([]float32(nil), adaCompG...))
	// sent = sign(G) * 2.5 at 0, 1, 3, 4; R = G - sent.
	sent := []float32{2.5, 2.5, 0, 2.5, -2.5, 0, 0, 0}
	adaCompClose(t, "compensated", c.Compensated(), []float32{2, 0.25, -0.25, 1.75, -3, 0.75, 0.5, 0.5})
	adaCompClose(t, "sent", c.Sent(), sent)
	adaCompClose(t, "residual", c.Residual(), []float32{-0.5, -2.25, -0.25, -0.75, -0.5, 0.75, 0.5, 0.5})
	adaCompClose(t, "decompressed", out, sent)
	// count 4; the index stream, L_T 4 so 2 offset bits, per element the bin
	// step + 1 in gamma code, the offset and the sign, bits in write order:
	//   0: same bin (bin 0)  "1", offset 0 "00", +  "0"
	//   1: same bin          "1", offset 1 "10", +  "0"
	//   3: same bin          "1", offset 3 "11", +  "0"
	//   4: next bin, gamma 2 "010", offset 0 "00", - "1"
	// 18 bits; bytes (bit 0 first): 1000 1100 = 0x31, 1110 0100 = 0x27,
	// 01 = 0x02; so byte length 3, then scale 2.5: 4 + 4 + 3 + 4 = 15 bytes.
	var want bytes.Buffer
	for _, v := range []uint32{4, 3} {
		want.Write(binary.LittleEndian.AppendUint32(nil, v))
	}
	want.Write([]byte{0x31, 0x27, 0x02})
	want.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5)))
	if !bytes.Equal(p.Bytes, want.Bytes()) {
		t.Fatalf("payload % x, want % x", p.Bytes, want.Bytes())
	}
}

func TestAdaCompFP32Values(t *testing.T) {
	// The example's selection (0, 1, 3, 4) sending G itself: 2, 0.25, 1.75, -3;
	// their residue is zero, the rest keep G.
	c := newAdaCompTest(t, adaCompTensors(8, optim.KindLinear), 99, 4, true, append([]float32(nil), adaCompR...))
	p, out := adaCompRoundTrip(t, c, append([]float32(nil), adaCompG...))
	sent := []float32{2, 0.25, 0, 1.75, -3, 0, 0, 0}
	adaCompClose(t, "sent", c.Sent(), sent)
	adaCompClose(t, "residual", c.Residual(), []float32{0, 0, -0.25, 0, 0, 0.75, 0.5, 0.5})
	adaCompClose(t, "decompressed", out, sent)
	// The index stream without sign bits: 3 + 3 + 3 + 5 = 14 bits, 2 bytes.
	if p.Wire != 4+4+2+4*4 {
		t.Fatalf("wire %d, want count + stream length + 2 stream bytes + 4 values = 26", p.Wire)
	}
}

func TestAdaCompMeanOverWorkers(t *testing.T) {
	tensors := adaCompTensors(8, optim.KindLinear)
	c0 := newAdaCompTest(t, tensors, 99, 4, false, append([]float32(nil), adaCompR...))
	p0, err := c0.Encode(0, append([]float32(nil), adaCompG...), Combined{}, StepInfo{})
	if err != nil {
		t.Fatal(err)
	}
	// Worker 1, R = 0: G = g, H = 2g. Bin 0: gmax 1, only |H_0| = 2 passes;
	// bin 1: gmax 1, only |H_7| = 2. scale 1: sent [1 0 0 0 | 0 0 0 -1].
	c1 := newAdaCompTest(t, tensors, 99, 4, false)
	p1, err := c1.Encode(0, []float32{1, 0, 0, 0, 0, 0, 0, -1}, Combined{}, StepInfo{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 8)
	for _, c := range []*adaComp{c0, c1} {
		if err := decodeMean(c, Combined{Bytes: [][]byte{p0.Bytes, p1.Bytes}, Workers: 2}, out, StepInfo{}); err != nil {
			t.Fatal(err)
		}
		// (worker 0's [2.5 2.5 0 2.5 | -2.5 0 0 0] + worker 1's) / 2
		adaCompClose(t, "mean", out, []float32{1.75, 1.25, 0, 1.25, -1.25, 0, 0, -0.5})
	}
}

func TestAdaCompBinLengthByKind(t *testing.T) {
	// bin_conv 2, bin_fc 4; every tensor gets g = [4 1 1 1 1 1 1 1] with R = 0,
	// so G = g and H = 2g.
	//   conv (L 2): bins [4 1] [1 1] [1 1] [1 1], gmax 4 1 1 1. The first bin
	//     sends only 0 (|H_1| = 2 < 4), the others everything: 7 values,
	//     scale (4+1+1+1)/4 = 1.75. Stream: bin steps 0 1 0 1 0 1 0 (gamma
	//     1+3+1+3+1+3+1 = 13 bits), 7 one-bit offsets, 7 signs: 27 bits, 4
	//     bytes; wire 4 + 4 + 4 + 4 = 16.
	//   linear, lstm, embed (L 4): bins [4 1 1 1] [1 1 1 1], gmax 4 1: 0 and
	//     4..7, 5 values, scale 2.5. Stream: steps 0 1 0 0 0 (1+3+1+1+1 = 7
	//     bits), 5 two-bit offsets, 5 signs: 22 bits, 3 bytes; wire 4 + 4 + 3
	//     + 4 = 15.
	c := newAdaCompTest(t, adaCompTensors(8, optim.KindConv, optim.KindLinear, optim.KindLSTM, optim.KindEmbed), 2, 4, false)
	g := make([]float32, 32)
	for i := range g {
		g[i] = 1
		if i%8 == 0 {
			g[i] = 4
		}
	}
	p, out := adaCompRoundTrip(t, c, g)
	fc := []float32{2.5, 0, 0, 0, 2.5, 2.5, 2.5, 2.5}
	want := append([]float32{1.75, 0, 1.75, 1.75, 1.75, 1.75, 1.75, 1.75}, fc...)
	want = append(append(want, fc...), fc...)
	adaCompClose(t, "decompressed", out, want)
	for i, w := range []int64{16, 15, 15, 15} {
		if p.TensorWire[i] != w {
			t.Fatalf("tensor wire %v, want [16 15 15 15]", p.TensorWire)
		}
	}
}

func TestAdaCompZeroBinSendsNothing(t *testing.T) {
	// Tensor a, L_T 4: R = [0 0 0 0 | 0 0 0 -3], g = [0 0 0 0 | 1 -2 0.5 3].
	//   Bin 0: G = 0, gmax 0: nothing (the bare rule |H| >= 0 would send all 4).
	//   Bin 1: G = [1 -2 0.5 0], gmax 2, H = [2 -4 1 3]: 4 and 5 pass; 7 passes
	//   too but G_7 = 0 has nothing to send. scale = (0 + 2)/2 = 1.
	//   sent [0 0 0 0 | 1 -1 0 0], R [0 0 0 0 | 0 -1 0.5 0]. Stream: 4 is a
	//   bin step of 1 (gamma "010"), offset 0, sign; 5 the same bin ("1"),
	//   offset 1, sign: 6 + 4 = 10 bits, 2 bytes; wire 4 + 4 + 2 + 4 = 14.
	// Tensor b: all zero, only its count: 4 bytes.
	tensors := adaCompTensors(8, optim.KindLinear, optim.KindLinear)
	c := newAdaCompTest(t, tensors, 99, 4, false, []float32{0, 0, 0, 0, 0, 0, 0, -3}, make([]float32, 8))
	g := append([]float32{0, 0, 0, 0, 1, -2, 0.5, 3}, make([]float32, 8)...)
	p, out := adaCompRoundTrip(t, c, g)
	sent := append([]float32{0, 0, 0, 0, 1, -1, 0, 0}, make([]float32, 8)...)
	adaCompClose(t, "sent", c.Sent(), sent)
	adaCompClose(t, "decompressed", out, sent)
	adaCompClose(t, "residual", c.Residual(), append([]float32{0, 0, 0, 0, 0, -1, 0.5, 0}, make([]float32, 8)...))
	if p.TensorWire[0] != 14 || p.TensorWire[1] != 4 {
		t.Fatalf("tensor wire %v, want [14 4]", p.TensorWire)
	}
}

func TestAdaCompBadPayload(t *testing.T) {
	for _, fp32 := range []bool{false, true} {
		tensors := adaCompTensors(8, optim.KindLinear, optim.KindLinear)
		c := newAdaCompTest(t, tensors, 99, 4, fp32, append([]float32(nil), adaCompR...), make([]float32, 8))
		g := append(append([]float32(nil), adaCompG...), adaCompG...)
		p, _ := adaCompRoundTrip(t, c, g)
		good := append([]byte(nil), p.Bytes...)
		out := make([]float32, 16)
		decode := func(b ...[]byte) error {
			return decodeMean(c, Combined{Bytes: b, Workers: len(b)}, out, StepInfo{})
		}
		for n := range len(good) {
			if err := decode(good[:n]); err == nil {
				t.Fatalf("fp32 %v: payload cut to %d of %d bytes accepted", fp32, n, len(good))
			}
		}
		if err := decode(append(append([]byte(nil), good...), 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
			t.Fatalf("trailing byte: %v", err)
		}
		// Tensor 0's stream starts at byte 8: 0b100 is gamma 4, a step of 3
		// bins from bin 0, past its 2 bins.
		bad := append([]byte(nil), good...)
		bad[8] = 0b100
		if err := decode(bad); err == nil || !strings.Contains(err.Error(), "bin 3 of 2") {
			t.Fatalf("bin 3 of 2: %v", err)
		}
		// A stream length beyond what 4 elements can need ((4·(66+2)+7)/8 = 34 bytes).
		bad = append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(bad[4:], 35)
		if err := decode(bad); err == nil || !strings.Contains(err.Error(), "index stream of 35 bytes") {
			t.Fatalf("stream of 35 bytes: %v", err)
		}
		// A set bit in the padding after the last element (bit 7 of the last
		// stream byte: the ternary stream has 18 bits, the fp32 one 14).
		bad = append([]byte(nil), good...)
		bad[8+int(binary.LittleEndian.Uint32(good[4:]))-1] |= 0x80
		if err := decode(bad); err == nil || !strings.Contains(err.Error(), "bits after") {
			t.Fatalf("padding bit set: %v", err)
		}
		bad = append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(bad, 9) // count
		if err := decode(bad); err == nil {
			t.Fatal("9 values for 8 elements accepted")
		}
		if err := decodeMean(c, Combined{Bytes: [][]byte{good}, Workers: 2}, out, StepInfo{}); err == nil {
			t.Fatal("one payload for two workers accepted")
		}
		if err := decode(good, good); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdaCompConfig(t *testing.T) {
	for _, tc := range []struct {
		conv, fc int
		key      string
	}{{0, 500, "compress.adacomp.bin_conv"}, {50, 0, "compress.adacomp.bin_fc"}, {-1, 500, "compress.adacomp.bin_conv"}} {
		cfg := DefaultConfig()
		cfg.AdaComp.BinConv, cfg.AdaComp.BinFC = tc.conv, tc.fc
		if _, err := newAdaComp(cfg, adaCompTensors(8, optim.KindConv), 0, 1, 0, Hyper{}); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("bins %d/%d: %v, want an error naming %s", tc.conv, tc.fc, err, tc.key)
		}
	}
}

func TestAdaCompStateResume(t *testing.T) {
	tensors := adaCompTensors(1000, optim.KindConv, optim.KindLinear)
	rng := rand.New(rand.NewPCG(1, 2))
	grads := make([][]float32, 4)
	for s := range grads {
		grads[s] = make([]float32, 2000)
		for i := range grads[s] {
			grads[s][i] = float32(rng.NormFloat64())
		}
	}
	a := newAdaCompTest(t, tensors, 50, 500, false)
	for _, g := range grads[:2] {
		if _, err := a.Encode(0, append([]float32(nil), g...), Combined{}, StepInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	b := newAdaCompTest(t, tensors, 50, 500, false)
	if err := b.SetState(a.State()); err != nil {
		t.Fatal(err)
	}
	for _, g := range grads[2:] {
		pa, _ := adaCompRoundTrip(t, a, append([]float32(nil), g...))
		pb, _ := adaCompRoundTrip(t, b, append([]float32(nil), g...))
		if !bytes.Equal(pa.Bytes, pb.Bytes) {
			t.Fatal("resumed compressor sends different bytes")
		}
	}
	st := a.State()
	st["residual/other"] = st["residual/t0.conv"]
	delete(st, "residual/t0.conv")
	if err := b.SetState(st); err == nil {
		t.Fatal("SetState accepted an unknown buffer name")
	}
}

// BenchmarkAdaComp measures compress + decompress on one worker for one tensor
// of n elements with the default bin lengths (conv 50, linear 500). The same
// Gaussian gradient every step is a pessimistic load: its residue drifts, and
// about a fifth of the elements go out (compression about 4x to 5x), so the
// selection and scatter work is far above a real run's. A few untimed steps
// first let the payload buffers reach their size, so allocations are the
// steady state's.
func BenchmarkAdaComp(b *testing.B) {
	for _, kind := range []optim.Kind{optim.KindConv, optim.KindLinear} {
		for _, n := range []int{1 << 20, 10 << 20} {
			b.Run(fmt.Sprintf("%s/n=%dM", kind, n>>20), func(b *testing.B) {
				c, err := newAdaComp(DefaultConfig(), adaCompTensors(n, kind), 0, 1, 0, Hyper{})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(3, 4))
				g := make([]float32, n)
				for i := range g {
					g[i] = float32(rng.NormFloat64())
				}
				out := make([]float32, n)
				all := make([][]byte, 1) // the combined round, reused
				s := newSender("adacomp", c, len(out))
				step := func() {
					p, err := c.Encode(0, g, Combined{}, StepInfo{})
					if err != nil {
						b.Fatal(err)
					}
					all[0] = p.Bytes
					if err := s.Decompress(Combined{Bytes: all, Workers: 1}, out, StepInfo{}); err != nil {
						b.Fatal(err)
					}
				}
				for range 4 {
					step()
				}
				b.ReportAllocs()
				for b.Loop() {
					step()
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
			})
		}
	}
}

// TestAdaCompStreamRoundTrip: random gradients over bin lengths 1 (no offset
// bits), 3, 50 and 500 on sizes that leave a partial last bin and on a tensor
// with sparse activity (long bin steps): the decoded payload equals what the
// encoder says it sent, in both value modes, over several steps.
func TestAdaCompStreamRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bin := range []int{1, 3, 50, 500} {
		for _, fp32 := range []bool{false, true} {
			tensors := adaCompTensors(1237, optim.KindConv, optim.KindLinear)
			c := newAdaCompTest(t, tensors, bin, bin, fp32)
			for step := range 4 {
				g := make([]float32, 2*1237)
				for i := range g {
					if i < 1237 || rng.IntN(200) == 0 { // the second tensor: sparse
						g[i] = float32(rng.NormFloat64())
					}
				}
				_, out := adaCompRoundTrip(t, c, g)
				for i, v := range c.Sent() {
					if out[i] != v {
						t.Fatalf("bin %d fp32 %v step %d: element %d decoded %v, sent %v", bin, fp32, step, i, out[i], v)
					}
				}
			}
		}
	}
}
