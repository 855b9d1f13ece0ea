package dist

// Counted wraps one member of a Collective and counts the bytes that member
// puts on the wire: its payload per operation, which is what the cluster time
// model charges (an algorithm's own traffic factor, such as a ring's
// 2(N-1)/N, is the model's business). Per successful call:
//
//	AllReduce of L floats   4L
//	AllGather               len(payload)
//	Broadcast of L floats   4L at the root, 0 elsewhere
//	Barrier                 0
//
// A member of a group of one sends nothing. Like the member it wraps, a
// Counted is used from one goroutine, so its counter needs no atomics; sum
// the members' counts (for instance with an AllGather) for the run's total.
type Counted struct {
	c     Collective
	bytes int64
}

var _ Collective = (*Counted)(nil)

// NewCounted wraps c.
func NewCounted(c Collective) *Counted { return &Counted{c: c} }

// Bytes is the number of bytes counted since creation or the last Reset.
func (c *Counted) Bytes() int64 { return c.bytes }

// Reset sets the count to zero.
func (c *Counted) Reset() { c.bytes = 0 }

func (c *Counted) add(n int) {
	if c.c.Size() > 1 {
		c.bytes += int64(n)
	}
}

func (c *Counted) Rank() int { return c.c.Rank() }
func (c *Counted) Size() int { return c.c.Size() }

func (c *Counted) AllReduce(buf []float32) error {
	if err := c.c.AllReduce(buf); err != nil {
		return err
	}
	c.add(4 * len(buf))
	return nil
}

func (c *Counted) AllGather(payload []byte) ([][]byte, error) {
	all, err := c.c.AllGather(payload)
	if err == nil {
		c.add(len(payload))
	}
	return all, err
}

func (c *Counted) Broadcast(buf []float32, root int) error {
	if err := c.c.Broadcast(buf, root); err != nil {
		return err
	}
	if c.c.Rank() == root {
		c.add(4 * len(buf))
	}
	return nil
}

func (c *Counted) Barrier() error { return c.c.Barrier() }

// Close closes the wrapped member.
func (c *Counted) Close() error { return c.c.Close() }
