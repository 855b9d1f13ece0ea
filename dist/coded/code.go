// Package coded trains linear models by gradient descent on devices that
// drop out, with the data partitions coded so that the gradient can be
// decoded from the devices that answer: uncoded, replicated, MDS-coded and
// RLNC-coded partitions (Lee et al., IEEE Trans. Inf. Theory 2018; Lin et
// al., arXiv 1910.10283). The gradient of logistic regression and of the
// linear SVM is two matrix-vector products, z = X w and X^T r, with an
// element-wise step between them at the master; coding applies to the two
// products, each device holding one coded block of X (row blocks) and one of
// X^T (feature blocks).
package coded

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Code says which combination of the k source blocks each of n devices
// stores: row i of the n x k generator G. A device's result is the same
// combination of the blocks' products.
type Code struct {
	Name string
	N, K int
	G    *mat.Dense // n x k
	// Support[i] lists the source blocks device i combines (the non-zero
	// entries of row i): what it must receive to build its coded block.
	Support [][]int
}

// Codes maps a scheme's name to its constructor: n devices, the seeded
// random stream for its coefficients.
var Codes = map[string]func(n int, r *rand.Rand) (*Code, error){
	"uncoded":     uncoded,
	"replication": replication,
	"mds":         mds,
	"rlnc":        rlnc,
}

// Names lists Codes' keys, sorted.
func Names() []string {
	out := make([]string, 0, len(Codes))
	for n := range Codes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// uncoded: k = n blocks, one per device; any lost device loses its block.
func uncoded(n int, _ *rand.Rand) (*Code, error) {
	c := &Code{Name: "uncoded", N: n, K: n, G: mat.NewDense(n, n, nil)}
	for i := range n {
		c.G.Set(i, i, 1)
		c.Support = append(c.Support, []int{i})
	}
	return c, nil
}

// replication: k = n/2 blocks, each on two devices (i and i + k).
func replication(n int, _ *rand.Rand) (*Code, error) {
	if n < 2 || n%2 != 0 {
		return nil, fmt.Errorf("coded: replication on %d devices, expected an even number >= 2", n)
	}
	k := n / 2
	c := &Code{Name: "replication", N: n, K: k, G: mat.NewDense(n, k, nil)}
	for i := range n {
		c.G.Set(i, i%k, 1)
		c.Support = append(c.Support, []int{i % k})
	}
	return c, nil
}

// mdsK is the number of source blocks of the coded schemes: n/1.5 rounded
// down (storage 1.5 times the data), at least 1.
func mdsK(n int) int { return max(1, n*2/3) }

// mds: a random Gaussian generator; every k x k submatrix is invertible with
// probability 1, and far better conditioned than a Vandermonde matrix over the
// reals.
func mds(n int, r *rand.Rand) (*Code, error) {
	k := mdsK(n)
	c := &Code{Name: "mds", N: n, K: k, G: mat.NewDense(n, k, nil)}
	for i := range n {
		for j := range k {
			c.G.Set(i, j, r.NormFloat64())
		}
		c.Support = append(c.Support, seq(k))
	}
	return c, nil
}

// rlnc: random linear network coding over the reals: device i combines a
// random support of d = ceil((k+1)/2) blocks with Gaussian coefficients, so it
// needs only d blocks to build its own (the saving in encoding traffic), at
// the price of decodability: some k-subsets of devices are singular, and the
// decoder waits for more.
func rlnc(n int, r *rand.Rand) (*Code, error) {
	k := mdsK(n)
	d := (k + 2) / 2
	c := &Code{Name: "rlnc", N: n, K: k, G: mat.NewDense(n, k, nil)}
	for i := range n {
		sup := r.Perm(k)[:d]
		slices.Sort(sup)
		for _, j := range sup {
			c.G.Set(i, j, r.NormFloat64())
		}
		c.Support = append(c.Support, sup)
	}
	return c, nil
}

func seq(k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = i
	}
	return s
}

// MaxCondition is the largest condition number of the stacked coefficient
// rows the decoder accepts (float64): worse systems wait for more devices.
const MaxCondition = 1e8

// Decode recovers the k source products Y (k x c: block j's product in row
// j) from the results R (one row per answering device, in the order of
// devices) by least squares on the devices' generator rows. ok is false when
// those rows do not reach rank k or their condition number exceeds
// MaxCondition.
func (c *Code) Decode(devices []int, R *mat.Dense) (Y *mat.Dense, ok bool) {
	if len(devices) < c.K {
		return nil, false
	}
	A := mat.NewDense(len(devices), c.K, nil)
	for i, dv := range devices {
		A.SetRow(i, mat.Row(nil, dv, c.G))
	}
	var svd mat.SVD
	if !svd.Factorize(A, mat.SVDNone) {
		return nil, false
	}
	vals := svd.Values(nil)
	if vals[len(vals)-1] == 0 || vals[0]/vals[len(vals)-1] > MaxCondition {
		return nil, false
	}
	var qr mat.QR
	qr.Factorize(A)
	Y = &mat.Dense{}
	if err := qr.SolveTo(Y, false, R); err != nil {
		return nil, false
	}
	return Y, true
}

// EncodingBytes is the traffic that builds every device's coded block when
// source block j of blockBytes bytes starts on device j (the data live on
// the first k devices) and devices exchange blocks directly: device i
// receives each block of its support it does not hold, plus its coefficient
// row (4 bytes a coefficient). Uncoded devices keep their own block.
func (c *Code) EncodingBytes(blockBytes int64) int64 {
	var total int64
	for i, sup := range c.Support {
		for _, j := range sup {
			if j != i {
				total += blockBytes
			}
		}
		if c.Name == "mds" || c.Name == "rlnc" {
			total += 4 * int64(len(sup))
		}
	}
	return total
}

// CentralEncodingBytes is the traffic of a central encoder instead: the k
// source blocks up to it, the n coded blocks down.
func (c *Code) CentralEncodingBytes(blockBytes int64) int64 {
	return int64(c.K+c.N) * blockBytes
}

// condition is the 2-norm condition number of A (used by tests).
func condition(A mat.Matrix) float64 {
	var svd mat.SVD
	if !svd.Factorize(A, mat.SVDNone) {
		return math.Inf(1)
	}
	v := svd.Values(nil)
	return v[0] / v[len(v)-1]
}
