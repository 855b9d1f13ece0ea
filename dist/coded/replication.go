package coded

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// NewReplication splits the data into k = n/r blocks and stores block j on
// the r devices j, j+k, ..., j+(r-1)k. It survives any r-1 losses of a block's
// copies, not r.
func NewReplication(n, r int) (*Code, error) {
	if r < 1 || n < r || n%r != 0 {
		return nil, fmt.Errorf("coded: replication r = %d on %d devices, expected a multiple of r devices", r, n)
	}
	k := n / r
	c := &Code{Name: "replication", N: n, K: k, G: mat.NewDense(n, k, nil)}
	for i := range n {
		c.G.Set(i, i%k, 1)
		c.Support = append(c.Support, []int{i % k})
	}
	return c, nil
}
