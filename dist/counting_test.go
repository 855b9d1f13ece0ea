package dist

import "testing"

func TestCounted(t *testing.T) {
	for _, group := range map[string][]Collective{"local": newLocal(t, 3), "hierarchical": newHier(t, 3, 1)} {
		counted := make([]Collective, len(group))
		for r, m := range group {
			counted[r] = NewCounted(m)
		}
		noErrors(t, each(t, counted, func(m Collective) error {
			r := m.Rank()
			if err := m.AllReduce(make([]float32, 10)); err != nil { // 40 bytes
				return err
			}
			if _, err := m.AllGather(make([]byte, r)); err != nil { // r bytes
				return err
			}
			if err := m.Broadcast(make([]float32, 5), 1); err != nil { // 20 bytes at rank 1
				return err
			}
			return m.Barrier() // nothing
		}))
		for r, m := range counted {
			c := m.(*Counted)
			want := int64(40 + r)
			if r == 1 {
				want += 20
			}
			if got := c.Bytes(); got != want {
				t.Errorf("rank %d counted %d bytes, want %d", r, got, want)
			}
			c.Reset()
			if c.Bytes() != 0 {
				t.Errorf("rank %d: Reset left %d bytes", r, c.Bytes())
			}
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	}

	// A lone member puts nothing on the wire; failed calls count nothing.
	c := NewCounted(newLocal(t, 1)[0])
	if err := c.AllReduce(make([]float32, 10)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.AllReduce(make([]float32, 10)); err == nil {
		t.Fatal("AllReduce on a closed member succeeded")
	}
	if c.Bytes() != 0 {
		t.Fatalf("a group of one counted %d bytes", c.Bytes())
	}
}
