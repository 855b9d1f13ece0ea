package compress

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// decodeOneBit reads a one-tensor 1-bit payload: mask bytes, then 2 scales
// per column.
func decodeOneBit(t *testing.T, b []byte, maskBytes, cols int) ([]byte, []float32) {
	t.Helper()
	d := NewDecoder(b)
	mask := slices.Clone(d.Raw(maskBytes))
	scale := make([]float32, 2*cols)
	d.Float32s(scale)
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	return mask, scale
}

func TestOneBitHandWorked(t *testing.T) {
	c := baselineBuild(t, "onebit", DefaultConfig(), baselineTensors([]int{2, 3}), 0, 1)
	ef := c.Feedback()
	// M = [ 1 -2  0 ]   row-major bits (1 = non-negative): 1 0 1 1 0 0,
	//     [ 3 -4 -1 ]   LSB first: 1 + 4 + 8 = 13.
	// Column scales (positive mean, negative mean):
	//   col 0: 1, 3 -> (2, 0): no negative entry, negative scale 0;
	//   col 1: -2, -4 -> (0, -3): no non-negative entry;
	//   col 2: 0, -1 -> (0, -1): the zero counts as non-negative.
	// Reconstruction [2 -3 0; 2 -3 -1]; residual M - it = [-1 1 0; 1 -1 0].
	// Payload: 1 mask byte + 3 columns x 2 float32 = 25 bytes.
	p, dst := baselineGather(t, c, []float32{1, -2, 0, 3, -4, -1}, 0)
	if p.Wire != 25 || len(p.Bytes) != 25 || !slices.Equal(p.TensorWire, []int64{25}) {
		t.Fatalf("wire %d, %d bytes, per tensor %v; want 25", p.Wire, len(p.Bytes), p.TensorWire)
	}
	mask, scale := decodeOneBit(t, p.Bytes, 1, 3)
	if mask[0] != 13 {
		t.Fatalf("mask %08b, want 00001101", mask[0])
	}
	baselineClose(t, "scales", scale, []float32{2, 0, 0, -3, 0, -1}, 0)
	baselineClose(t, "reconstruction", dst, []float32{2, -3, 0, 2, -3, -1}, 0)
	baselineClose(t, "sent", ef.Sent(), dst, 0)
	baselineClose(t, "residual", ef.Residual(), []float32{-1, 1, 0, 1, -1, 0}, 0)

	// Step 2 with a zero gradient sends the residual: every column now has
	// one entry of each sign (or only zeros), so it is reconstructed exactly
	// and nothing is left. Bits of [-1 1 0; 1 -1 0]: 0 1 1 1 0 1 = 2+4+8+32.
	// Scales: col 0 (1, -1), col 1 (1, -1), col 2 (0, 0).
	p, dst = baselineGather(t, c, make([]float32, 6), 1)
	mask, scale = decodeOneBit(t, p.Bytes, 1, 3)
	if mask[0] != 46 {
		t.Fatalf("step 2 mask %08b, want 00101110", mask[0])
	}
	baselineClose(t, "step 2 scales", scale, []float32{1, -1, 1, -1, 0, 0}, 0)
	baselineClose(t, "step 2 reconstruction", dst, []float32{-1, 1, 0, 1, -1, 0}, 0)
	baselineClose(t, "step 2 residual", ef.Residual(), make([]float32, 6), 0)
}

func TestOneBitTwoWorkers(t *testing.T) {
	tensors := baselineTensors([]int{2, 3})
	w0 := baselineBuild(t, "onebit", DefaultConfig(), tensors, 0, 2)
	w1 := baselineBuild(t, "onebit", DefaultConfig(), tensors, 1, 2)
	info := StepInfo{Workers: 2}
	// Worker 0 reconstructs M = [1 -2 0; 3 -4 -1] as [2 -3 0; 2 -3 -1] (see
	// above). Worker 1 sends -M = [-1 2 0; -3 4 1]: col 0 (0, -2), col 1
	// (3, 0), col 2 has 0 and 1, both non-negative: (0.5, 0); it
	// reconstructs [-2 3 0.5; -2 3 0.5]. The mean is [0 0 .25; 0 0 -.25].
	p0, err := w0.Compress(0, []float32{1, -2, 0, 3, -4, -1}, Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := w1.Compress(0, []float32{-1, 2, 0, -3, 4, 1}, Combined{}, info)
	if err != nil {
		t.Fatal(err)
	}
	baselineClose(t, "worker 1 sent", w1.Feedback().Sent(), []float32{-2, 3, 0.5, -2, 3, 0.5}, 0)
	last := Combined{Bytes: [][]byte{p0.Bytes, p1.Bytes}, Workers: 2}
	var outs [2][]float32
	for w, c := range []*sender{w0, w1} {
		outs[w] = make([]float32, 6)
		if err := c.Decompress(last, outs[w], info); err != nil {
			t.Fatal(err)
		}
	}
	baselineClose(t, "mean", outs[0], []float32{0, 0, 0.25, 0, 0, -0.25}, 0)
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatal("the workers decompress differently")
	}
}

func TestOneBitScalesColumns(t *testing.T) {
	// Random non-square tensors, with sizes that are not multiples of 8 (the
	// mask of the second tensor starts mid-payload). Column means keep each
	// column's sum of the compensated gradient (and nothing keeps row sums),
	// and a column is reconstructed with at most two values.
	tensors := baselineTensors([]int{5, 7}, []int{3, 2, 1, 3})
	rows, cols := []int{5, 3}, []int{7, 6}
	c := baselineBuild(t, "onebit", DefaultConfig(), tensors, 0, 1)
	ef := c.Feedback()
	rng := rand.New(rand.NewPCG(9, 9))
	g := make([]float32, 35+18)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	// (35+7)/8 + 8*7 + (18+7)/8 + 8*6 = 5 + 56 + 3 + 48.
	p, dst := baselineGather(t, c, g, 0)
	if p.Wire != 112 || !slices.Equal(p.TensorWire, []int64{61, 51}) {
		t.Fatalf("wire %d, per tensor %v; want 112, [61 51]", p.Wire, p.TensorWire)
	}
	baselineClose(t, "decompressed", dst, ef.Sent(), 0)
	for ti, tn := range tensors {
		comp := ef.Compensated()[tn.Offset : tn.Offset+tn.Size]
		rec := dst[tn.Offset : tn.Offset+tn.Size]
		for j := range cols[ti] {
			var sc, sr float64
			vals := map[float32]bool{}
			for r := range rows[ti] {
				sc += float64(comp[r*cols[ti]+j])
				sr += float64(rec[r*cols[ti]+j])
				vals[rec[r*cols[ti]+j]] = true
				if (comp[r*cols[ti]+j] < 0) != (rec[r*cols[ti]+j] < 0) {
					t.Fatalf("tensor %d (%d,%d): %v reconstructed as %v", ti, r, j, comp[r*cols[ti]+j], rec[r*cols[ti]+j])
				}
			}
			if math.Abs(sc-sr) > 1e-5 || len(vals) > 2 {
				t.Fatalf("tensor %d column %d: sum %v reconstructed as %v with values %v", ti, j, sc, sr, vals)
			}
		}
	}
}

func TestOneBitRejectsBadPayloads(t *testing.T) {
	c := baselineBuild(t, "onebit", DefaultConfig(), baselineTensors([]int{2, 3}), 0, 2)
	p, err := c.Compress(0, []float32{1, -2, 0, 3, -4, -1}, Combined{}, StepInfo{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 6)
	for name, last := range baselineGarbled(p.Bytes, 2) {
		if err := c.Decompress(last, dst, StepInfo{Workers: 2}); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "onebit: ") {
			t.Errorf("%s: error %q does not name the compressor", name, err)
		}
	}
}

func TestOneBitRejectsShapes(t *testing.T) {
	for _, tn := range []Tensor{
		{Name: "w", Shape: []int{4, 3}, Size: 10},
		{Name: "w", Shape: []int{0, 3}, Size: 0},
		{Name: "w", Shape: nil, Size: 4},
	} {
		if _, err := newOneBit(DefaultConfig(), []Tensor{tn}, 0, 1, 1, Hyper{}); err == nil {
			t.Errorf("shape %v of %d elements accepted", tn.Shape, tn.Size)
		}
	}
}

func BenchmarkOneBit(b *testing.B) { benchBaseline(b, "onebit") }
