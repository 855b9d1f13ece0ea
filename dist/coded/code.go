// Package coded trains linear models by full-batch gradient descent on devices
// that drop out, with the data coded so that each step's two matrix-vector
// products can be decoded from whichever devices answer: uncoded, replicated,
// MDS-coded and RLNC-coded blocks (Lee et al., IEEE Trans. Inf. Theory 64(3),
// 2018; Lin et al., arXiv 1910.10283).
//
// The gradient of logistic regression and of the linear SVM is X^T r / m +
// lambda w with r an element-wise function of z = X w, so a step is two
// products: z = X w over row blocks of X, the element-wise step at the master,
// then X^T r over row blocks of X^T. Coding applies to the two products only;
// every device stores one coded block of X and one of X^T.
//
// Data placement, which the traffic accounting rests on: source block j (of X
// and of X^T alike) starts on device j, for j < k; devices k..n-1 start
// empty. With k = n this is the setting of Lin et al., every device owning
// one block.
package coded

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// Code says which combination of the k source blocks each of n devices
// stores: row i of the n x k generator G. A device's answer is the same
// combination of the source blocks' products.
type Code struct {
	Name string
	N, K int
	G    *mat.Dense // n x k
	// Support[i] lists, sorted, the source blocks device i combines (the
	// non-zero entries of row i of G): what it must receive to build its block.
	Support [][]int
	// Coefficients is true when device i's row of G travels with its block
	// (4 bytes a coefficient); false when the placement is fixed by the scheme
	// (uncoded, replication) and needs no coefficients.
	Coefficients bool
}

// Constructor builds a scheme's code for n devices, drawing any random
// coefficients and supports from rng.
type Constructor func(n int, rng *rand.Rand) (*Code, error)

// Schemes maps a scheme's name to its constructor (defaults of the design
// notes: replication r = 2, MDS and RLNC at storage about 1.5 times the data,
// RLNC degree ceil((k+1)/2)).
var Schemes = map[string]Constructor{
	"uncoded":     NewUncoded,
	"replication": func(n int, _ *rand.Rand) (*Code, error) { return NewReplication(n, 2) },
	"mds":         func(n int, rng *rand.Rand) (*Code, error) { return NewMDS(n, CodedK(n), rng) },
	"rlnc": func(n int, rng *rand.Rand) (*Code, error) {
		k := CodedK(n)
		return NewRLNC(n, k, RLNCDegree(k), rng)
	},
}

// Names lists the registered schemes in a fixed order: least to most coded.
func Names() []string {
	order := []string{"uncoded", "replication", "mds", "rlnc"}
	var out []string
	for _, n := range order {
		if _, ok := Schemes[n]; ok {
			out = append(out, n)
		}
	}
	for n := range Schemes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// New builds the named scheme's code, its random draws seeded by seed so that
// a run replays exactly.
func New(name string, n int, seed uint64) (*Code, error) {
	ctor, ok := Schemes[name]
	if !ok {
		return nil, fmt.Errorf("coded: scheme %q, expected one of %s", name, strings.Join(Names(), ", "))
	}
	return ctor(n, rand.New(rand.NewPCG(seed, 0x636f6465))) // "code"
}

// CodedK is the number of source blocks of the MDS and RLNC schemes on n
// devices: floor(2n/3), storage n/k of about 1.5 times the data (8 devices:
// k = 5, 1.6 times).
func CodedK(n int) int { return max(1, 2*n/3) }

// RLNCDegree is the default RLNC support size ceil((k+1)/2).
func RLNCDegree(k int) int { return (k + 2) / 2 }

// MaxCondition is the largest condition number of the stacked coefficient
// rows the float64 decoder accepts; worse systems wait for more answers.
const MaxCondition = 1e8

// Status is the outcome of a decoding attempt.
type Status int

const (
	// Decoded: the answering rows have rank k and condition number <= MaxCondition.
	Decoded Status = iota
	// Insufficient: fewer than k answers, or their rows have rank below k.
	Insufficient
	// IllConditioned: rank k, but condition number above MaxCondition.
	IllConditioned
)

func (s Status) String() string {
	switch s {
	case Decoded:
		return "decoded"
	case Insufficient:
		return "insufficient"
	case IllConditioned:
		return "ill-conditioned"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Rows stacks the generator rows of devices, in that order.
func (c *Code) Rows(devices []int) *mat.Dense {
	A := mat.NewDense(len(devices), c.K, nil)
	for i, dv := range devices {
		A.SetRow(i, c.G.RawRowView(dv))
	}
	return A
}

// Check reports whether the answers of devices suffice to decode, and the
// condition number of their stacked rows (+Inf when rank-deficient).
func (c *Code) Check(devices []int) (Status, float64) {
	if len(devices) < c.K {
		return Insufficient, math.Inf(1)
	}
	var svd mat.SVD
	if !svd.Factorize(c.Rows(devices), mat.SVDNone) {
		return Insufficient, math.Inf(1)
	}
	s := svd.Values(nil)
	smax, smin := s[0], s[c.K-1]
	// Numerical rank as LAPACK's gelss decides it: singular values below
	// max(rows, k) * eps * smax are zero.
	if smin <= float64(max(len(devices), c.K))*0x1p-52*smax {
		return Insufficient, math.Inf(1)
	}
	if cond := smax / smin; cond > MaxCondition {
		return IllConditioned, cond
	}
	return Decoded, smax / smin
}

// Decode recovers the k source products Y (k x c, source block j's product in
// row j) from the answers R (one row per device of devices, same order) by
// least squares on the devices' generator rows. Y is nil unless the status is
// Decoded.
func (c *Code) Decode(devices []int, R *mat.Dense) (*mat.Dense, Status) {
	st, _ := c.Check(devices)
	if st != Decoded {
		return nil, st
	}
	var qr mat.QR
	qr.Factorize(c.Rows(devices))
	var Y mat.Dense
	if err := qr.SolveTo(&Y, false, R); err != nil {
		return nil, IllConditioned
	}
	return &Y, Decoded
}

// coefficientBytes is the size of one coefficient on the wire (float32).
const coefficientBytes = 4

// EncodingBytes is the traffic, with devices exchanging blocks directly, that
// builds every device's coded block of one matrix whose source blocks are
// blockBytes each: device i receives every block of its support that it does
// not own (it owns block i when i < k), plus its coefficient vector, 4 bytes a
// coefficient, when the scheme has one. With k = n: a dense code costs
// n(n-1) blocks, degree-d RLNC with each device's own block in its support
// n(d-1).
func (c *Code) EncodingBytes(blockBytes int64) int64 {
	var total int64
	for i, sup := range c.Support {
		for _, j := range sup {
			if j != i {
				total += blockBytes
			}
		}
		if c.Coefficients {
			total += coefficientBytes * int64(len(sup))
		}
	}
	return total
}

// CentralEncodingBytes is the traffic of a central encoder instead: the k
// source blocks up to it, the n coded blocks down (n*D + n*D when k = n). The
// encoder draws the coefficients itself, so none travel. ok is false for
// schemes without coding (uncoded, replication), where a central encoder has
// nothing to compute.
func (c *Code) CentralEncodingBytes(blockBytes int64) (bytes int64, ok bool) {
	if !c.Coefficients {
		return 0, false
	}
	return int64(c.K+c.N) * blockBytes, true
}

// Reencode replaces device's coded block by a random combination of the coded
// blocks that the devices in from hold (RLNC re-encoding: a device that joins
// in place of one that left is rebuilt hop by hop from len(from) neighbours,
// len(from) blocks of traffic, without any source block's owner). It returns
// the combination coefficients a: the new block is sum_l a[l] * block(from[l]),
// and the new row of G is sum_l a[l] * G[from[l]].
func (c *Code) Reencode(device int, from []int, rng *rand.Rand) ([]float64, error) {
	if device < 0 || device >= c.N {
		return nil, fmt.Errorf("coded: re-encode device %d of %d", device, c.N)
	}
	if len(from) == 0 {
		return nil, fmt.Errorf("coded: re-encode device %d from no devices", device)
	}
	row := make([]float64, c.K)
	a := make([]float64, len(from))
	var sup []int
	for l, f := range from {
		if f < 0 || f >= c.N || f == device {
			return nil, fmt.Errorf("coded: re-encode device %d from device %d", device, f)
		}
		a[l] = rng.NormFloat64()
		for j, g := range c.G.RawRowView(f) {
			row[j] += a[l] * g
		}
		for _, j := range c.Support[f] {
			if !slices.Contains(sup, j) {
				sup = append(sup, j)
			}
		}
	}
	slices.Sort(sup)
	c.G.SetRow(device, row)
	c.Support[device] = sup
	c.Coefficients = true
	return a, nil
}

// KSubsets counts, over the k-subsets of the n devices, those whose answers
// alone decode: all C(n, k) of them for an MDS code, fewer for sparse or
// replicated codes. It enumerates them when there are at most limit,
// otherwise checks limit subsets drawn at random from rng.
func (c *Code) KSubsets(limit int, rng *rand.Rand) (decodable, checked int) {
	try := func(devs []int) {
		checked++
		if st, _ := c.Check(devs); st == Decoded {
			decodable++
		}
	}
	if binomial(c.N, c.K) > float64(limit) {
		for range limit {
			devs := rng.Perm(c.N)[:c.K]
			slices.Sort(devs)
			try(devs)
		}
		return decodable, checked
	}
	devs := seq(c.K)
	for {
		try(devs)
		// next k-subset in lexicographic order
		i := c.K - 1
		for i >= 0 && devs[i] == c.N-c.K+i {
			i--
		}
		if i < 0 {
			return decodable, checked
		}
		devs[i]++
		for j := i + 1; j < c.K; j++ {
			devs[j] = devs[j-1] + 1
		}
	}
}

func binomial(n, k int) float64 {
	b := 1.0
	for i := range k {
		b = b * float64(n-i) / float64(i+1)
	}
	return b
}

func seq(k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = i
	}
	return s
}
