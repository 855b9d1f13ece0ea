package train

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gradwire/gradwire/models"
)

// TestTopEigenWorkedExample: H = [[10, 2], [2, 1]] (eigenvalues 0.575571 and
// 10.424429), v0 = (1, 1)/sqrt(2), h = 1e-3: Rayleigh quotients 7.5,
// 10.411765, 10.424390, 10.424429 after one to four products, and the fourth
// changes by less than 1e-3 relative.
func TestTopEigenWorkedExample(t *testing.T) {
	grad := func(w, out []float64) error {
		out[0], out[1] = 10*w[0]+2*w[1], 2*w[0]+w[1]
		return nil
	}
	w := []float64{0.3, -0.7}
	for k, want := range []float64{7.5, 10.411765, 10.424390, 10.424429} {
		eig, done, converged, err := topEigenFrom(grad, w, []float64{1, 1}, 1e-3, k+1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(eig-want) > 1e-6 || done != k+1 || converged != (k == 3) {
			t.Fatalf("after %d products: %v (done %d, converged %v), want %v", k+1, eig, done, converged, want)
		}
	}
}

// TestMeasure measures a finished small run: measures.json is written, the
// training accuracy is that of an easy task, the test accuracy comes from the
// summary, and the power iteration converges to a positive eigenvalue.
func TestMeasure(t *testing.T) {
	cfg := smallConfig(t, "mlp", "model.hidden=16", "train.epochs=2")
	dir := t.TempDir()
	sum := runCfg(t, cfg, dir, false)
	m, err := Measure(dir, MeasureOptions{Examples: 128, Batch: 32, Iterations: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.Examples != 128 || m.TrainAccuracy < 0.5 || m.TestAccuracy != *sum.TestAccuracy || !(m.ParamNorm > 0) || !(m.HessianTop > 0) {
		t.Fatalf("measures %+v", m)
	}
	if !(m.PACBayesSigma > 0 && m.PACBayesSigma < 2) || !(m.PACBayesMagSigma > 0 && m.PACBayesMagSigma < 2) || !(m.PathNorm > 0) || math.IsNaN(m.LogSpectralProduct) {
		t.Errorf("measures out of range: %+v", m)
	}
	if !m.HessianConverged {
		t.Errorf("power iteration did not converge in %d products", m.HessianIterations)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "measures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Measures
	if err := json.Unmarshal(raw, &back); err != nil || back.HessianTop != m.HessianTop {
		t.Fatalf("measures.json: %v %+v", err, back)
	}
	if _, err := Measure(t.TempDir(), MeasureOptions{Examples: 1, Batch: 1, Iterations: 1}); err == nil {
		t.Error("a directory without a run gave no error")
	}
}

// TestSpectralNorm: diag(3, 4) has spectral norm 4; the rank-one u v^T has
// ||u|| ||v||; a vector its Euclidean norm.
func TestSpectralNorm(t *testing.T) {
	if got := spectralNorm([]float32{3, 0, 0, 4}, []int{2, 2}, 1); math.Abs(got-4) > 1e-9 {
		t.Errorf("diag(3, 4): %v, want 4", got)
	}
	// u = (1, 2), v = (2, 0, 1): ||u|| ||v|| = sqrt(5) sqrt(5) = 5.
	if got := spectralNorm([]float32{2, 0, 1, 4, 0, 2}, []int{2, 3}, 1); math.Abs(got-5) > 1e-9 {
		t.Errorf("rank one: %v, want 5", got)
	}
	if got := spectralNorm([]float32{3, 4}, []int{2}, 1); math.Abs(got-5) > 1e-9 {
		t.Errorf("vector (3, 4): %v, want 5", got)
	}
}

// TestPathNorm on a 4-3-2 MLP with every parameter set by hand: with squared
// parameters and an all-ones input every unit is active, so the path norm is
// sum_k (sum_j (sum_i W1_ij^2 + b1_j^2) W2_jk^2 + b2_k^2).
func TestPathNorm(t *testing.T) {
	in := models.Input{Shape: []int{1, 2, 2}, Classes: 2, YLen: 1}
	net, err := models.New(models.Config{Name: "mlp", Hidden: []int{3}}, in, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := net.Params() // fc1.w [4 3], fc1.b [3], fc2.w [3 2], fc2.b [2]
	for t, prm := range p {
		for i := range prm.Value {
			prm.Value[i] = float32(0.1*float64(t+1)) + float32(i)*0.05
		}
	}
	var want float64
	for k := range 2 {
		out := float64(p[3].Value[k]) * float64(p[3].Value[k])
		for j := range 3 {
			h := float64(p[1].Value[j]) * float64(p[1].Value[j])
			for i := range 4 {
				h += float64(p[0].Value[i*3+j]) * float64(p[0].Value[i*3+j])
			}
			out += h * float64(p[2].Value[j*2+k]) * float64(p[2].Value[j*2+k])
		}
		want += out
	}
	got, err := pathNorm(net, in, 1, make([]float32, 2))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-5*want {
		t.Fatalf("path norm %v, want %v", got, want)
	}
}
