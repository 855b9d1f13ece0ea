package dist

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Float64Mean averages float64 values over all members (model.precision
// float64) through AllGather, which every backend has: each member sends its
// 8-byte values and adds everyone's in rank order, so every member gets the
// same bits and the result does not depend on the backend's reduction order.
type Float64Mean struct {
	bufs [2][]byte // alternated: AllGather may lend the payload until the next call
	flip int
}

// Mean replaces v, on every member, with the element-wise mean over all
// members (same length everywhere).
func (s *Float64Mean) Mean(c Collective, v []float64) error {
	n := c.Size()
	if n == 1 {
		return nil
	}
	b := s.bufs[s.flip][:0]
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	s.bufs[s.flip] = b
	s.flip ^= 1
	all, err := c.AllGather(b)
	if err != nil {
		return err
	}
	for rank, p := range all {
		if len(p) != 8*len(v) {
			return fmt.Errorf("dist: float64 mean: worker %d sent %d bytes, expected %d", rank, len(p), 8*len(v))
		}
	}
	for i := range v {
		var sum float64
		for _, p := range all {
			sum += math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
		}
		v[i] = sum / float64(n)
	}
	return nil
}
