package coded

import (
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// NewUncoded splits the data into k = n blocks, block i on device i, with no
// redundancy: a step needs every device's answer, so a missing device makes
// the step wait for it to come back.
func NewUncoded(n int, _ *rand.Rand) (*Code, error) {
	if n < 1 {
		return nil, fmt.Errorf("coded: uncoded on %d devices, expected at least 1", n)
	}
	c := &Code{Name: "uncoded", N: n, K: n, G: mat.NewDense(n, n, nil)}
	for i := range n {
		c.G.Set(i, i, 1)
		c.Support = append(c.Support, []int{i})
	}
	return c, nil
}
