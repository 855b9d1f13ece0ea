package train

import (
	"math"
	"unsafe"

	"github.com/gradwire/gradwire/dist"
	"github.com/gradwire/gradwire/optim"
)

// Sharpness-aware minimization (Foret et al., ICLR 2021) wraps the gradient
// computation of every logical worker: the gradient g at w on the worker's
// batch gives the ascent step e = rho g / ||g||, and the worker's gradient
// becomes the one at w + e on the same batch, which the exchange and the
// configured optimizer then use as usual. Each worker perturbs with its own
// gradient (m-sharpness with m the worker batch, as the paper's distributed
// version and its code do). Adaptive SAM (Kwon et al., ICML 2021) scales the
// region per weight: e = rho T^2 g / ||T g|| with T = |w| + eta on the
// convolution and linear weights, 1 elsewhere.

// samReplica is a replica whose Step returns the SAM gradient.
type samReplica struct {
	dist.Replica
	rho, eta, decay float64
	adaptive        bool
	decayed         []bool // per value: weight decay applies (added to g before e, as the reference adds it to the loss)
	scaled          []bool // per value: adaptive SAM's T = |w| + eta applies
	saved           []float32
	buffers         [][]float32 // BatchNorm running statistics: the first pass's are kept
	savedBuffers    [][]float32
}

// newSAMReplica wraps r; params are r's parameters (aliasing its Flat) and
// buffers its BatchNorm running statistics.
// decayAll puts biases and BatchNorm parameters under decay too
// (optim.decay_norm_bias).
func newSAMReplica(r dist.Replica, params []optim.Param, buffers [][]float32, rho, eta, decay float64, adaptive, decayAll bool) *samReplica {
	flat := r.Flat()
	s := &samReplica{Replica: r, rho: rho, eta: eta, decay: decay, adaptive: adaptive,
		decayed: make([]bool, len(flat)), scaled: make([]bool, len(flat)), saved: make([]float32, len(flat)), buffers: buffers}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(flat)))
	for _, p := range params {
		off := int((uintptr(unsafe.Pointer(unsafe.SliceData(p.Value))) - base) / 4)
		for i := off; i < off+len(p.Value); i++ {
			s.decayed[i] = !p.NoDecay || decayAll
			s.scaled[i] = !p.NoDecay
		}
	}
	for _, b := range buffers {
		s.savedBuffers = append(s.savedBuffers, make([]float32, len(b)))
	}
	return s
}

// Step computes the SAM gradient into Grad and returns the loss at w (the
// first pass's).
func (s *samReplica) Step(x []float32, y []int32) (float64, error) {
	loss, err := s.Replica.Step(x, y)
	if err != nil {
		return loss, err
	}
	w := s.Flat()
	copy(s.saved, w)
	samPerturb(w, s.Grad(), s.rho, s.eta, s.decay, s.adaptive, s.decayed, s.scaled)
	for i, b := range s.buffers {
		copy(s.savedBuffers[i], b)
	}
	_, err = s.Replica.Step(x, y)
	copy(w, s.saved)
	for i, b := range s.buffers {
		copy(b, s.savedBuffers[i])
	}
	return loss, err
}

// samPerturb moves w to w + e, e = rho T^2 h / ||T h|| with h = g + decay*w on
// the decayed values (T = |w| + eta on the scaled values with adaptive, else
// 1). A zero gradient leaves w where it is.
func samPerturb(w, g []float32, rho, eta, decay float64, adaptive bool, decayed, scaled []bool) {
	h := func(i int) float64 {
		v := float64(g[i])
		if decayed[i] {
			v += decay * float64(w[i])
		}
		return v
	}
	t := func(i int) float64 {
		if adaptive && scaled[i] {
			return math.Abs(float64(w[i])) + eta
		}
		return 1
	}
	var norm float64
	for i := range w {
		th := t(i) * h(i)
		norm += th * th
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		return
	}
	scale := rho / (norm + 1e-12)
	for i := range w {
		ti := t(i)
		// T is read at w before the move: compute e_i first.
		e := scale * ti * ti * h(i)
		w[i] += float32(e)
	}
}
