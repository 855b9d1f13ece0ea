package coded

import (
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// Problem is a binary classification data set: rows of X are examples (a bias
// feature included), Y their labels 0 or 1; XTest, YTest may be nil.
type Problem struct {
	X, XTest *mat.Dense
	Y, YTest []float64
}

// bytesPerValue: w, r, the data and the devices' answers travel as float64,
// the precision the decoder works in.
const bytesPerValue = 8

// Store is a problem's data encoded on the devices: each holds one coded
// block of X (rowsPer x d) and one of X^T (featPer x m).
type Store struct {
	Code             *Code
	m, d             int
	rowsPer, featPer int
	xBlocks          []*mat.Dense // device i's coded block of X
	xtBlocks         []*mat.Dense // device i's coded block of X^T
	// EncodingBytes: building both stores with devices exchanging blocks;
	// CentralEncodingBytes through a central encoder (HasCentral false for
	// schemes without coding).
	EncodingBytes, CentralEncodingBytes int64
	HasCentral                          bool
	// KDecodable of KChecked k-subsets of devices decode on their own: the
	// code's tolerance to drop-outs, apart from any run's draws.
	KDecodable, KChecked int
}

// Encode builds the named scheme's code for n devices from seed and every
// device's coded blocks of X and X^T. X is split into k row blocks of
// ceil(m/k) rows, X^T into k row blocks of ceil(d/k) rows (the last of each
// padded with zeros).
func Encode(p *Problem, scheme string, n int, seed uint64) (*Store, error) {
	code, err := New(scheme, n, seed)
	if err != nil {
		return nil, err
	}
	m, d := p.X.Dims()
	k := code.K
	s := &Store{Code: code, m: m, d: d, rowsPer: ceilDiv(m, k), featPer: ceilDiv(d, k)}
	xSrc := make([]*mat.Dense, k)
	xtSrc := make([]*mat.Dense, k)
	for j := range k {
		xSrc[j] = mat.NewDense(s.rowsPer, d, nil)
		for i := 0; i < s.rowsPer && j*s.rowsPer+i < m; i++ {
			xSrc[j].SetRow(i, p.X.RawRowView(j*s.rowsPer+i))
		}
		xtSrc[j] = mat.NewDense(s.featPer, m, nil)
		for f := 0; f < s.featPer && j*s.featPer+f < d; f++ {
			for i := range m {
				xtSrc[j].Set(f, i, p.X.At(i, j*s.featPer+f))
			}
		}
	}
	s.xBlocks, s.xtBlocks = encodeBlocks(code, xSrc), encodeBlocks(code, xtSrc)
	xBytes := int64(s.rowsPer) * int64(d) * bytesPerValue
	xtBytes := int64(s.featPer) * int64(m) * bytesPerValue
	s.EncodingBytes = code.EncodingBytes(xBytes) + code.EncodingBytes(xtBytes)
	cx, ok := code.CentralEncodingBytes(xBytes)
	cxt, _ := code.CentralEncodingBytes(xtBytes)
	s.CentralEncodingBytes, s.HasCentral = cx+cxt, ok
	s.KDecodable, s.KChecked = code.KSubsets(5000, rand.New(rand.NewPCG(seed, 0x6b737562))) // "ksub"
	return s, nil
}

// encodeBlocks builds every device's coded block sum_j G_ij B_j; a plain copy
// (uncoded, replication) shares the source block's memory.
func encodeBlocks(c *Code, src []*mat.Dense) []*mat.Dense {
	out := make([]*mat.Dense, c.N)
	for i := range c.N {
		if sup := c.Support[i]; len(sup) == 1 && c.G.At(i, sup[0]) == 1 {
			out[i] = src[sup[0]]
			continue
		}
		r, cols := src[0].Dims()
		b := mat.NewDense(r, cols, nil)
		for _, j := range c.Support[i] {
			axpy(b.RawMatrix().Data, c.G.At(i, j), src[j].RawMatrix().Data)
		}
		out[i] = b
	}
	return out
}

func axpy(dst []float64, a float64, x []float64) {
	for i, v := range x {
		dst[i] += a * v
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Config is one training run on a Store.
type Config struct {
	Model   string  // logreg or svm
	Dropout float64 // probability that a device is away in a round
	// Steps is the time budget: the 2*Steps rounds that Steps steps take when
	// no device is ever away. A run completes as many steps as fit.
	Steps  int
	LR     float64 // learning rate
	Lambda float64 // L2 regularisation
	Seed   uint64  // seeds who is away in which round
}

// Result is what a run measured.
type Result struct {
	Config
	Scheme                              string
	Devices, K                          int
	EncodingBytes, CentralEncodingBytes int64 // from the Store
	HasCentral                          bool
	KDecodable, KChecked                int     // from the Store
	StepBytes                           float64 // mean traffic of a completed step
	TotalBytes                          int64   // all per-step traffic, the unfinished last step included
	Rounds                              int     // rounds run: the budget 2*Steps
	StepsCompleted                      int
	StalledSteps                        int // completed steps that took more than two rounds
	DecodeFailures                      int // rounds after which the answers so far did not decode
	IllConditioned                      int // of those, rank k but condition number above MaxCondition
	TrainLoss                           float64
	TrainAccuracy, TestAccuracy         float64
	Weights                             []float64 // w after the last completed step
}

// Train fits the model by full-batch gradient descent on the Store's devices.
// Time passes in rounds; in every round each device is away with probability
// Dropout, independently of the others and of earlier rounds (so devices
// leave and rejoin at random), and every device present that has not yet
// answered the current product receives its vector and answers. Answers are
// kept until the product decodes: a step whose answers do not suffice (or
// whose rows are ill-conditioned) waits for more, for every scheme alike, so
// every completed step applies the exact gradient and schemes differ only in
// how long they wait and what they send. Uncoded thus waits for each missing
// device to come back rather than stepping with a partial, rescaled gradient:
// the comparison is then one of time and traffic at identical arithmetic.
func Train(s *Store, p *Problem, cfg Config) (Result, error) {
	if err := checkModel(cfg.Model); err != nil {
		return Result{}, err
	}
	if !(cfg.Dropout >= 0 && cfg.Dropout < 1) || cfg.Steps < 1 || !(cfg.LR > 0) || !(cfg.Lambda >= 0) {
		return Result{}, fmt.Errorf("coded: dropout %v, %d steps, lr %v, lambda %v: expected 0 <= dropout < 1, steps >= 1, lr > 0, lambda >= 0",
			cfg.Dropout, cfg.Steps, cfg.LR, cfg.Lambda)
	}
	if m, d := p.X.Dims(); m != s.m || d != s.d {
		return Result{}, fmt.Errorf("coded: problem of %d x %d, the store holds %d x %d", m, d, s.m, s.d)
	}
	res := Result{Config: cfg, Scheme: s.Code.Name, Devices: s.Code.N, K: s.Code.K,
		EncodingBytes: s.EncodingBytes, CentralEncodingBytes: s.CentralEncodingBytes, HasCentral: s.HasCentral,
		KDecodable: s.KDecodable, KChecked: s.KChecked}
	run := &rounds{store: s, budget: 2 * cfg.Steps, dropout: cfg.Dropout,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x64726f70)), res: &res} // "drop"
	w := mat.NewVecDense(s.d, nil)
	var completedBytes int64
	for run.used < run.budget {
		start, startBytes := run.used, res.TotalBytes
		z, ok := run.product(s.xBlocks, w.RawVector().Data, s.rowsPer, s.m)
		if !ok {
			break
		}
		r, ok := run.product(s.xtBlocks, Residual(cfg.Model, z, p.Y), s.featPer, s.d)
		if !ok {
			break
		}
		g := mat.NewVecDense(s.d, r)
		g.ScaleVec(1/float64(s.m), g)
		g.AddScaledVec(g, cfg.Lambda, w)
		w.AddScaledVec(w, -cfg.LR, g)
		res.StepsCompleted++
		if run.used-start > 2 {
			res.StalledSteps++
		}
		completedBytes += res.TotalBytes - startBytes
	}
	res.Rounds = run.used
	if res.StepsCompleted > 0 {
		res.StepBytes = float64(completedBytes) / float64(res.StepsCompleted)
	}
	res.Weights = w.RawVector().Data
	res.TrainLoss = Loss(cfg.Model, p.X, p.Y, w, cfg.Lambda)
	res.TrainAccuracy = Accuracy(p.X, p.Y, w)
	if p.XTest != nil {
		res.TestAccuracy = Accuracy(p.XTest, p.YTest, w)
	}
	return res, nil
}

// rounds is the clock and the drop-out draws of one run.
type rounds struct {
	store        *Store
	used, budget int
	dropout      float64
	rng          *rand.Rand
	res          *Result
}

// product computes blocks' product with v on the devices, round after round,
// until the answers decode; it returns the decoded source products
// concatenated and cut to length n, or false when the budget runs out first.
// Traffic: v down to each device that answers, its per values up.
func (r *rounds) product(blocks []*mat.Dense, v []float64, per, n int) ([]float64, bool) {
	c := r.store.Code
	answered := make([]bool, c.N)
	var devices []int
	var answers [][]float64
	vec := mat.NewVecDense(len(v), v)
	st := Insufficient
	for r.used < r.budget {
		r.used++
		fresh := false
		for i := range c.N {
			away := r.rng.Float64() < r.dropout // drawn for every device, so schemes share the draws
			if away || answered[i] {
				continue
			}
			var out mat.VecDense
			out.MulVec(blocks[i], vec)
			answered[i], fresh = true, true
			devices = append(devices, i)
			answers = append(answers, out.RawVector().Data)
			r.res.TotalBytes += int64(len(v)+per) * bytesPerValue
		}
		if fresh { // without new answers the rows and their verdict are unchanged
			st, _ = c.Check(devices)
		}
		if st != Decoded {
			r.res.DecodeFailures++
			if st == IllConditioned {
				r.res.IllConditioned++
			}
			continue
		}
		R := mat.NewDense(len(devices), per, nil)
		for i, a := range answers {
			R.SetRow(i, a)
		}
		Y, dst := c.Decode(devices, R)
		if dst != Decoded {
			r.res.DecodeFailures++
			continue
		}
		out := make([]float64, 0, c.K*per)
		for j := range c.K {
			out = append(out, Y.RawRowView(j)...)
		}
		return out[:n], true
	}
	return nil, false
}
