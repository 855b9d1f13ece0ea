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
	// count 4, indices 0 1 3 4, one sign byte (only the 4th value, -, sets a
	// bit: 0b1000), scale 2.5: 4 + 16 + 1 + 4 = 25 bytes.
	var want bytes.Buffer
	for _, v := range []uint32{4, 0, 1, 3, 4} {
		want.Write(binary.LittleEndian.AppendUint32(nil, v))
	}
	want.WriteByte(0x08)
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
	if p.Wire != 4+4*4+4*4 {
		t.Fatalf("wire %d, want count + 4 indices + 4 values = 36", p.Wire)
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
	//     scale (4+1+1+1)/4 = 1.75; wire 4 + 7*4 + 1 + 4 = 37.
	//   linear, lstm, embed (L 4): bins [4 1 1 1] [1 1 1 1], gmax 4 1: 0 and
	//     4..7, 5 values, scale 2.5; wire 4 + 5*4 + 1 + 4 = 29.
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
	for i, w := range []int64{37, 29, 29, 29} {
		if p.TensorWire[i] != w {
			t.Fatalf("tensor wire %v, want [37 29 29 29]", p.TensorWire)
		}
	}
}

func TestAdaCompZeroBinSendsNothing(t *testing.T) {
	// Tensor a, L_T 4: R = [0 0 0 0 | 0 0 0 -3], g = [0 0 0 0 | 1 -2 0.5 3].
	//   Bin 0: G = 0, gmax 0: nothing (the bare rule |H| >= 0 would send all 4).
	//   Bin 1: G = [1 -2 0.5 0], gmax 2, H = [2 -4 1 3]: 4 and 5 pass; 7 passes
	//   too but G_7 = 0 has nothing to send. scale = (0 + 2)/2 = 1.
	//   sent [0 0 0 0 | 1 -1 0 0], R [0 0 0 0 | 0 -1 0.5 0], wire 4+8+1+4 = 17.
	// Tensor b: all zero, only its count: 4 bytes.
	tensors := adaCompTensors(8, optim.KindLinear, optim.KindLinear)
	c := newAdaCompTest(t, tensors, 99, 4, false, []float32{0, 0, 0, 0, 0, 0, 0, -3}, make([]float32, 8))
	g := append([]float32{0, 0, 0, 0, 1, -2, 0.5, 3}, make([]float32, 8)...)
	p, out := adaCompRoundTrip(t, c, g)
	sent := append([]float32{0, 0, 0, 0, 1, -1, 0, 0}, make([]float32, 8)...)
	adaCompClose(t, "sent", c.Sent(), sent)
	adaCompClose(t, "decompressed", out, sent)
	adaCompClose(t, "residual", c.Residual(), append([]float32{0, 0, 0, 0, 0, -1, 0.5, 0}, make([]float32, 8)...))
	if p.TensorWire[0] != 17 || p.TensorWire[1] != 4 {
		t.Fatalf("tensor wire %v, want [17 4]", p.TensorWire)
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
		bad := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(bad[4:], 8) // first index of tensor 0
		if err := decode(bad); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("index 8 of 8: %v", err)
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
