package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/models"
)

// Measures are the figures gradwire measure computes on a run's final
// parameters, over a fixed subset of its training data.
type Measures struct {
	Checkpoint    string  `json:"checkpoint"`
	Epoch         int     `json:"epoch"`
	Examples      int     `json:"examples"` // training examples the measures use (the first of a fixed permutation)
	TrainLoss     float64 `json:"train_loss"`
	TrainAccuracy float64 `json:"train_accuracy"`
	TestAccuracy  float64 `json:"test_accuracy,omitempty"` // from summary.json, for the gap
	// ParamNorm is sum_l ||W_l||_F^2 over the weight tensors (no biases or
	// BatchNorm), the paper's parameter norm (Jiang et al. 2020, measure 42).
	// In a network with BatchNorm, this and the other norms are taken with
	// the BatchNorms folded in (FoldedBatchNorms).
	ParamNorm float64 `json:"param_norm"`
	// LogSpectralProduct is log prod_l ||W_l||_2^2 (measure 32), each weight
	// tensor viewed as a matrix (out x the rest; a convolution's kernel as
	// out x in*kh*kw), its spectral norm by power iteration.
	LogSpectralProduct float64 `json:"log_spectral_product"`
	// PathNorm is the sum of the outputs of the network with every
	// parameter squared on an all-ones input (measure 44).
	PathNorm float64 `json:"path_norm"`
	// PACBayesSigma is the largest sigma for which Gaussian noise
	// N(0, sigma^2) on every parameter lowers the training accuracy by about
	// 0.1 (measure 53's flatness is 1/sigma^2); PACBayesMagSigma the same with
	// noise of variance sigma'^2 w_i^2 + 1e-6 per parameter (measure 61).
	PACBayesSigma    float64 `json:"pacbayes_sigma"`
	PACBayesMagSigma float64 `json:"pacbayes_mag_sigma"`
	// HessianTop is the largest eigenvalue of the training loss's Hessian,
	// by power iteration on Hessian-vector products taken as central
	// differences of gradients, with step HessianStep.
	HessianTop        float64 `json:"hessian_top_eigenvalue"`
	HessianStep       float64 `json:"hessian_fd_step"`
	HessianIterations int     `json:"hessian_iterations"`
	HessianConverged  bool    `json:"hessian_converged"` // relative change below 1e-3
	// InitParams names the file of the run's initial parameters that DistFro
	// and DistSpec are measured from (init.ckpt, which gradwire train writes
	// before the first step); empty, and the two distances absent, for a run
	// without one (runs of versions before it, or train.checkpoint off).
	InitParams string `json:"init_params,omitempty"`
	// DistFro is sum_l ||W_l - W0_l||_F^2 over the weight tensors, the
	// distance from the initialisation W0 (measure 40); DistSpec is
	// sum_l ||W_l - W0_l||_2^2 (measure 41), each difference viewed as a
	// matrix as for LogSpectralProduct.
	DistFro  *float64 `json:"dist_fro,omitempty"`
	DistSpec *float64 `json:"dist_spec_init,omitempty"`
	// Depth is d, the number of weight tensors.
	Depth int `json:"depth,omitempty"`
	// FisherRao is ((d+1)^2/m) sum_i <w, grad_w l(x_i, y_i)>^2 over the m
	// measured examples, w every parameter, each example's gradient exact
	// (measure 45, after Liang et al. 2019; fisherRao). Absent for models
	// with BatchNorm, whose per-example gradient in training mode is not the
	// model's.
	FisherRao *float64 `json:"fisher_rao,omitempty"`
	// SharpnessAlpha is the largest alpha for which the worst perturbation
	// |u_i| <= alpha found by projected gradient ascent on the training loss
	// lowers the training accuracy by about 0.1 (the flatness measure is
	// 1/alpha^2); SharpnessMagAlpha the same in the magnitude-aware box
	// |u_i| <= alpha' (|w_i| + 1e-3) (measure 62 is 1/alpha'^2). AscentSteps
	// is the number of ascent steps per probe (sharpnessAlpha).
	SharpnessAlpha    *float64 `json:"sharpness_alpha,omitempty"`
	SharpnessMagAlpha *float64 `json:"sharpness_mag_alpha,omitempty"`
	AscentSteps       int      `json:"ascent_steps,omitempty"`
	// FoldedBatchNorms is the number of BatchNorms folded into the
	// convolutions before them for the norms, the path norm, the PAC-Bayes
	// sigmas and the distances to the initialisation (measure_fold.go).
	FoldedBatchNorms int `json:"folded_batchnorms,omitempty"`
	// Notes says which measures were left out and why.
	Notes []string `json:"notes,omitempty"`
}

// MeasureOptions sets the data, the power iteration and the sharpness search.
type MeasureOptions struct {
	Examples    int    // training examples used (multiple of Batch after rounding down)
	Batch       int    // examples per forward/backward
	Iterations  int    // power-iteration cap
	AscentSteps int    // projected gradient-ascent steps per sharpness probe; 0 = DefaultAscentSteps
	Seed        uint64 // subset permutation, starting vectors and perturbations
}

// Measure loads a finished run's latest checkpoint into a fresh model and
// computes Measures on its training data; it writes them to
// RUN_DIR/measures.json.
func Measure(runDir string, o MeasureOptions) (*Measures, error) {
	if o.Examples < 1 || o.Batch < 1 || o.Iterations < 1 {
		return nil, fmt.Errorf("measure: %d examples, batch %d, %d iterations: expected each >= 1", o.Examples, o.Batch, o.Iterations)
	}
	if o.AscentSteps == 0 {
		o.AscentSteps = DefaultAscentSteps
	}
	if o.AscentSteps < 0 {
		return nil, fmt.Errorf("measure: %d ascent steps: expected >= 1", o.AscentSteps)
	}
	cfgPath := filepath.Join(runDir, "config.yaml")
	cfg, err := configs.Load(cfgPath, nil)
	if err != nil {
		return nil, err
	}
	dopts := data.Options{Name: cfg.Data.Name, Dir: cfg.Data.Dir, SeqLen: cfg.Data.SeqLen, Normalize: cfg.Data.Normalize}
	train, _, err := data.OpenTrainTest(dopts)
	if err != nil {
		return nil, err
	}
	n := min(o.Examples, train.Len()) / o.Batch * o.Batch
	if n == 0 {
		return nil, fmt.Errorf("measure: %d examples (the training split has %d), fewer than one batch of %d", min(o.Examples, train.Len()), train.Len(), o.Batch)
	}
	in := models.Input{Shape: train.XShape(), Classes: train.Classes(), YLen: train.YLen()}
	mc := cfg.Model
	mc.Precision = models.PrecisionFloat32
	if err := CheckModelMemory(fmt.Sprintf("measure: %s at batch %d", mc.Name, o.Batch), "expected a smaller batch", mc, in, o.Batch, o.Batch); err != nil {
		return nil, err
	}
	net, err := models.New(mc, in, o.Batch, o.Batch, cfg.Seed)
	if err != nil {
		return nil, err
	}
	c, path, _, err := latestCheckpoint(runDir, layoutOf(net, cfg.Dist.Workers, nil))
	if err != nil {
		return nil, fmt.Errorf("measure %s: %w", runDir, err)
	}
	if c == nil {
		return nil, fmt.Errorf("measure: %s holds no checkpoint (train.checkpoint was off?)", runDir)
	}
	copy(net.Flat(), c.Params)
	bufs := net.Buffers()
	for i, b := range c.Buffers {
		copy(bufs[i].Value, b)
	}
	perm := rand.New(rand.NewPCG(o.Seed, 0x6d656173)).Perm(train.Len())[:n] // "meas"
	xs := make([][]float32, n/o.Batch)
	ys := make([][]int32, n/o.Batch)
	xPer, yPer := 1, train.YLen()
	for _, s := range train.XShape() {
		xPer *= s
	}
	for b := range xs {
		xs[b] = make([]float32, o.Batch*xPer)
		ys[b] = make([]int32, o.Batch*yPer)
		train.Fill(perm[b*o.Batch:(b+1)*o.Batch], xs[b], ys[b])
	}
	m := &Measures{Checkpoint: filepath.Base(path), Epoch: c.Epoch, Examples: n}
	if sum, err := ReadSummary(filepath.Join(runDir, "summary.json")); err == nil && sum.TestAccuracy != nil {
		m.TestAccuracy = *sum.TestAccuracy
	}
	// Loss and accuracy in evaluation mode.
	logits := make([]float32, o.Batch*yPer*in.Classes)
	var loss float64
	var correct int
	for b := range xs {
		if err := net.Predict(xs[b], logits); err != nil {
			return nil, err
		}
		l, k := crossEntropy(logits, ys[b], in.Classes)
		loss += l
		correct += k
	}
	m.TrainLoss = loss / float64(n*yPer)
	m.TrainAccuracy = float64(correct) / float64(n*yPer)
	// The norms, the path norm and the PAC-Bayes sigmas see the network with
	// its BatchNorms folded into the convolutions (measure_fold.go).
	eps := mc.BNEpsilon
	if eps == 0 {
		eps = models.DefaultConfig().BNEpsilon
	}
	folds, err := findFolds(net.Params(), bufs)
	if err != nil {
		return nil, fmt.Errorf("measure %s: %w", runDir, err)
	}
	wm, bufm := c.Params, c.Buffers
	if len(folds) > 0 {
		wm, bufm = foldBatchNorms(net.Params(), folds, c.Params, c.Buffers, eps)
		m.FoldedBatchNorms = len(folds)
		m.Notes = append(m.Notes, fmt.Sprintf("%d BatchNorms folded into the convolutions before them for param_norm, log_spectral_product, path_norm, the PAC-Bayes sigmas and the distances to the initialisation; the sharpness alphas and the Hessian take training-mode gradients of the network as it is", len(folds)))
	}
	setBufs := func(vals [][]float32) {
		for i, b := range bufs {
			copy(b.Value, vals[i])
		}
	}
	off := 0
	for _, p := range net.Params() {
		v := wm[off : off+len(p.Value)]
		off += len(p.Value)
		if !p.NoDecay {
			for _, x := range v {
				m.ParamNorm += float64(x) * float64(x)
			}
			m.LogSpectralProduct += 2 * math.Log(spectralNorm(v, p.Shape, o.Seed))
		}
	}
	accuracy := func() float64 {
		var ok int
		for b := range xs {
			if err := net.Predict(xs[b], logits); err != nil {
				return math.NaN()
			}
			_, k := crossEntropy(logits, ys[b], in.Classes)
			ok += k
		}
		return float64(ok) / float64(n*yPer)
	}
	copy(net.Flat(), wm)
	setBufs(bufm)
	if m.PathNorm, err = pathNorm(net, in, o.Batch, logits); err != nil {
		return nil, err
	}
	copy(net.Flat(), wm)
	m.PACBayesSigma = pacBayesSigma(net, wm, accuracy, m.TrainAccuracy, false, o.Seed)
	m.PACBayesMagSigma = pacBayesSigma(net, wm, accuracy, m.TrainAccuracy, true, o.Seed)
	copy(net.Flat(), c.Params)
	setBufs(c.Buffers)
	// Step's BatchNorm statistics updates are undone after each use.
	saved := make([][]float32, len(bufs))
	for i, b := range bufs {
		saved[i] = append([]float32(nil), b.Value...)
	}
	restoreBufs := func() {
		for i, b := range bufs {
			copy(b.Value, saved[i])
		}
	}
	// init.ckpt holds every model buffer (its decoder checks the count), so
	// the initial network folds with its own statistics.
	m.measureInit(runDir, net, wm, o.Seed, func(w0 []float32, b0 [][]float32) []float32 {
		w0f, _ := foldBatchNorms(net.Params(), folds, w0, b0, eps)
		return w0f
	})
	m.Depth = depth(net.Params())
	if len(bufs) > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("fisher_rao left out: model %s has BatchNorm, whose per-example gradient in training mode is not the model's", mc.Name))
	} else {
		net1, err := models.New(mc, in, 1, 1, cfg.Seed)
		if err != nil {
			return nil, err
		}
		fr, _, err := fisherRao(net1, c.Params, xs, ys, m.Depth)
		if err != nil {
			return nil, fmt.Errorf("measure %s: fisher-rao: %w", runDir, err)
		}
		m.FisherRao = &fr
	}
	var stepErr error
	probe := sharpnessProbe{flat: net.Flat(), batches: len(xs), accuracy: accuracy, restore: restoreBufs,
		grad: func(b int) []float32 {
			loss, err := net.Step(xs[b], ys[b])
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return nil // the perturbation already breaks the model
			}
			if err != nil {
				stepErr = err
				return nil
			}
			return net.Grad()
		}}
	alpha := sharpnessAlpha(probe, c.Params, m.TrainAccuracy, false, o.AscentSteps, o.Seed)
	alphaMag := sharpnessAlpha(probe, c.Params, m.TrainAccuracy, true, o.AscentSteps, o.Seed)
	copy(net.Flat(), c.Params)
	restoreBufs()
	if stepErr != nil {
		return nil, fmt.Errorf("measure %s: sharpness: %w", runDir, stepErr)
	}
	m.SharpnessAlpha, m.SharpnessMagAlpha, m.AscentSteps = &alpha, &alphaMag, o.AscentSteps
	// The gradient over the subset, at the parameters in net.Flat().
	grad := func(w []float64, out []float64) error {
		flat := net.Flat()
		for i := range flat {
			flat[i] = float32(w[i])
		}
		clear(out)
		for b := range xs {
			if _, err := net.Step(xs[b], ys[b]); err != nil {
				return err
			}
			for i, g := range net.Grad() {
				out[i] += float64(g) / float64(len(xs))
			}
		}
		return nil
	}
	w0 := make([]float64, len(net.Flat()))
	var wn float64
	for i, v := range net.Flat() {
		w0[i] = float64(v)
		wn += w0[i] * w0[i]
	}
	// Central differences in float32: truncation O(h^2), round-off
	// O(eps/h), balanced near eps^(1/3) of the weights' scale.
	m.HessianStep = 5e-3 * math.Max(1, math.Sqrt(wn))
	eig, iters, converged, err := TopEigen(grad, w0, m.HessianStep, o.Iterations, o.Seed)
	copy(net.Flat(), c.Params)
	restoreBufs()
	if err != nil {
		return nil, err
	}
	m.HessianTop, m.HessianIterations, m.HessianConverged = eig, iters, converged
	return m, writeJSON(filepath.Join(runDir, "measures.json"), m)
}

// measureInit sets the distances to the run's initial parameters, or notes
// why there are none: a run without init.ckpt, or one whose file cannot be
// read, keeps its other measures.
func (m *Measures) measureInit(runDir string, net *models.Net, w []float32, seed uint64, fold func(w0 []float32, b0 [][]float32) []float32) {
	w0, err := loadInit(runDir, net)
	switch {
	case err != nil:
		m.Notes = append(m.Notes, fmt.Sprintf("dist_fro and dist_spec_init left out: %v", err))
	case w0 == nil:
		m.Notes = append(m.Notes, fmt.Sprintf("dist_fro and dist_spec_init left out: no %s (the run's initial parameters; runs of gradwire versions before it, or with train.checkpoint off, have none)", InitFile))
	default:
		fro, spec := distToInit(net.Params(), w, fold(w0.Params, w0.Buffers), seed)
		m.InitParams, m.DistFro, m.DistSpec = InitFile, &fro, &spec
	}
}

// crossEntropy is the summed cross-entropy of rows of logits against labels,
// and the number of rows whose argmax is the label.
func crossEntropy(logits []float32, y []int32, classes int) (float64, int) {
	var loss float64
	var correct int
	for r, label := range y {
		row := logits[r*classes : (r+1)*classes]
		mx, arg := math.Inf(-1), 0
		for i, v := range row {
			if float64(v) > mx {
				mx, arg = float64(v), i
			}
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - mx)
		}
		loss += mx + math.Log(s) - float64(row[label])
		if arg == int(label) {
			correct++
		}
	}
	return loss, correct
}

// TopEigen is the largest-magnitude eigenvalue of the Hessian of the
// function whose gradient grad computes, at w: power iteration v <- Hv/||Hv||
// from a seeded random unit v, the Rayleigh quotient v.Hv as the estimate,
// Hv = (grad(w + h v) - grad(w - h v)) / (2h). It stops when the estimate
// changes by less than 1e-3 relative, or after iterations products.
func TopEigen(grad func(w, out []float64) error, w []float64, h float64, iterations int, seed uint64) (eig float64, done int, converged bool, err error) {
	n := len(w)
	if n == 0 || !(h > 0) {
		return 0, 0, false, errors.New("measure: no parameters, or a finite-difference step <= 0")
	}
	r := rand.New(rand.NewPCG(seed, 0x686573)) // "hes"
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return topEigenFrom(grad, w, v, h, iterations)
}

// topEigenFrom is TopEigen from the starting vector v (normalised here).
func topEigenFrom(grad func(w, out []float64) error, w, v []float64, h float64, iterations int) (eig float64, done int, converged bool, err error) {
	n := len(w)
	normalize(v)
	wp, wm := make([]float64, n), make([]float64, n)
	gp, gm, hv := make([]float64, n), make([]float64, n), make([]float64, n)
	prev := math.NaN()
	for it := 1; it <= iterations; it++ {
		for i := range w {
			wp[i], wm[i] = w[i]+h*v[i], w[i]-h*v[i]
		}
		if err := grad(wp, gp); err != nil {
			return 0, it, false, err
		}
		if err := grad(wm, gm); err != nil {
			return 0, it, false, err
		}
		var dot float64
		for i := range hv {
			hv[i] = (gp[i] - gm[i]) / (2 * h)
			dot += v[i] * hv[i]
		}
		eig = dot
		if it > 1 && math.Abs(eig-prev) < 1e-3*math.Abs(eig) {
			return eig, it, true, nil
		}
		prev = eig
		copy(v, hv)
		if normalize(v) == 0 {
			return 0, it, true, nil // the Hessian maps v to 0: all eigenvalues seen are 0
		}
	}
	return eig, iterations, false, nil
}

func normalize(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	s = math.Sqrt(s)
	if s == 0 {
		return 0
	}
	for i := range v {
		v[i] /= s
	}
	return s
}

// spectralNorm is the largest singular value of w viewed as a matrix of
// shape[0] rows (a vector: its Euclidean norm), by 100 rounds of power
// iteration on W^T W from a seeded vector.
func spectralNorm(w []float32, shape []int, seed uint64) float64 {
	rows := 1
	if len(shape) > 1 {
		rows = shape[0]
	}
	cols := len(w) / rows
	r := rand.New(rand.NewPCG(seed, uint64(len(w))))
	v := make([]float64, cols)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	normalize(v)
	u := make([]float64, rows)
	var sigma float64
	for range 100 {
		for i := range u {
			var s float64
			for j, vj := range v {
				s += float64(w[i*cols+j]) * vj
			}
			u[i] = s
		}
		sigma = normalize(u)
		clear(v)
		for i, ui := range u {
			for j := range v {
				v[j] += float64(w[i*cols+j]) * ui
			}
		}
		if normalize(v) == 0 {
			return 0
		}
	}
	return sigma
}

// pathNorm evaluates the network with every parameter squared on an
// all-ones input and sums the outputs (one example's worth).
func pathNorm(net *models.Net, in models.Input, batch int, logits []float32) (float64, error) {
	flat := net.Flat()
	for i, v := range flat {
		flat[i] = v * v
	}
	x := make([]float32, batch*numel(in.Shape))
	for i := range x {
		x[i] = 1
	}
	if err := net.Predict(x, logits); err != nil {
		return 0, err
	}
	var s float64
	for _, v := range logits[:in.Classes] {
		s += float64(v)
	}
	return s, nil
}

// pacBayesSigma finds by bisection on [0, 2] (depth 15) the largest sigma
// whose noise lowers the training accuracy by 0.1 on average over 10 draws,
// stopping within 0.01 of it. Magnitude-aware: the noise on w_i has standard
// deviation sqrt(sigma^2 w_i^2 + 1e-6). It leaves noisy parameters in net:
// the caller restores w.
func pacBayesSigma(net *models.Net, w []float32, accuracy func() float64, base float64, magnitude bool, seed uint64) float64 {
	const target, tol, draws = 0.1, 0.01, 10
	r := rand.New(rand.NewPCG(seed, 0x706163))
	flat := net.Flat()
	return bisectDrop(2, 15, target, tol, func(sigma float64) float64 {
		var drop float64
		for range draws {
			for i, v := range w {
				sd := sigma
				if magnitude {
					sd = math.Sqrt(sigma*sigma*float64(v)*float64(v) + 1e-6)
				}
				flat[i] = v + float32(sd*r.NormFloat64())
			}
			drop += base - accuracy()
		}
		return drop / draws
	})
}

// bisectDrop finds by bisection on [0, hi] (depth steps) the perturbation
// size whose accuracy drop, as drop measures it, is target: it returns the
// first size within tol of it, or the last interval's midpoint. drop must
// grow with the size (a larger drop moves the search down).
func bisectDrop(hi float64, depth int, target, tol float64, drop func(size float64) float64) float64 {
	lo := 0.0
	for range depth {
		size := (lo + hi) / 2
		d := drop(size)
		if math.Abs(d-target) < tol {
			return size
		}
		if d > target {
			hi = size
		} else {
			lo = size
		}
	}
	return (lo + hi) / 2
}
