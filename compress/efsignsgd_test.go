package compress

import (
	"encoding/binary"
	"math"
	"testing"
)

// One 2x3 tensor, g = [1, -2, 0, 3, -4, -1]: ||g||_1 = 11, d = 6, so the
// scale is 11/6 and the signs + - + + - - (zero counts as positive).
func TestEFSignSGDHandWorked(t *testing.T) {
	c := baselineBuild(t, "efsignsgd", DefaultConfig(), baselineTensors([]int{2, 3}), 0, 1)
	s := float32(11.0 / 6)
	p, dst := baselineGather(t, c, []float32{1, -2, 0, 3, -4, -1}, 0)
	// Bits 1, 4 and 5 (the negative elements): 2 + 16 + 32 = 50.
	if len(p.Bytes) != 5 || p.Bytes[0] != 50 || math.Float32frombits(binary.LittleEndian.Uint32(p.Bytes[1:])) != s || p.Wire != 5 {
		t.Fatalf("payload %v (wire %d), want [50, float32(11/6)] in 5 bytes", p.Bytes, p.Wire)
	}
	baselineClose(t, "decoded", dst, []float32{s, -s, s, s, -s, -s}, 0)
	ef := c.Feedback()
	baselineClose(t, "residual", ef.Residual(), []float32{1 - s, -2 + s, -s, 3 - s, -4 + s, -1 + s}, 0)
	// A zero gradient sends the residual: its L1 norm is 7 (to float32
	// rounding), so the scale is 7/6 and the signs - - - + - +.
	_, dst = baselineGather(t, c, make([]float32, 6), 1)
	s2 := float32(7.0 / 6)
	baselineClose(t, "step 2 decoded", dst, []float32{-s2, -s2, -s2, s2, -s2, s2}, 1e-6)
	baselineClose(t, "step 2 residual", ef.Residual(), []float32{1.0 / 3, 1, -2.0 / 3, 0, -1, -1.0 / 3}, 1e-6)
}

// Opposite gradients on two workers cancel except where a zero was sent as +s.
func TestEFSignSGDTwoWorkers(t *testing.T) {
	tensors := baselineTensors([]int{2, 3})
	w0 := baselineBuild(t, "efsignsgd", DefaultConfig(), tensors, 0, 2)
	w1 := baselineBuild(t, "efsignsgd", DefaultConfig(), tensors, 1, 2)
	p0, err := w0.Compress(0, []float32{1, -2, 0, 3, -4, -1}, Combined{}, StepInfo{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := w1.Compress(0, []float32{-1, 2, 0, -3, 4, 1}, Combined{}, StepInfo{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 6)
	if err := w0.Decompress(Combined{Bytes: [][]byte{p0.Bytes, p1.Bytes}, Workers: 2}, dst, StepInfo{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	baselineClose(t, "mean", dst, []float32{0, 0, 11.0 / 6, 0, 0, 0}, 0)
	if err := w0.Decompress(Combined{Bytes: [][]byte{p0.Bytes, p1.Bytes[:4]}, Workers: 2}, dst, StepInfo{Workers: 2}); err == nil {
		t.Fatal("a short payload was accepted")
	}
}
