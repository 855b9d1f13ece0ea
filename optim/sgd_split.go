package optim

import "github.com/gradwire/gradwire/internal/par"

// sgdUpdate is one tensor's SGD update, run over ranges of its elements on the
// process's helper goroutines (par.Default). The update is element-wise, so
// the split changes no bit of the result.
type sgdUpdate struct {
	kernel   sgdKernel
	w, g, b  []float32
	lr, wd   float64
	m        float64
	nesterov bool
	fn       par.Func // run, bound once: a step then allocates nothing
}

type sgdKernel uint8

const (
	kernelPlain sgdKernel = iota
	kernelMomentum
	kernelDecayMomentum
)

const (
	// sgdSplitMin is the smallest tensor split over the helpers: a hand-off
	// costs about a microsecond, what the update of ~10^4 values takes.
	sgdSplitMin = 1 << 15
	// sgdBlock is the unit of the split, so every range but the last is a
	// whole number of vector iterations.
	sgdBlock = 64
)

func (u *sgdUpdate) run(_, lo, hi int) {
	lo *= sgdBlock
	hi = min(hi*sgdBlock, len(u.w))
	w, g := u.w[lo:hi], u.g[lo:hi]
	switch u.kernel {
	case kernelPlain:
		sgdPlain(w, g, u.lr, u.wd)
	case kernelMomentum:
		sgdMomentum(w, g, u.b[lo:hi], u.lr, u.wd, u.m, u.nesterov)
	default:
		sgdDecayMomentum(w, g, u.b[lo:hi], u.lr, u.wd, u.m, u.nesterov)
	}
}

// apply runs the update set in u's fields and drops its slices.
func (u *sgdUpdate) apply() {
	blocks := (len(u.w) + sgdBlock - 1) / sgdBlock
	if len(u.w) < sgdSplitMin {
		u.run(0, 0, blocks)
	} else {
		if u.fn == nil {
			u.fn = u.run
		}
		// The update comes once a step, tensor after tensor: the helpers
		// need not poll past it (other replicas may be computing).
		p := par.Default()
		p.RunLinger(blocks, p.Workers(), u.fn, par.LingerBurst)
	}
	u.w, u.g, u.b = nil, nil, nil
}
