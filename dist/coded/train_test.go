package coded

import (
	"math"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestCodedTrainMatchesDirect: with no drop-out every scheme completes its 20
// steps in 40 rounds and ends where gradient descent computed on one machine
// does, to float64 rounding.
func TestCodedTrainMatchesDirect(t *testing.T) {
	p := tinyProblem(40)
	for _, model := range Models {
		w := mat.NewVecDense(5, nil)
		for range 20 {
			w.AddScaledVec(w, -0.5, Gradient(model, p.X, p.Y, w, 0.01))
		}
		for _, name := range Names() {
			s, err := Encode(p, name, 6, 1)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Train(s, p, Config{Model: model, Steps: 20, LR: 0.5, Lambda: 0.01, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			var diff mat.VecDense
			diff.SubVec(mat.NewVecDense(5, res.Weights), w)
			if e := mat.Norm(&diff, 2) / mat.Norm(w, 2); e > 1e-9 || res.StepsCompleted != 20 || res.Rounds != 40 || res.DecodeFailures != 0 || res.StalledSteps != 0 {
				t.Errorf("%s %s: weights off by %v relative, %d steps in %d rounds, %d failures", model, name, e, res.StepsCompleted, res.Rounds, res.DecodeFailures)
			}
		}
	}
}

// TestCodedStepBytesByHand: 12 examples of 5 features on 6 devices. MDS (k = 4):
// blocks of 3 rows of X and 2 rows of X^T; a step with every device present
// sends w (5 values) down and 3 values up per device, then r (12 values) down
// and 2 values up: 6 * (8 + 14) * 8 = 1056 bytes. Uncoded (k = 6): 6 * (5 +
// 2 + 12 + 1) * 8 = 960, and the same for every completed step at any
// drop-out rate, since each device answers each product exactly once. The
// MDS store: blocks of X 3*5*8 = 120 bytes, of X^T 2*12*8 = 192; 20 blocks of
// each exchanged plus 6 coefficient vectors of 16 bytes per matrix: 6432;
// central: (4 + 6) * (120 + 192) = 3120.
func TestCodedStepBytesByHand(t *testing.T) {
	p := tinyProblem(12)
	mds, _ := Encode(p, "mds", 6, 1)
	if mds.EncodingBytes != 6432 || mds.CentralEncodingBytes != 3120 || !mds.HasCentral {
		t.Errorf("MDS encoding %d bytes, central %d (%v), want 6432 and 3120", mds.EncodingBytes, mds.CentralEncodingBytes, mds.HasCentral)
	}
	res, _ := Train(mds, p, Config{Model: "logreg", Steps: 3, LR: 0.1, Seed: 1})
	if res.StepBytes != 1056 || res.TotalBytes != 3*1056 {
		t.Errorf("MDS: %v bytes a step, %d in all, want 1056 and 3168", res.StepBytes, res.TotalBytes)
	}
	un, _ := Encode(p, "uncoded", 6, 1)
	for _, drop := range []float64{0, 0.3} {
		res, _ := Train(un, p, Config{Model: "svm", Dropout: drop, Steps: 50, LR: 0.1, Seed: 2})
		if res.StepBytes != 960 {
			t.Errorf("uncoded at drop-out %v: %v bytes a step, want 960", drop, res.StepBytes)
		}
	}
}

// TestCodedWaitingTimes: a product waits until enough distinct devices have been
// present. Each device first shows up after a geometric number of rounds
// (away with probability p per round), so a product that needs any k of n
// devices takes E = sum_{t>=0} P(Bin(n, 1 - p^t) < k) rounds: with n = 6,
// p = 0.3, uncoded (all 6) 2.534 rounds, MDS (any 4) 1.268; a step takes two
// such waits.
func TestCodedWaitingTimes(t *testing.T) {
	p := tinyProblem(12)
	const n, drop = 6, 0.3
	expected := func(k int) float64 {
		var e float64
		for t := range 80 {
			q := 1 - math.Pow(drop, float64(t)) // present at least once in t rounds
			for j := range k {                  // P(Bin(n, q) = j), j < k
				e += binomial(n, j) * math.Pow(q, float64(j)) * math.Pow(1-q, float64(n-j))
			}
		}
		return e
	}
	for _, c := range []struct {
		scheme string
		k      int
		want   float64
	}{{"uncoded", 6, 2.534}, {"mds", 4, 1.268}} {
		if e := expected(c.k); math.Abs(e-c.want) > 0.001 {
			t.Fatalf("%s: expected wait %v, want %v", c.scheme, e, c.want)
		}
		s, _ := Encode(p, c.scheme, n, 1)
		res, err := Train(s, p, Config{Model: "logreg", Dropout: drop, Steps: 3000, LR: 0.1, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		got := float64(res.Rounds) / float64(res.StepsCompleted) // the unfinished last step is a few rounds of 6000
		if math.Abs(got-2*c.want)/(2*c.want) > 0.03 {
			t.Errorf("%s: %.3f rounds a step, want 2 * %.3f", c.scheme, got, c.want)
		}
		t.Logf("%s: %.3f rounds a step (expected %.3f), %d steps, %d stalled", c.scheme, got, 2*c.want, res.StepsCompleted, res.StalledSteps)
	}
}

func TestCodedTrainErrors(t *testing.T) {
	p := tinyProblem(12)
	s, _ := Encode(p, "mds", 6, 1)
	for _, cfg := range []Config{{Model: "tree", Steps: 1, LR: 1}, {Model: "svm", Dropout: 1, Steps: 1, LR: 1}, {Model: "svm", Steps: 0, LR: 1}, {Model: "svm", Steps: 1}} {
		if _, err := Train(s, p, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if _, err := Encode(p, "lt", 6, 1); err == nil {
		t.Error("scheme lt: no error")
	}
	if _, err := Encode(p, "replication", 7, 1); err == nil {
		t.Error("replication on 7 devices: no error")
	}
}

// TestCodedFashionPair loads T-shirt/top (0) against shirt (6) from the real data:
// 6,000 + 6,000 training and 1,000 + 1,000 test images, 784 pixels in [0, 1]
// and a bias of 1; 30 MDS-coded logistic steps separate them well above
// chance.
func TestCodedFashionPair(t *testing.T) {
	dir := filepath.Dir(datatest.Dir(t, "fashion-mnist"))
	train, test, err := data.OpenTrainTest(data.Options{Name: "fashion-mnist", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Pair(train, test, 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	m, d := p.X.Dims()
	mt, _ := p.XTest.Dims()
	if m != 12000 || d != 785 || mt != 2000 {
		t.Fatalf("pair of %d x %d, %d test, want 12000 x 785, 2000", m, d, mt)
	}
	var ones float64
	for _, y := range p.Y {
		ones += y
	}
	if ones != 6000 || mat.Max(p.X) > 1 || mat.Min(p.X) < 0 || p.X.At(17, 784) != 1 {
		t.Fatalf("%v label-1 examples, pixels in [%v, %v], bias %v", ones, mat.Min(p.X), mat.Max(p.X), p.X.At(17, 784))
	}
	s, err := Encode(p, "mds", 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Train(s, p, Config{Model: "logreg", Dropout: 0.2, Steps: 30, LR: 0.1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.TestAccuracy < 0.7 {
		t.Fatalf("test accuracy %.3f after %d steps, expected > 0.7", res.TestAccuracy, res.StepsCompleted)
	}
	t.Logf("%d steps, test accuracy %.4f", res.StepsCompleted, res.TestAccuracy)
}
