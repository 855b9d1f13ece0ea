package train

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
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
