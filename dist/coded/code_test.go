package coded

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestCodedWorkedExample is the design notes' example: X = [[1,0],[0,1],[1,1]],
// w = (1, 2), so X_j w = 1, 2, 3; G rows [1, a, a^2], a = 1..5, return 6, 17,
// 34, 57, 86; devices 2 and 5 drop out and devices 1, 3, 4 solve
// [[1,1,1],[1,3,9],[1,4,16]] Y = (6, 34, 57) to Y = (1, 2, 3), condition
// number 81.6. A seeded Gaussian 5 x 3 generator decodes the same from any 3
// rows, and from 4 by least squares.
func TestCodedWorkedExample(t *testing.T) {
	X := mat.NewDense(3, 2, []float64{1, 0, 0, 1, 1, 1})
	var xw mat.VecDense
	xw.MulVec(X, mat.NewVecDense(2, []float64{1, 2}))
	want := []float64{1, 2, 3}
	if !mat.Equal(&xw, mat.NewVecDense(3, want)) {
		t.Fatalf("X w = %v, want (1, 2, 3)", xw.RawVector().Data)
	}
	G := mat.NewDense(5, 3, nil)
	for i := range 5 {
		a := float64(i + 1)
		G.SetRow(i, []float64{1, a, a * a})
	}
	c := &Code{Name: "vandermonde", N: 5, K: 3, G: G, Support: [][]int{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}}, Coefficients: true}
	var returns mat.VecDense
	returns.MulVec(G, &xw)
	if !mat.Equal(&returns, mat.NewVecDense(5, []float64{6, 17, 34, 57, 86})) {
		t.Fatalf("returns %v, want 6, 17, 34, 57, 86", returns.RawVector().Data)
	}
	st, cond := c.Check([]int{0, 2, 3})
	if st != Decoded || math.Abs(cond-81.6) > 0.05 {
		t.Fatalf("devices 1, 3, 4: %v, condition number %v, want decoded at 81.6", st, cond)
	}
	Y, st := c.Decode([]int{0, 2, 3}, mat.NewDense(3, 1, []float64{6, 34, 57}))
	if st != Decoded {
		t.Fatalf("devices 1, 3, 4: %v", st)
	}
	for j := range 3 {
		if math.Abs(Y.At(j, 0)-want[j]) > 1e-12 {
			t.Fatalf("Y = %v, want (1, 2, 3)", mat.Col(nil, 0, Y))
		}
	}
	if st, _ := c.Check([]int{0, 2}); st != Insufficient {
		t.Fatalf("two returns for three blocks: %v, want insufficient", st)
	}

	gauss, err := NewMDS(5, 3, rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		t.Fatal(err)
	}
	var all mat.VecDense
	all.MulVec(gauss.G, &xw)
	for _, devs := range [][]int{{0, 1, 2}, {0, 1, 3}, {0, 1, 4}, {0, 2, 3}, {0, 2, 4}, {0, 3, 4}, {1, 2, 3}, {1, 2, 4}, {1, 3, 4}, {2, 3, 4}, {0, 1, 3, 4}} {
		R := mat.NewDense(len(devs), 1, nil)
		for i, dv := range devs {
			R.Set(i, 0, all.AtVec(dv))
		}
		Y, st := gauss.Decode(devs, R)
		if st != Decoded {
			t.Fatalf("Gaussian, devices %v: %v", devs, st)
		}
		for j := range 3 {
			if math.Abs(Y.At(j, 0)-want[j]) > 1e-12 {
				t.Fatalf("Gaussian, devices %v: Y = %v, want (1, 2, 3)", devs, mat.Col(nil, 0, Y))
			}
		}
	}
}

// structuralRank is the size of a maximum matching between devices and the
// blocks of their supports: the rank the rows have for almost every draw of
// their non-zero coefficients. It judges decodability independently of the
// numerical decoder.
func structuralRank(c *Code, devices []int) int {
	match := make([]int, c.K) // block -> index into devices, -1 free
	for j := range match {
		match[j] = -1
	}
	var try func(d int, seen []bool) bool
	try = func(d int, seen []bool) bool {
		for _, j := range c.Support[devices[d]] {
			if seen[j] {
				continue
			}
			seen[j] = true
			if match[j] < 0 || try(match[j], seen) {
				match[j] = d
				return true
			}
		}
		return false
	}
	rank := 0
	for d := range devices {
		if try(d, make([]bool, c.K)) {
			rank++
		}
	}
	return rank
}

func relErr(a, b *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, 2) / mat.Norm(b, 2)
}

// TestCodedSchemesConformance runs over every registered scheme: from every one
// of the 2^n subsets of answering devices, the decoder decodes exactly (1e-9
// relative) when the subset's rows reach rank k and says Insufficient when
// they do not; what "rank k" means per scheme is checked apart from the
// decoder: every block covered (uncoded, replication), any k (MDS), a perfect
// matching of blocks to answering supports (RLNC).
func TestCodedSchemesConformance(t *testing.T) {
	for _, n := range []int{6, 8} {
		for _, name := range Names() {
			code, err := New(name, n, 1)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if code.Name != name || code.N != n || len(code.Support) != n {
				t.Fatalf("%s: code %q on %d devices with %d supports", name, code.Name, code.N, len(code.Support))
			}
			r := rand.New(rand.NewPCG(3, 4))
			Ytrue := mat.NewDense(code.K, 3, nil)
			for j := range code.K {
				Ytrue.SetRow(j, []float64{r.NormFloat64(), 10 * r.NormFloat64(), r.NormFloat64()})
			}
			var all mat.Dense
			all.Mul(code.G, Ytrue)
			decoded := 0
			for mask := 0; mask < 1<<n; mask++ {
				var devs []int
				for i := range n {
					if mask&(1<<i) != 0 {
						devs = append(devs, i)
					}
				}
				R := mat.NewDense(max(1, len(devs)), 3, nil)
				for i, dv := range devs {
					R.SetRow(i, all.RawRowView(dv))
				}
				Y, st := code.Decode(devs, R)
				wantOK := structuralRank(code, devs) == code.K
				switch name {
				case "mds":
					wantOK = len(devs) >= code.K
				case "uncoded":
					wantOK = len(devs) == n
				}
				if wantOK != (st == Decoded) {
					t.Fatalf("%s, n = %d, devices %v: %v, want decodable %v", name, n, devs, st, wantOK)
				}
				if !wantOK && st != Insufficient {
					t.Fatalf("%s, n = %d, devices %v: %v, want insufficient", name, n, devs, st)
				}
				if st == Decoded {
					decoded++
					if e := relErr(Y, Ytrue); e > 1e-9 {
						t.Fatalf("%s, n = %d, devices %v: relative error %v", name, n, devs, e)
					}
				}
			}
			t.Logf("%s, n = %d, k = %d: %d of %d subsets decode", name, n, code.K, decoded, 1<<n)
			if name == "replication" {
				// every block covered: per block 1 - (both copies away) of the 4^(n/2) patterns
				if want := pow(3, n/2); decoded != want {
					t.Fatalf("replication, n = %d: %d decodable subsets, want 3^%d = %d", n, decoded, n/2, want)
				}
			}
		}
	}
}

func pow(a, b int) int {
	p := 1
	for range b {
		p *= a
	}
	return p
}

// TestCodedIllConditioned: rank k with condition number above 1e8 is reported as
// such, and more answers make it decodable.
func TestCodedIllConditioned(t *testing.T) {
	c := &Code{Name: "test", N: 3, K: 2, G: mat.NewDense(3, 2, []float64{1, 1, 1, 1 + 1e-10, 0, 1}), Support: [][]int{{0, 1}, {0, 1}, {1}}}
	if st, cond := c.Check([]int{0, 1}); st != IllConditioned || cond < 1e8 {
		t.Fatalf("nearly parallel rows: %v, condition %v", st, cond)
	}
	if st, _ := c.Check([]int{0, 1, 2}); st != Decoded {
		t.Fatalf("with a third row: %v", st)
	}
}

// TestCodedMDSAnyK: a (12, 8) Gaussian code decodes from 200 random 8-subsets to
// 1e-9, with a median condition number far below the decoder's limit.
func TestCodedMDSAnyK(t *testing.T) {
	code, err := NewMDS(12, 8, rand.New(rand.NewPCG(11, 12)))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	Ytrue := mat.NewDense(8, 2, nil)
	for j := range 8 {
		Ytrue.SetRow(j, []float64{r.NormFloat64(), r.NormFloat64()})
	}
	var all mat.Dense
	all.Mul(code.G, Ytrue)
	for range 200 {
		devs := r.Perm(12)[:8]
		R := mat.NewDense(8, 2, nil)
		for i, dv := range devs {
			R.SetRow(i, all.RawRowView(dv))
		}
		Y, st := code.Decode(devs, R)
		if st != Decoded {
			t.Fatalf("devices %v: %v", devs, st)
		}
		if e := relErr(Y, Ytrue); e > 1e-9 {
			t.Fatalf("devices %v: relative error %v", devs, e)
		}
	}
}

// singularFraction draws k x k matrices whose rows have random supports of d
// blocks (from support) and N(0, 1) coefficients, and returns the fraction the
// decoder does not accept.
func singularFraction(r *rand.Rand, k, d, draws int, support func(r *rand.Rand, k, d int) []int) float64 {
	bad := 0
	for range draws {
		c := &Code{N: k, K: k, G: mat.NewDense(k, k, nil)}
		for i := range k {
			for _, j := range support(r, k, d) {
				c.G.Set(i, j, r.NormFloat64())
			}
		}
		if st, _ := c.Check(seq(k)); st != Decoded {
			bad++
		}
	}
	return float64(bad) / float64(draws)
}

// TestCodedRLNCSingular: for k = 8, uniform random supports of d = 2, 3, 4, 8
// distinct blocks give a singular 8 x 8 system with probability 0.71, 0.21,
// 0.03, 0.00 (2,000 draws). The tolerances are about 3.5 binomial standard
// deviations; supports drawn with replacement (a wrong construction) miss
// them. RLNC's own rows keep each data-owning device's block in its support,
// so the k owners' rows alone are never singular.
func TestCodedRLNCSingular(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	uniform := func(r *rand.Rand, k, d int) []int { return randomSupport(r, k, d, -1) }
	withReplacement := func(r *rand.Rand, k, d int) []int {
		s := make([]int, d)
		for i := range s {
			s[i] = r.IntN(k)
		}
		return s
	}
	for i, d := range []int{2, 3, 4, 8} {
		want, tol := []float64{0.71, 0.21, 0.03, 0.00}[i], []float64{0.035, 0.035, 0.015, 0.002}[i]
		got := singularFraction(r, 8, d, 2000, uniform)
		if math.Abs(got-want) > tol {
			t.Errorf("d = %d: singular in %v of draws, want %v +- %v", d, got, want, tol)
		}
		wrong := singularFraction(r, 8, d, 2000, withReplacement)
		if d < 8 && math.Abs(wrong-want) <= tol {
			t.Errorf("d = %d with replacement: singular in %v of draws, inside the tolerance of %v: the test cannot tell the constructions apart", d, wrong, want)
		}
		t.Logf("d = %d: singular %.4f (with replacement %.4f)", d, got, wrong)
	}
	for seed := range uint64(200) {
		c, err := NewRLNC(8, 8, 2, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := c.Check(seq(8)); st != Decoded {
			t.Fatalf("seed %d: the owners' rows are %v", seed, st)
		}
	}
}

// TestCodedEncodingBytesByHand: blocks of D = 100 bytes, coefficients of 4 bytes.
// With k = n = 4 (every device owns one block): a central encoder 4*D up +
// 4*D down = 800; a dense code exchanged between devices n(n-1)*D = 1200 plus
// 4 coefficient vectors of 4*4 bytes = 1264; degree-2 RLNC n(d-1)*D = 400
// plus 4 vectors of 4*2 bytes = 432. The registered schemes on 6 devices:
// uncoded nothing; replication (k = 3) copies blocks 0-2 to devices 3-5: 300;
// MDS (k = 4): owners 0-3 receive 3 blocks, devices 4-5 all 4: 20 blocks +
// 6*16 = 2096; RLNC (k = 4, d = 3): owners receive 2 blocks, the others 3:
// 14 blocks + 6*12 = 1472.
func TestCodedEncodingBytesByHand(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	dense, _ := NewMDS(4, 4, r)
	if got := dense.EncodingBytes(100); got != 1264 {
		t.Errorf("dense k = n = 4: %d bytes, want 1264", got)
	}
	if got, ok := dense.CentralEncodingBytes(100); got != 800 || !ok {
		t.Errorf("central k = n = 4: %d bytes, want 800", got)
	}
	sparse, _ := NewRLNC(4, 4, 2, r)
	if got := sparse.EncodingBytes(100); got != 432 {
		t.Errorf("RLNC d = 2, k = n = 4: %d bytes, want 432 (supports %v)", got, sparse.Support)
	}
	for name, want := range map[string]int64{"uncoded": 0, "replication": 300, "mds": 2096, "rlnc": 1472} {
		c, err := New(name, 6, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.EncodingBytes(100); got != want {
			t.Errorf("%s on 6 devices: %d bytes, want %d (supports %v)", name, got, want, c.Support)
		}
	}
	if _, ok := (&Code{}).CentralEncodingBytes(100); ok {
		t.Error("a code without coefficients has a central encoding cost")
	}
}

// TestCodedReencode: device 7 of an RLNC code is rebuilt from the coded blocks of
// devices 1, 2, 3; its block is the same combination of their blocks as its
// new row is of their rows, and the code still decodes exactly.
func TestCodedReencode(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	c, err := NewRLNC(8, 5, 3, rng)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]*mat.Dense, c.K)
	for j := range src {
		src[j] = mat.NewDense(2, 3, nil)
		for i := range 6 {
			src[j].RawMatrix().Data[i] = rng.NormFloat64()
		}
	}
	blocks := encodeBlocks(c, src)
	from := []int{1, 2, 3}
	a, err := c.Reencode(7, from, rng)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := mat.NewDense(2, 3, nil)
	for l, f := range from {
		axpy(rebuilt.RawMatrix().Data, a[l], blocks[f].RawMatrix().Data)
	}
	if want := encodeBlocks(c, src)[7]; !mat.EqualApprox(rebuilt, want, 1e-12) {
		t.Fatalf("re-encoded block %v, want %v", mat.Formatted(rebuilt), mat.Formatted(want))
	}
	for _, j := range c.Support[7] {
		ok := false
		for _, f := range from {
			for _, s := range c.Support[f] {
				ok = ok || s == j
			}
		}
		if !ok {
			t.Fatalf("support %v has block %d that none of %v holds", c.Support[7], j, from)
		}
	}
	if _, err := c.Reencode(7, []int{7}, rng); err == nil {
		t.Fatal("re-encoding a device from itself: no error")
	}
}

// TestCodedKSubsets: of the C(8, 4) = 70 4-subsets of 8 replicated devices (blocks
// on devices j and j+4), the 2^4 = 16 that take one copy of each block decode;
// MDS decodes from all C(8, 5) = 56 5-subsets, uncoded from its one 8-subset;
// sampling (limit below C(n, k)) checks exactly limit subsets.
func TestCodedKSubsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		scheme             string
		decodable, subsets int
	}{{"replication", 16, 70}, {"mds", 56, 56}, {"uncoded", 1, 1}} {
		code, _ := New(c.scheme, 8, 1)
		if d, n := code.KSubsets(5000, rng); d != c.decodable || n != c.subsets {
			t.Errorf("%s: %d of %d k-subsets decode, want %d of %d", c.scheme, d, n, c.decodable, c.subsets)
		}
	}
	code, _ := New("mds", 8, 1)
	if d, n := code.KSubsets(10, rng); d != 10 || n != 10 {
		t.Errorf("mds sampled: %d of %d, want 10 of 10", d, n)
	}
}
