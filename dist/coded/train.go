package coded

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// Problem is a binary classification data set: rows of X are examples (a bias
// feature included), Y are labels 0 or 1.
type Problem struct {
	X, XTest *mat.Dense
	Y, YTest []float64
}

// Models lists the linear models Train fits.
var Models = []string{"logreg", "svm"}

// Config is one coded training run.
type Config struct {
	Model     string  // logreg (labels 0/1) or svm (hinge on labels -1/+1)
	Scheme    string  // a key of Codes
	Devices   int     // n
	Dropout   float64 // each device is away in a round with this probability
	Steps     int     // gradient steps
	LR        float64 // learning rate
	Lambda    float64 // L2 regularisation
	Seed      uint64  // coefficients and drop-outs
	MaxRounds int     // rounds one step may wait before the run fails (0: 1000)
}

// Result is what a run measured.
type Result struct {
	Config
	K                    int     // source blocks
	EncodingBytes        int64   // building the coded blocks of X and X^T, devices exchanging blocks
	CentralEncodingBytes int64   // the same through a central encoder
	StepBytes            float64 // per step, mean over steps: w and r down, results up, failed rounds included
	Rounds, Stalls       int     // rounds run; rounds whose answers could not be decoded
	TrainLoss            float64 // final regularised training loss
	TrainAccuracy        float64
	TestAccuracy         float64
}

// bytesPerValue: the decoder works in float64 and so does the wire.
const bytesPerValue = 8

// Train fits the model by full-batch gradient descent, each step's two
// products computed by the devices that answer in a round and decoded by the
// master; a round that cannot be decoded is repeated with a fresh draw of
// who answers (the step waits). Devices drop out independently each round.
func Train(p *Problem, cfg Config) (Result, error) {
	if cfg.Model != "logreg" && cfg.Model != "svm" {
		return Result{}, fmt.Errorf("coded: model %q, expected logreg or svm", cfg.Model)
	}
	newCode, ok := Codes[cfg.Scheme]
	if !ok {
		return Result{}, fmt.Errorf("coded: scheme %q, expected one of %v", cfg.Scheme, Names())
	}
	if cfg.Devices < 1 || !(cfg.Dropout >= 0 && cfg.Dropout < 1) || cfg.Steps < 1 || !(cfg.LR > 0) || !(cfg.Lambda >= 0) {
		return Result{}, fmt.Errorf("coded: %d devices, dropout %v, %d steps, lr %v, lambda %v: expected devices >= 1, 0 <= dropout < 1, steps >= 1, lr > 0, lambda >= 0",
			cfg.Devices, cfg.Dropout, cfg.Steps, cfg.LR, cfg.Lambda)
	}
	if cfg.MaxRounds == 0 {
		cfg.MaxRounds = 1000
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636f646564)) // "coded"
	code, err := newCode(cfg.Devices, rng)
	if err != nil {
		return Result{}, err
	}
	m, d := p.X.Dims()
	rowsPer, featPer := ceilDiv(m, code.K), ceilDiv(d, code.K)
	rowCoded := encode(code, blocks(p.X, code.K, rowsPer))     // device i: rowsPer x d
	colCoded := encode(code, blocks(p.X.T(), code.K, featPer)) // device i: featPer x m
	res := Result{Config: cfg, K: code.K}
	blockBytes := int64(rowsPer) * int64(d) * bytesPerValue
	res.EncodingBytes = 2 * code.EncodingBytes(blockBytes)
	res.CentralEncodingBytes = 2 * code.CentralEncodingBytes(blockBytes)

	w := mat.NewVecDense(d, nil)
	drops := rand.New(rand.NewPCG(cfg.Seed, 0x64726f70)) // "drop"
	var bytes float64
	for range cfg.Steps {
		var grad *mat.VecDense
		for round := 0; ; round++ {
			if round == cfg.MaxRounds {
				return res, fmt.Errorf("coded: %s, dropout %v: no decodable round in %d", cfg.Scheme, cfg.Dropout, cfg.MaxRounds)
			}
			res.Rounds++
			var active []int
			for i := range code.N {
				if drops.Float64() >= cfg.Dropout {
					active = append(active, i)
				}
			}
			a := float64(len(active))
			// w down, X w results up.
			bytes += a * float64(d+rowsPer) * bytesPerValue
			z, ok := product(code, rowCoded, active, w.RawVector().Data, m)
			if !ok {
				res.Stalls++
				continue
			}
			r := residual(cfg.Model, z, p.Y)
			// r down, X^T r results up.
			bytes += a * float64(m+featPer) * bytesPerValue
			g, ok := product(code, colCoded, active, r, d)
			if !ok {
				res.Stalls++
				continue
			}
			grad = mat.NewVecDense(d, g)
			break
		}
		grad.ScaleVec(1/float64(m), grad)
		grad.AddScaledVec(grad, cfg.Lambda, w)
		w.AddScaledVec(w, -cfg.LR, grad)
	}
	res.StepBytes = bytes / float64(cfg.Steps)
	res.TrainLoss = Loss(cfg.Model, p.X, p.Y, w, cfg.Lambda)
	res.TrainAccuracy = Accuracy(p.X, p.Y, w)
	if p.XTest != nil {
		res.TestAccuracy = Accuracy(p.XTest, p.YTest, w)
	}
	return res, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// blocks splits the rows of A into k blocks of per rows each, the last padded
// with zero rows.
func blocks(A mat.Matrix, k, per int) []*mat.Dense {
	rows, cols := A.Dims()
	out := make([]*mat.Dense, k)
	for j := range k {
		b := mat.NewDense(per, cols, nil)
		for i := 0; i < per && j*per+i < rows; i++ {
			for c := range cols {
				b.Set(i, c, A.At(j*per+i, c))
			}
		}
		out[j] = b
	}
	return out
}

// encode builds every device's coded block sum_j G_ij B_j.
func encode(c *Code, src []*mat.Dense) []*mat.Dense {
	r, cols := src[0].Dims()
	out := make([]*mat.Dense, c.N)
	for i := range c.N {
		b := mat.NewDense(r, cols, nil)
		for _, j := range c.Support[i] {
			var t mat.Dense
			t.Scale(c.G.At(i, j), src[j])
			b.Add(b, &t)
		}
		out[i] = b
	}
	return out
}

// product has the active devices multiply their coded blocks by v and
// decodes the source blocks' products, concatenated and cut to length n.
func product(c *Code, coded []*mat.Dense, active []int, v []float64, n int) ([]float64, bool) {
	if len(active) == 0 {
		return nil, false
	}
	per, _ := coded[0].Dims()
	R := mat.NewDense(len(active), per, nil)
	vec := mat.NewVecDense(len(v), v)
	for i, dv := range active {
		var out mat.VecDense
		out.MulVec(coded[dv], vec)
		R.SetRow(i, out.RawVector().Data)
	}
	Y, ok := c.Decode(active, R)
	if !ok {
		return nil, false
	}
	out := make([]float64, 0, c.K*per)
	for j := range c.K {
		out = append(out, Y.RawRowView(j)...)
	}
	return out[:n], true
}

// residual is the element-wise step between the two products: the loss's
// derivative in z = X w per example (sum over examples, the 1/m applied
// after): logistic sigmoid(z) - y; hinge -s 1[s z < 1] with s = 2y - 1.
func residual(model string, z, y []float64) []float64 {
	r := make([]float64, len(z))
	for i := range z {
		if model == "logreg" {
			r[i] = 1/(1+math.Exp(-z[i])) - y[i]
			continue
		}
		if s := 2*y[i] - 1; s*z[i] < 1 {
			r[i] = -s
		}
	}
	return r
}

// Loss is the regularised mean loss: logistic log(1 + e^z) - y z, or hinge
// max(0, 1 - s z), plus lambda/2 ||w||^2.
func Loss(model string, X *mat.Dense, y []float64, w *mat.VecDense, lambda float64) float64 {
	var z mat.VecDense
	z.MulVec(X, w)
	var l float64
	for i := range y {
		zi := z.AtVec(i)
		if model == "logreg" {
			// log(1 + e^z) without overflow.
			l += math.Max(zi, 0) + math.Log1p(math.Exp(-math.Abs(zi))) - y[i]*zi
		} else {
			l += math.Max(0, 1-(2*y[i]-1)*zi)
		}
	}
	return l/float64(len(y)) + lambda/2*mat.Dot(w, w)
}

// Gradient is the loss's gradient computed directly, X^T r / m + lambda w.
func Gradient(model string, X *mat.Dense, y []float64, w *mat.VecDense, lambda float64) *mat.VecDense {
	var z mat.VecDense
	z.MulVec(X, w)
	r := mat.NewVecDense(len(y), residual(model, z.RawVector().Data, y))
	var g mat.VecDense
	g.MulVec(X.T(), r)
	g.ScaleVec(1/float64(len(y)), &g)
	g.AddScaledVec(&g, lambda, w)
	return &g
}

// Accuracy is the fraction of examples whose sign of x.w matches the label.
func Accuracy(X *mat.Dense, y []float64, w *mat.VecDense) float64 {
	var z mat.VecDense
	z.MulVec(X, w)
	var ok int
	for i := range y {
		if (z.AtVec(i) > 0) == (y[i] > 0.5) {
			ok++
		}
	}
	return float64(ok) / float64(len(y))
}

var errNoData = errors.New("coded: no examples of the two classes")
