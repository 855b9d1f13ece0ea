package coded

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestWorkedExample: X w = (1, 2, 3) for X = [[1,0],[0,1],[1,1]], w = (1, 2);
// G rows [1, a, a^2], a = 1..5, give 6, 17, 34, 57, 86; with devices 2 and 5
// away, devices 1, 3, 4 solve [[1,1,1],[1,3,9],[1,4,16]] Y = (6, 34, 57) to
// Y = (1, 2, 3), condition number 81.6.
func TestWorkedExample(t *testing.T) {
	G := mat.NewDense(5, 3, nil)
	for i := range 5 {
		a := float64(i + 1)
		G.SetRow(i, []float64{1, a, a * a})
	}
	c := &Code{Name: "vandermonde", N: 5, K: 3, G: G}
	results := []float64{6, 17, 34, 57, 86}
	for i, want := range results {
		if got := mat.Dot(mat.NewVecDense(3, mat.Row(nil, i, G)), mat.NewVecDense(3, []float64{1, 2, 3})); got != want {
			t.Fatalf("device %d returns %v, want %v", i+1, got, want)
		}
	}
	Y, ok := c.Decode([]int{0, 2, 3}, mat.NewDense(3, 1, []float64{6, 34, 57}))
	if !ok {
		t.Fatal("devices 1, 3, 4 did not decode")
	}
	for j, want := range []float64{1, 2, 3} {
		if math.Abs(Y.At(j, 0)-want) > 1e-12 {
			t.Fatalf("Y = %v, want (1, 2, 3)", mat.Formatted(Y.T()))
		}
	}
	A := mat.NewDense(3, 3, []float64{1, 1, 1, 1, 3, 9, 1, 4, 16})
	if k := condition(A); math.Abs(k-81.6) > 0.05 {
		t.Fatalf("condition number %v, want 81.6", k)
	}
}

// TestCodesConformance: every scheme decodes the source products exactly
// from all devices and from every sufficient set it should, and reports
// insufficient sets as such.
func TestCodesConformance(t *testing.T) {
	const n = 9 - 1
	for _, name := range Names() {
		code, err := Codes[name](n, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := rand.New(rand.NewPCG(3, 4))
		Ytrue := mat.NewDense(code.K, 3, nil)
		for j := range code.K {
			Ytrue.SetRow(j, []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()})
		}
		results := func(devs []int) *mat.Dense {
			R := mat.NewDense(len(devs), 3, nil)
			for i, dv := range devs {
				var row mat.VecDense
				row.MulVec(Ytrue.T(), mat.NewVecDense(code.K, mat.Row(nil, dv, code.G)))
				R.SetRow(i, row.RawVector().Data)
			}
			return R
		}
		check := func(devs []int, wantOK bool) {
			Y, ok := code.Decode(devs, results(devs))
			if ok != wantOK {
				t.Fatalf("%s: devices %v decoded %v, want %v", name, devs, ok, wantOK)
			}
			if ok && !mat.EqualApprox(Y, Ytrue, 1e-9) {
				t.Fatalf("%s: devices %v decode wrong products", name, devs)
			}
		}
		all := seq(n)
		check(all, true)
		check(all[:code.K-1], false) // fewer rows than blocks
		switch name {
		case "uncoded":
			check(all[1:], false) // block 0 lost
		case "replication":
			check([]int{4, 1, 2, 3}, true)        // block 0 from its copy
			check([]int{1, 2, 3, 5, 6, 7}, false) // block 0 on devices 0 and 4, both away
		case "mds":
			for range 50 { // any k of n
				check(r.Perm(n)[:code.K], true)
			}
		}
	}
}

// TestRLNCSingular: k = 8 rows over 8 blocks, each with a random support of
// d blocks, are singular with probability about 0.71, 0.21, 0.03, 0.00 for
// d = 2, 3, 4, 8 (2,000 draws each).
func TestRLNCSingular(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i, d := range []int{2, 3, 4, 8} {
		want := []float64{0.71, 0.21, 0.03, 0.00}[i]
		singular := 0
		for range 2000 {
			A := mat.NewDense(8, 8, nil)
			for row := range 8 {
				for _, j := range r.Perm(8)[:d] {
					A.Set(row, j, r.NormFloat64())
				}
			}
			if condition(A) > MaxCondition {
				singular++
			}
		}
		if got := float64(singular) / 2000; math.Abs(got-want) > 0.04 {
			t.Errorf("d = %d: singular %v of draws, want about %v", d, got, want)
		}
	}
}

// TestEncodingBytes on 6 devices with blocks of 100 bytes: uncoded sends
// nothing; replication (3 blocks) copies each once: 300; MDS (4 blocks):
// devices 0-3 need 3 others, devices 4-5 all 4: 20 blocks, plus 6 rows of 4
// coefficients of 4 bytes: 2096; a central encoder: 4 up + 6 down = 1000.
func TestEncodingBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for name, want := range map[string]int64{"uncoded": 0, "replication": 300, "mds": 2096} {
		c, _ := Codes[name](6, r)
		if got := c.EncodingBytes(100); got != want {
			t.Errorf("%s: %d bytes, want %d", name, got, want)
		}
	}
	c, _ := Codes["mds"](6, r)
	if got := c.CentralEncodingBytes(100); got != 1000 {
		t.Errorf("central: %d, want 1000", got)
	}
	// RLNC, degree d = ceil((k+1)/2) = 3: each device receives at most 3 blocks.
	c, _ = Codes["rlnc"](6, r)
	var want int64
	for i, sup := range c.Support {
		for _, j := range sup {
			if j != i {
				want += 100
			}
		}
		want += 4 * int64(len(sup))
	}
	if got := c.EncodingBytes(100); got != want || len(c.Support[0]) != 3 || got >= 2096 {
		t.Errorf("rlnc: %d bytes (support %v), want %d with supports of 3, less than MDS", got, c.Support, want)
	}
}

func tinyProblem() *Problem {
	r := rand.New(rand.NewPCG(9, 9))
	const m, d = 40, 5
	X := mat.NewDense(m, d, nil)
	y := make([]float64, m)
	for i := range m {
		for j := range d - 1 {
			X.Set(i, j, r.NormFloat64())
		}
		X.Set(i, d-1, 1)
		if X.At(i, 0)+0.5*X.At(i, 1) > 0.2 {
			y[i] = 1
		}
	}
	return &Problem{X: X, Y: y}
}

// TestGradients checks both losses' gradients by central differences.
func TestGradients(t *testing.T) {
	p := tinyProblem()
	w := mat.NewVecDense(5, []float64{0.3, -0.2, 0.1, 0.05, -0.1})
	for _, model := range Models {
		g := Gradient(model, p.X, p.Y, w, 0.01)
		for j := range 5 {
			const h = 1e-6
			wp, wm := mat.VecDenseCopyOf(w), mat.VecDenseCopyOf(w)
			wp.SetVec(j, w.AtVec(j)+h)
			wm.SetVec(j, w.AtVec(j)-h)
			fd := (Loss(model, p.X, p.Y, wp, 0.01) - Loss(model, p.X, p.Y, wm, 0.01)) / (2 * h)
			if math.Abs(fd-g.AtVec(j)) > 1e-6 {
				t.Errorf("%s: gradient[%d] %v, finite difference %v", model, j, g.AtVec(j), fd)
			}
		}
	}
}

// TestTrainMatchesDirect: with no drop-out every scheme's decoded gradient
// descent ends where direct gradient descent does; with drop-outs, uncoded
// devices stall far more often than MDS ones.
func TestTrainMatchesDirect(t *testing.T) {
	p := tinyProblem()
	for _, model := range Models {
		w := mat.NewVecDense(5, nil)
		for range 20 {
			w.AddScaledVec(w, -0.5, Gradient(model, p.X, p.Y, w, 0.01))
		}
		want := Loss(model, p.X, p.Y, w, 0.01)
		for _, name := range Names() {
			res, err := Train(p, Config{Model: model, Scheme: name, Devices: 6, Steps: 20, LR: 0.5, Lambda: 0.01, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(res.TrainLoss-want) > 1e-9 || res.Stalls != 0 || res.Rounds != 20 {
				t.Errorf("%s %s: loss %v (direct %v), %d stalls, %d rounds", model, name, res.TrainLoss, want, res.Stalls, res.Rounds)
			}
		}
	}
	un, _ := Train(p, Config{Model: "logreg", Scheme: "uncoded", Devices: 6, Dropout: 0.2, Steps: 30, LR: 0.5, Seed: 2})
	md, _ := Train(p, Config{Model: "logreg", Scheme: "mds", Devices: 6, Dropout: 0.2, Steps: 30, LR: 0.5, Seed: 2})
	if !(un.Stalls > 2*md.Stalls) {
		t.Errorf("dropout 0.2: uncoded stalled %d rounds, MDS %d: coding does not help", un.Stalls, md.Stalls)
	}
}
