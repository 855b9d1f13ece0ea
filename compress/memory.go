package compress

// Memory is error feedback (the residual accumulation of Seide et al. 2014 and
// Lin et al. 2018): what a worker did not send is added to its next gradient.
// It keeps the compensated gradient of the step, so that the invariant
// compensated == sent + residual can be checked.
type Memory struct {
	residual    []float32
	compensated []float32
}

// NewMemory is error feedback for a packed buffer of n values.
func NewMemory(n int) *Memory {
	return &Memory{residual: make([]float32, n), compensated: make([]float32, n)}
}

// Compensate adds the residual to g in place (g becomes the compensated gradient).
func (m *Memory) Compensate(g []float32) {
	for i, e := range m.residual {
		g[i] += e
	}
	copy(m.compensated, g)
}

// Update keeps what was not sent: residual = compensated - sent.
func (m *Memory) Update(sent []float32) {
	for i, c := range m.compensated {
		m.residual[i] = c - sent[i]
	}
}

// Residual is the current residual (aliased).
func (m *Memory) Residual() []float32 { return m.residual }

// Compensated is the last compensated gradient (aliased).
func (m *Memory) Compensated() []float32 { return m.compensated }

// ErrorFeedback is implemented by compressors that keep a residual. After a
// step, Compensated() == Sent() + Residual() element-wise: Sent is what this
// worker's contribution decompresses to (for PowerSGD, the approximation every
// worker applies).
type ErrorFeedback interface {
	Compensated() []float32
	Sent() []float32
	Residual() []float32
}
