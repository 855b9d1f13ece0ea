package optim

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// relTol is the relative tolerance of hand-worked float32 results: a few float32
// roundings (about 6e-8 each) per step stay well inside it.
const relTol = 1e-6

// near reports whether got is within relTol of want, relative to |want|.
func near(got, want float64) bool {
	return math.Abs(got-want) <= relTol*math.Abs(want)
}

// stepCase is a few optimizer steps on tiny tensors with hand-worked results.
type stepCase struct {
	cfg       Config
	params    []Param              // initial values; Grad is filled from grads
	grads     [][][]float32        // [step][param] gradient
	want      [][][]float64        // [step][param] values after the step
	wantState map[string][]float64 // buffers after the last step (those listed)
}

func (c stepCase) run(t *testing.T) {
	t.Helper()
	opt, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	params := make([]Param, len(c.params))
	for i, p := range c.params {
		params[i] = p
		params[i].Value = append([]float32(nil), p.Value...)
		params[i].Grad = make([]float32, len(p.Value))
	}
	for s := range c.grads {
		for i := range params {
			copy(params[i].Grad, c.grads[s][i])
		}
		if err := opt.Step(params, 0.1); err != nil {
			t.Fatalf("step %d: %v", s+1, err)
		}
		for i, p := range params {
			for j, got := range p.Value {
				if want := c.want[s][i][j]; !near(float64(got), want) {
					t.Errorf("step %d: %s[%d] = %.9g, want %.9g", s+1, p.Name, j, got, want)
				}
			}
		}
	}
	st := opt.State()
	if st.Step != int64(len(c.grads)) {
		t.Errorf("State().Step = %d, want %d", st.Step, len(c.grads))
	}
	for key, want := range c.wantState {
		got, ok := st.Buffers[key]
		if !ok {
			t.Errorf("state has no %s; keys: %v", key, keys(st.Buffers))
			continue
		}
		for j := range want {
			if !near(float64(got[j]), want[j]) {
				t.Errorf("state %s[%d] = %.9g, want %.9g", key, j, got[j], want[j])
			}
		}
	}
}

func keys(m map[string][]float32) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// wantFieldError checks that err is a *FieldError for key whose message names the key.
func wantFieldError(t *testing.T, err error, key string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *FieldError for %s", err, key)
	}
	if fe.Key != key || !strings.HasPrefix(err.Error(), key+": ") {
		t.Errorf("error %q names %s, want %s", err, fe.Key, key)
	}
}

// wantErrorContaining checks that err is non-nil and mentions every part.
func wantErrorContaining(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}
