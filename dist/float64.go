package dist

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Float64Sum all-reduces float64 values (model.precision float64) through
// AllGather, which every backend has: each member sends its 8-byte values and
// adds everyone's in rank order, so every member gets the same bits and the
// sum does not depend on the backend's reduction order.
type Float64Sum struct {
	bufs [2][]byte // alternated: AllGather may lend the payload until the next call
	flip int
}

// AllReduce replaces v, on every member, with the element-wise sum over all
// members (same length everywhere); it returns the bytes this member sent.
func (s *Float64Sum) AllReduce(c Collective, v []float64) (int64, error) {
	if c.Size() == 1 {
		return 0, nil
	}
	b := s.bufs[s.flip][:0]
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	s.bufs[s.flip] = b
	s.flip ^= 1
	all, err := c.AllGather(b)
	if err != nil {
		return 0, err
	}
	for rank, p := range all {
		if len(p) != 8*len(v) {
			return 0, fmt.Errorf("dist: float64 all-reduce: worker %d sent %d bytes, expected %d", rank, len(p), 8*len(v))
		}
	}
	for i := range v {
		var sum float64
		for _, p := range all {
			sum += math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
		}
		v[i] = sum
	}
	return int64(len(b)), nil
}
