package train

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
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
	if m.InitParams != InitFile || m.DistFro == nil || !(*m.DistFro > 0) || m.DistSpec == nil || !(*m.DistSpec > 0 && *m.DistSpec <= *m.DistFro) {
		t.Errorf("distances to the initialisation: %+v", m)
	}
	if m.Depth != 2 || m.FisherRao == nil || !(*m.FisherRao > 0) || m.AscentSteps != DefaultAscentSteps {
		t.Errorf("depth %d, Fisher-Rao %v, %d ascent steps", m.Depth, m.FisherRao, m.AscentSteps)
	}
	for _, a := range []*float64{m.SharpnessAlpha, m.SharpnessMagAlpha} {
		if a == nil || !(*a > 0 && *a < 2) {
			t.Errorf("sharpness alpha %v out of (0, 2)", a)
		}
	}
	if *m.SharpnessAlpha >= m.PACBayesSigma {
		t.Errorf("the worst-case radius %v is not below the random one %v", *m.SharpnessAlpha, m.PACBayesSigma)
	}
	if len(m.Notes) != 0 {
		t.Errorf("notes %q", m.Notes)
	}
	// A run without init.ckpt (written before it existed) keeps every other
	// measure and says why the distances are missing.
	if err := os.Remove(filepath.Join(dir, InitFile)); err != nil {
		t.Fatal(err)
	}
	old, err := Measure(dir, MeasureOptions{Examples: 128, Batch: 32, Iterations: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if old.DistFro != nil || old.DistSpec != nil || old.InitParams != "" || len(old.Notes) != 1 ||
		!strings.Contains(old.Notes[0], "no "+InitFile) || old.HessianTop != m.HessianTop || *old.FisherRao != *m.FisherRao {
		t.Errorf("without init.ckpt: %+v", old)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "measures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Measures
	if err := json.Unmarshal(raw, &back); err != nil || back.HessianTop != old.HessianTop || back.DistFro != nil {
		t.Fatalf("measures.json: %v %+v", err, back)
	}
	if _, err := Measure(t.TempDir(), MeasureOptions{Examples: 1, Batch: 1, Iterations: 1}); err == nil {
		t.Error("a directory without a run gave no error")
	}
	t.Setenv(memoryLimitEnv, "1KiB")
	if _, err := Measure(dir, MeasureOptions{Examples: 128, Batch: 32, Iterations: 1}); err == nil ||
		!strings.Contains(err.Error(), "measure: mlp at batch 32 needs about") || !strings.Contains(err.Error(), "("+memoryLimitEnv+")") {
		t.Errorf("a batch over the memory limit: %v", err)
	}
	os.Unsetenv(memoryLimitEnv)
	// The fake training split has 256 examples.
	if _, err := Measure(dir, MeasureOptions{Examples: 4096, Batch: 512, Iterations: 1}); err == nil ||
		!strings.Contains(err.Error(), "256 examples (the training split has 256), fewer than one batch of 512") {
		t.Errorf("a batch beyond the training split: %v", err)
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

// TestDistToInit on a 4-3-2 MLP whose weights moved from the initialisation
// by hand-picked matrices: fc1's by the rank-one u v^T, u = (1, 2, 0, 2),
// v = (1, 0, 2) (Frobenius and spectral norm both ||u|| ||v|| = 3 sqrt(5),
// squared 45), fc2's by [[3, 0], [0, 4], [0, 0]] (Frobenius^2 25, spectral^2
// 16). The biases moved too but are not weights: dist_fro = 70,
// dist_spec_init = 61.
func TestDistToInit(t *testing.T) {
	in := models.Input{Shape: []int{1, 2, 2}, Classes: 2, YLen: 1}
	net, err := models.New(models.Config{Name: "mlp", Hidden: []int{3}}, in, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	w0 := append([]float32(nil), net.Flat()...)
	w := append([]float32(nil), w0...)
	u, v := []float32{1, 2, 0, 2}, []float32{1, 0, 2}
	off := 0
	for k, p := range net.Params() { // fc1.w [4 3], fc1.b [3], fc2.w [3 2], fc2.b [2]
		for i := range p.Value {
			switch k {
			case 0:
				w[off+i] += u[i/3] * v[i%3]
			case 2:
				w[off+i] += []float32{3, 0, 0, 4, 0, 0}[i]
			default:
				w[off+i] += 7
			}
		}
		off += len(p.Value)
	}
	fro, spec := distToInit(net.Params(), w, w0, 1)
	if math.Abs(fro-70) > 1e-4 || math.Abs(spec-61) > 1e-4 {
		t.Fatalf("dist_fro %v, dist_spec_init %v: want 70 and 61", fro, spec)
	}
	if d := depth(net.Params()); d != 2 {
		t.Errorf("depth %d, want 2", d)
	}
}

// TestFisherRaoClosedForm: for a network f = W2 relu(W1 x + b1) + b2 the
// gradient of l at (W1, b1, W2, b2) gives, with delta = softmax(f) - onehot(y)
// and h = relu(W1 x + b1),
// <w, grad_w l> = delta.(W2 h) [W2] + delta.b2 [b2] + (W2^T delta).h [W1, b1]
// = 2 delta.(W2 h) + delta.b2. With d = 2 weight tensors the measure is
// 9 mean_i <w, grad_w l_i>^2; computed here in float64 by hand.
func TestFisherRaoClosedForm(t *testing.T) {
	in := models.Input{Shape: []int{1, 2, 2}, Classes: 3, YLen: 1}
	net1, err := models.New(models.Config{Name: "mlp", Hidden: []int{3}}, in, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := net1.Params() // fc1.w [4 3], fc1.b [3], fc2.w [3 3], fc2.b [3]
	if len(p) != 4 || len(p[0].Value) != 12 || len(p[2].Value) != 9 {
		t.Fatalf("%d parameter tensors", len(p))
	}
	w := make([]float32, len(net1.Flat()))
	for i := range w {
		w[i] = float32(math.Sin(float64(3*i+1))) * 0.8
	}
	W1, b1, W2, b2 := w[:12], w[12:15], w[15:24], w[24:27]
	xs := [][]float32{{0.5, -1, 2, 0.25, 1, 1, -0.5, 0.75}, {-2, 0.3, 0.1, 1.5, 0.2, -0.4, 0.9, 1.1}}
	ys := [][]int32{{0, 2}, {1, 1}}
	var want float64
	for b := range xs {
		for r, label := range ys[b] {
			x := xs[b][r*4 : (r+1)*4]
			h := make([]float64, 3)
			for j := range h {
				h[j] = float64(b1[j])
				for i := range x {
					h[j] += float64(x[i]) * float64(W1[i*3+j])
				}
				h[j] = math.Max(h[j], 0)
			}
			wh, f := make([]float64, 3), make([]float64, 3)
			for k := range f {
				for j := range h {
					wh[k] += h[j] * float64(W2[j*3+k])
				}
				f[k] = wh[k] + float64(b2[k])
			}
			mx := math.Max(f[0], math.Max(f[1], f[2]))
			var z float64
			for _, v := range f {
				z += math.Exp(v - mx)
			}
			var s float64
			for k, v := range f {
				delta := math.Exp(v-mx) / z
				if k == int(label) {
					delta--
				}
				s += 2*delta*wh[k] + delta*float64(b2[k])
			}
			want += s * s
		}
	}
	want = 9 * want / 4
	got, meanSq, err := fisherRao(net1, w, xs, ys, depth(p))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-5*want || math.Abs(9*meanSq-got) > 1e-12*got {
		t.Fatalf("fisher-rao %v (mean square %v), closed form %v", got, meanSq, want)
	}
}

// TestFisherRaoScaling checks the exact per-example inner products of a
// two-layer ReLU network (with biases, so not homogeneous) against an
// independent method: <w, grad_w l(w)> is the derivative of t -> l((1+t) w)
// at 0, here a central difference of the evaluation graph's loss (float32
// logits, step 1e-3: truncation and round-off both well below the 1e-3
// relative tolerance).
func TestFisherRaoScaling(t *testing.T) {
	in := models.Input{Shape: []int{1, 3, 3}, Classes: 4, YLen: 1}
	net1, err := models.New(models.Config{Name: "mlp", Hidden: []int{6}}, in, 1, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	w := append([]float32(nil), net1.Flat()...)
	for i := range w {
		w[i] *= 3 // larger weights: losses far from ln 4, gradients far from 0
	}
	const n = 5
	xs, ys := make([][]float32, n), make([][]int32, n)
	for k := range n {
		xs[k] = make([]float32, 9)
		for i := range xs[k] {
			xs[k][i] = float32(math.Cos(float64(7*k+i))) * 1.5
		}
		ys[k] = []int32{int32(k % 4)}
	}
	_, meanSq, err := fisherRao(net1, w, xs, ys, depth(net1.Params()))
	if err != nil {
		t.Fatal(err)
	}
	loss := func(k int, scale float64) float64 {
		for i, v := range w {
			net1.Flat()[i] = float32(float64(v) * scale)
		}
		logits := make([]float32, 4)
		if err := net1.Predict(xs[k], logits); err != nil {
			t.Fatal(err)
		}
		l, _ := crossEntropy(logits, ys[k], 4)
		return l
	}
	const h = 1e-3
	var want float64
	for k := range n {
		s := (loss(k, 1+h) - loss(k, 1-h)) / (2 * h)
		want += s * s / n
	}
	if math.Abs(meanSq-want) > 2e-3*want {
		t.Fatalf("mean <w, grad l>^2: exact %v, finite differences %v", meanSq, want)
	}
}

// TestSharpnessAlphaClosedForm: a two-class network with one input and one
// hidden unit, h = relu(a x + c), z_k = v_k h + b_k, on ten examples of class
// 1 with x > 0 and v1 > v0 (and b1 < b0: the margins are small next to the
// weights, so that the magnitude-aware search ends well below alpha 1). While
// v1 - v0 stays positive in the box, the margin m = (v1 - v0) h + b1 - b0 falls as a,
// c, v1 and b1 fall and v0 and b0 rise, and every gradient component of the
// loss keeps that sign inside the box, so projected ascent ends at the corner
// u = r (-1, -1, +1, -1, +1, -1) on (a, c, v0, v1, b0, b1), r_j = alpha
// (magnitude-aware: alpha (|w_j| + 1e-3)), where example i's margin is
// (v1 - v0 - r_v0 - r_v1) relu((a - r_a) x_i + c - r_c) + b1 - b0 - r_b0 - r_b1.
// Its root in alpha, a_i, is where example i is lost; a drop of 0.1 is one
// example of ten, so the search must end between the two smallest roots
// (found here by bisection in float64).
func TestSharpnessAlphaClosedForm(t *testing.T) {
	in := models.Input{Shape: []int{1, 1, 1}, Classes: 2, YLen: 1}
	const n = 10
	net, err := models.New(models.Config{Name: "mlp", Hidden: []int{1}}, in, n, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	// fc1.w [1 1] = a, fc1.b = c, fc2.w [1 2] = (v0, v1), fc2.b = (b0, b1).
	w := []float32{1, 0.5, 1, 1.5, 0.5, 0.3}
	if len(net.Flat()) != len(w) {
		t.Fatalf("%d parameters", len(net.Flat()))
	}
	x := []float32{0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5}
	y := make([]int32, n)
	for i := range y {
		y[i] = 1
	}
	logits := make([]float32, 2*n)
	accuracy := func() float64 {
		if err := net.Predict(x, logits); err != nil {
			t.Fatal(err)
		}
		_, k := crossEntropy(logits, y, 2)
		return float64(k) / n
	}
	copy(net.Flat(), w)
	if a := accuracy(); a != 1 {
		t.Fatalf("accuracy %v before perturbation, want 1", a)
	}
	probe := sharpnessProbe{flat: net.Flat(), batches: 1, accuracy: accuracy, restore: func() {},
		grad: func(int) []float32 {
			if _, err := net.Step(x, y); err != nil {
				t.Fatal(err)
			}
			return net.Grad()
		}}
	for _, magnitude := range []bool{false, true} {
		r := func(j int, alpha float64) float64 {
			if magnitude {
				return alpha * (math.Abs(float64(w[j])) + 1e-3)
			}
			return alpha
		}
		margin := func(xi, alpha float64) float64 {
			h := math.Max((float64(w[0])-r(0, alpha))*xi+float64(w[1])-r(1, alpha), 0)
			return (float64(w[3]-w[2])-r(2, alpha)-r(3, alpha))*h + float64(w[5]-w[4]) - r(4, alpha) - r(5, alpha)
		}
		// Below alphaMax, v1 - v0 - r_v0 - r_v1 > 0: the corner is the worst case.
		alphaMax := 0.99 * float64(w[3]-w[2]) / (r(2, 1) + r(3, 1))
		var roots []float64
		for _, xi := range x {
			lo, hi := 0.0, alphaMax
			for range 100 {
				if mid := (lo + hi) / 2; margin(float64(xi), mid) > 0 {
					lo = mid
				} else {
					hi = mid
				}
			}
			roots = append(roots, lo)
		}
		slices.Sort(roots)
		if roots[1] >= alphaMax {
			t.Fatalf("roots %v reach %v", roots, alphaMax)
		}
		got := sharpnessAlpha(probe, w, 1, magnitude, DefaultAscentSteps, 5)
		if !(got > roots[0] && got <= roots[1]) {
			t.Errorf("magnitude %v: alpha %v, want in (%v, %v]", magnitude, got, roots[0], roots[1])
		}
		t.Logf("magnitude %v: alpha %.5f in (%.5f, %.5f]", magnitude, got, roots[0], roots[1])
	}
}

// TestInitParams: a fresh run writes init.ckpt, the parameters a model built
// from its config and seed starts from (and its buffers); resuming the run
// leaves the file as it was; a run with train.checkpoint off writes none.
func TestInitParams(t *testing.T) {
	cfg := smallConfig(t, "lenet5", "train.epochs=1")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	in := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	fresh, err := models.New(cfg.Model, in, 1, 1, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	w0, err := loadInit(dir, fresh)
	if err != nil || w0 == nil {
		t.Fatalf("init.ckpt: %v", err)
	}
	if !slices.Equal(w0.Params, fresh.Flat()) || w0.Model != "lenet5" || w0.GlobalStep != 0 || len(w0.Workers) != 0 || len(w0.Optim.Buffers) != 0 {
		t.Fatalf("init.ckpt does not hold the model's initial parameters alone")
	}
	last, err := os.ReadFile(latestPath(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, InitFile))
	if st.Size() >= int64(len(last)) || st.Size() < int64(4*len(w0.Params)) {
		t.Errorf("init.ckpt has %d bytes for %d parameters (a checkpoint %d)", st.Size(), len(w0.Params), len(last))
	}
	t.Logf("init.ckpt: %d bytes for %d parameters; the epoch checkpoint %d", st.Size(), len(w0.Params), len(last))
	before, _ := os.ReadFile(filepath.Join(dir, InitFile))
	more := cfg
	more.Train.Epochs = 2
	if err := more.WriteYAML(filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), more, Options{OutDir: dir, Resume: true, AllowChange: []string{"train.epochs"}}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, InitFile))
	if !slices.Equal(before, after) {
		t.Error("resuming rewrote init.ckpt")
	}
	off := smallConfig(t, "mlp", "model.hidden=8", "train.epochs=1", "train.checkpoint=false")
	dir2 := t.TempDir()
	runCfg(t, off, dir2, false)
	if _, err := os.Stat(filepath.Join(dir2, InitFile)); !os.IsNotExist(err) {
		t.Errorf("train.checkpoint off: init.ckpt %v", err)
	}
}

// A BatchNorm folded by hand: eps 1 keeps the numbers round. Channel 0:
// s = 2/sqrt(3+1) = 1, W' = 3, b' = 1 - 1*1 = 0. Channel 1:
// s = 0.5/sqrt(0.25+1) = 1/sqrt(5), W' = -2/sqrt(5), b' = 0 + 1/sqrt(5).
func TestFoldBatchNormsByHand(t *testing.T) {
	params := []optim.Param{
		{Name: "c.w", Shape: []int{2, 1, 1, 1}, Kind: "conv", Value: make([]float32, 2)},
		{Name: "bn.scale", Shape: []int{1, 2, 1, 1}, Kind: "norm", NoDecay: true, Value: make([]float32, 2)},
		{Name: "bn.shift", Shape: []int{1, 2, 1, 1}, Kind: "norm", NoDecay: true, Value: make([]float32, 2)},
	}
	bufs := []models.Buffer{{Name: "bn.running_mean", Value: make([]float32, 2)}, {Name: "bn.running_var", Value: make([]float32, 2)}}
	folds, err := findFolds(params, bufs)
	if err != nil || len(folds) != 1 {
		t.Fatalf("folds %v, %v", folds, err)
	}
	w := []float32{3, -2, 2, 0.5, 1, 0}
	wf, bf := foldBatchNorms(params, folds, w, [][]float32{{1, -1}, {3, 0.25}}, 1)
	r5 := 1 / math.Sqrt(5)
	want := []float64{3, -2 * r5, 1, 1, 0, r5}
	for i, v := range wf {
		if math.Abs(float64(v)-want[i]) > 1e-6 {
			t.Fatalf("folded %v, want %v", wf, want)
		}
	}
	if bf[0][0] != 0 || bf[0][1] != 0 || bf[1][0] != 0 || bf[1][1] != 0 {
		t.Fatalf("folded statistics %v: want mean 0 and variance 1 - eps = 0", bf)
	}
	// A BatchNorm after something other than a convolution is refused.
	params[0].Kind = "linear"
	if _, err := findFolds(params, bufs); err == nil {
		t.Fatal("a BatchNorm after a linear layer was folded")
	}
}

// Folding keeps the function: ResNet-20 in evaluation mode, with BatchNorm
// scales, shifts and running statistics away from their initial values,
// gives the same logits with its BatchNorms folded in.
func TestFoldBatchNormsSameFunction(t *testing.T) {
	in := models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}
	net, err := models.New(models.Config{Name: "resnet20"}, in, 4, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	var nbn int
	for _, p := range net.Params() {
		if p.Kind == "norm" {
			for i := range p.Value {
				p.Value[i] = float32(0.5 + r.Float64())
				if strings.HasSuffix(p.Name, ".shift") {
					p.Value[i] = float32(r.NormFloat64() * 0.3)
				}
			}
			if strings.HasSuffix(p.Name, ".scale") {
				nbn++
			}
		}
	}
	var bufVals [][]float32
	for _, b := range net.Buffers() {
		for i := range b.Value {
			if strings.HasSuffix(b.Name, "running_var") {
				b.Value[i] = float32(0.2 + 2*r.Float64())
			} else {
				b.Value[i] = float32(r.NormFloat64() * 0.5)
			}
		}
		bufVals = append(bufVals, append([]float32(nil), b.Value...))
	}
	x := make([]float32, 4*28*28)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	before := make([]float32, 4*10)
	if err := net.Predict(x, before); err != nil {
		t.Fatal(err)
	}
	folds, err := findFolds(net.Params(), net.Buffers())
	if err != nil || len(folds) != nbn || nbn != 21 {
		t.Fatalf("%d folds of %d BatchNorms (want 21: the stem, 18 in the blocks, 2 on the projection shortcuts): %v", len(folds), nbn, err)
	}
	wf, bf := foldBatchNorms(net.Params(), folds, net.Flat(), bufVals, models.DefaultConfig().BNEpsilon)
	copy(net.Flat(), wf)
	for i, b := range net.Buffers() {
		copy(b.Value, bf[i])
	}
	after := make([]float32, 4*10)
	if err := net.Predict(x, after); err != nil {
		t.Fatal(err)
	}
	var scale, diff float64
	for i := range before {
		scale = math.Max(scale, math.Abs(float64(before[i])))
		diff = math.Max(diff, math.Abs(float64(after[i]-before[i])))
	}
	if diff > 1e-4*scale {
		t.Fatalf("folded logits differ by %g (scale %g)", diff, scale)
	}
}

// A network with BatchNorm is measured with its BatchNorms folded in: the
// weight norm is that of the folded weights, not of the raw ones, and the
// distances to the initialisation fold the initial network too.
func TestMeasureFoldsBatchNorm(t *testing.T) {
	cfg := smallConfig(t, "resnet20", "train.max_steps=2", "train.eval_limit=16", "data.eval_batch_size=8", "data.batch_size=8")
	dir := t.TempDir()
	runCfg(t, cfg, dir, false)
	m, err := Measure(dir, MeasureOptions{Examples: 8, Batch: 8, Iterations: 2, AscentSteps: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.FoldedBatchNorms != 21 || len(m.Notes) != 2 || !strings.Contains(m.Notes[0], "21 BatchNorms folded") {
		t.Fatalf("folded %d BatchNorms, notes %q", m.FoldedBatchNorms, m.Notes)
	}
	if m.DistFro == nil || !(*m.DistFro > 0) || !(m.PathNorm > 0) || math.IsInf(m.PathNorm, 0) {
		t.Fatalf("measures %+v", m)
	}
	net, err := models.New(cfg.Model, models.Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 8, 8, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	c, _, _, err := latestCheckpoint(dir, layoutOf(net, cfg.Dist.Workers, nil))
	if err != nil {
		t.Fatal(err)
	}
	var raw float64
	off := 0
	for _, p := range net.Params() {
		if !p.NoDecay {
			for _, v := range c.Params[off : off+len(p.Value)] {
				raw += float64(v) * float64(v)
			}
		}
		off += len(p.Value)
	}
	if math.Abs(m.ParamNorm-raw) < 1e-3*raw {
		t.Fatalf("param norm %g is the raw weights' %g: nothing folded", m.ParamNorm, raw)
	}
}
