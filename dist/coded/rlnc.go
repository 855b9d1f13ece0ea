package coded

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// NewRLNC is random linear network coding over the reals: device i combines a
// support of d source blocks with N(0, 1) coefficients. A device that owns a
// source block (i < k) keeps it in its support and draws the other d-1 at
// random, so it receives d-1 blocks; a device without one draws all d. Sparse
// supports save encoding traffic against a dense code (d-1 blocks a device
// instead of k-1) at the price of decodability: some k-subsets of rows are
// singular, and the decoder waits for more answers.
func NewRLNC(n, k, d int, rng *rand.Rand) (*Code, error) {
	if k < 1 || k > n || d < 1 || d > k {
		return nil, fmt.Errorf("coded: RLNC n = %d, k = %d, degree %d, expected 1 <= d <= k <= n", n, k, d)
	}
	c := &Code{Name: "rlnc", N: n, K: k, G: mat.NewDense(n, k, nil), Coefficients: true}
	for i := range n {
		var sup []int
		if i < k {
			sup = append([]int{i}, randomSupport(rng, k, d-1, i)...)
		} else {
			sup = randomSupport(rng, k, d, -1)
		}
		slices.Sort(sup)
		for _, j := range sup {
			c.G.Set(i, j, rng.NormFloat64())
		}
		c.Support = append(c.Support, sup)
	}
	return c, nil
}

// randomSupport draws d distinct blocks of k uniformly, never block skip.
func randomSupport(rng *rand.Rand, k, d, skip int) []int {
	var pool []int
	for j := range k {
		if j != skip {
			pool = append(pool, j)
		}
	}
	rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
	return slices.Clone(pool[:d])
}
