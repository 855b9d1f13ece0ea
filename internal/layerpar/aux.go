package layerpar

import (
	"fmt"

	"github.com/gradwire/gradwire/compress"
)

// Filter is the downsampling filter on the auxiliary variables: Down is an
// s x s average pool per channel (windows cut by the border average over the
// cells they hold), Up the nearest-neighbour upsampling back to the feature
// map's size. Down(Up(v)) = v, so a stored v loses nothing; Up(Down(z)) keeps
// z's block means. With s = 1 both are copies.
type Filter struct {
	C, H, W int // one example's feature map
	S       int // factor per side
}

// DownH and DownW are the stored map's spatial size: ceil(H/S), ceil(W/S).
func (f Filter) DownH() int { return (f.H + f.S - 1) / f.S }

// DownW is ceil(W/S).
func (f Filter) DownW() int { return (f.W + f.S - 1) / f.S }

// Full is one example's feature map size C*H*W.
func (f Filter) Full() int { return f.C * f.H * f.W }

// Size is one example's stored size C*ceil(H/S)*ceil(W/S).
func (f Filter) Size() int { return f.C * f.DownH() * f.DownW() }

// Down writes the average pools of n examples' maps src (n*Full values) into
// dst (n*Size values), scaled by scale.
func (f Filter) Down(dst, src []float32, n int, scale float32) {
	full, size := f.Full(), f.Size()
	if f.S == 1 {
		for i := range dst[:n*size] {
			dst[i] = scale * src[i]
		}
		return
	}
	dh, dw := f.DownH(), f.DownW()
	for e := range n {
		s, d := src[e*full:(e+1)*full], dst[e*size:(e+1)*size]
		for c := range f.C {
			plane := s[c*f.H*f.W : (c+1)*f.H*f.W]
			out := d[c*dh*dw : (c+1)*dh*dw]
			for by := range dh {
				y0, y1 := by*f.S, min((by+1)*f.S, f.H)
				for bx := range dw {
					x0, x1 := bx*f.S, min((bx+1)*f.S, f.W)
					var sum float32
					for y := y0; y < y1; y++ {
						for x := x0; x < x1; x++ {
							sum += plane[y*f.W+x]
						}
					}
					out[by*dw+bx] = scale * sum / float32((y1-y0)*(x1-x0))
				}
			}
		}
	}
}

// Up writes the nearest-neighbour upsampling of n stored examples src
// (n*Size values) into dst (n*Full values).
func (f Filter) Up(dst, src []float32, n int) {
	full, size := f.Full(), f.Size()
	if f.S == 1 {
		copy(dst[:n*full], src[:n*size])
		return
	}
	dh, dw := f.DownH(), f.DownW()
	for e := range n {
		s, d := src[e*size:(e+1)*size], dst[e*full:(e+1)*full]
		for c := range f.C {
			in := s[c*dh*dw : (c+1)*dh*dw]
			plane := d[c*f.H*f.W : (c+1)*f.H*f.W]
			for y := range f.H {
				row := in[(y/f.S)*dw:]
				for x := range f.W {
					plane[y*f.W+x] = row[x/f.S]
				}
			}
		}
	}
}

// Aux is the state of one stage boundary k (the output of stage k, input of
// stage k+1) for every training example, in the filter's stored size: the
// auxiliary variables v_k (float32 or half precision), the multipliers mu_k
// (augmented Lagrangian only, float32, kept by the owner, stage k), and the
// two per-round measurements the u-step reads, D F_k(u_{k-1}) (from stage k)
// and D g_{k+1} (the per-example gradient of stage k+1's objective with
// respect to its input u_k, from stage k+1).
type Aux struct {
	F      Filter
	N      int // examples
	fp16   bool
	v32    []float32
	v16    []uint16
	mu     []float32 // nil for the penalty method
	df, dg []float32
}

// NewAux allocates boundary state for n examples.
func NewAux(f Filter, n int, fp16, multipliers bool) (*Aux, error) {
	if f.C < 1 || f.H < 1 || f.W < 1 || f.S < 1 {
		return nil, fmt.Errorf("auxiliary variables: bad filter %+v", f)
	}
	a := &Aux{F: f, N: n, fp16: fp16}
	m := n * f.Size()
	if fp16 {
		a.v16 = make([]uint16, m)
	} else {
		a.v32 = make([]float32, m)
	}
	if multipliers {
		a.mu = make([]float32, m)
	}
	a.df, a.dg = make([]float32, m), make([]float32, m)
	return a, nil
}

// ValueBytes is the bytes of one stored or sent value: 2 in half precision, else 4.
func (a *Aux) ValueBytes() int64 {
	if a.fp16 {
		return 2
	}
	return 4
}

// ExampleBytes is the bytes of one example's auxiliary variable as stored and sent.
func (a *Aux) ExampleBytes() int64 { return int64(a.F.Size()) * a.ValueBytes() }

// StoredBytes is the memory the boundary's auxiliary variables take on their owner.
func (a *Aux) StoredBytes() int64 { return int64(a.N) * a.ExampleBytes() }

// V reads example i's stored auxiliary variable into dst (Size values).
func (a *Aux) V(i int, dst []float32) {
	m := a.F.Size()
	if a.fp16 {
		for j, h := range a.v16[i*m : (i+1)*m] {
			dst[j] = compress.F32FromF16(h)
		}
		return
	}
	copy(dst, a.v32[i*m:(i+1)*m])
}

// SetV stores example i's auxiliary variable (rounded to half precision with
// aux_fp16).
func (a *Aux) SetV(i int, src []float32) {
	m := a.F.Size()
	if a.fp16 {
		for j, x := range src[:m] {
			a.v16[i*m+j] = compress.F16FromF32(x)
		}
		return
	}
	copy(a.v32[i*m:(i+1)*m], src[:m])
}

// Mu is example i's multiplier (nil for the penalty method).
func (a *Aux) Mu(i int) []float32 {
	if a.mu == nil {
		return nil
	}
	m := a.F.Size()
	return a.mu[i*m : (i+1)*m]
}

// DF is example i's slot for D F_k(u_{k-1}).
func (a *Aux) DF(i int) []float32 { m := a.F.Size(); return a.df[i*m : (i+1)*m] }

// DG is example i's slot for D g_{k+1}.
func (a *Aux) DG(i int) []float32 { m := a.F.Size(); return a.dg[i*m : (i+1)*m] }

// Input writes the upsampled auxiliary variables U v of the examples idx
// into dst (len(idx)*Full values), using scratch (Size values per example).
func (a *Aux) Input(idx []int, dst, scratch []float32) {
	m, full := a.F.Size(), a.F.Full()
	for e, i := range idx {
		a.V(i, scratch[:m])
		a.F.Up(dst[e*full:(e+1)*full], scratch[:m], 1)
	}
}

// Target writes stage k's target T = U(v + mu/rho) of the examples idx into
// dst (U v for the penalty method).
func (a *Aux) Target(idx []int, rho float64, dst, scratch []float32) {
	m, full := a.F.Size(), a.F.Full()
	inv := float32(1 / rho)
	for e, i := range idx {
		s := scratch[:m]
		a.V(i, s)
		if mu := a.Mu(i); mu != nil {
			for j := range s {
				s[j] += inv * mu[j]
			}
		}
		a.F.Up(dst[e*full:(e+1)*full], s, 1)
	}
}

// RecordF stores D F of the examples idx from the stage's output out.
func (a *Aux) RecordF(idx []int, out []float32) {
	full := a.F.Full()
	for e, i := range idx {
		a.F.Down(a.DF(i), out[e*full:(e+1)*full], 1, 1)
	}
}

// RecordG stores D g of the examples idx from the next stage's input
// gradient grad, times scale (B times the objective's weight: the per-example
// gradient of a batch-mean objective). With aux_fp16 the message is rounded
// to half precision, as it would travel.
func (a *Aux) RecordG(idx []int, grad []float32, scale float32) {
	full := a.F.Full()
	for e, i := range idx {
		d := a.DG(i)
		a.F.Down(d, grad[e*full:(e+1)*full], 1, scale)
		if a.fp16 {
			for j, x := range d {
				d[j] = compress.F32FromF16(compress.F16FromF32(x))
			}
		}
	}
}
