package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveConv computes, straight from the definition of a cross-correlation
// with zero padding, y = conv(x, w), dx = ∂(Σ y·dy)/∂x and dw = ∂(Σ y·dy)/∂w
// for a stride-1 geometry g: every (output, tap) pair visited once.
func naiveConv(g *convGeom, x, w, dy []float64) (y, dx, dw []float64) {
	y = make([]float64, g.n*g.oc*g.oh*g.ow)
	dx = make([]float64, len(x))
	dw = make([]float64, len(w))
	for s := range g.n {
		for o := range g.oc {
			for oy := range g.oh {
				for ox := range g.ow {
					yi := ((s*g.oc+o)*g.oh+oy)*g.ow + ox
					for c := range g.c {
						for a := range g.k {
							for b := range g.k {
								iy, ix := oy-g.pad+a, ox-g.pad+b
								if iy < 0 || iy >= g.h || ix < 0 || ix >= g.w {
									continue
								}
								xi := ((s*g.c+c)*g.h+iy)*g.w + ix
								wi := ((o*g.c+c)*g.k+a)*g.k + b
								y[yi] += w[wi] * x[xi]
								dx[xi] += w[wi] * dy[yi]
								dw[wi] += dy[yi] * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return y, dx, dw
}

// shiftCases are stride-1 geometries: ResNet's 3×3 padding 1, LeNet's 5×5
// with padding 2 and 0, padding k-1 (the data gradient then needs no
// padding), non-square images, channel counts that select each unrolling,
// row lengths that the taps kernel's tiles cover two rows at a time, one or
// across rows, and output channels enough for filterGradTransposed.
var shiftCases = []convGeom{
	{n: 3, c: 3, h: 6, w: 5, k: 3, pad: 1, oc: 4},
	{n: 2, c: 16, h: 5, w: 7, k: 3, pad: 1, oc: 9},
	{n: 2, c: 2, h: 7, w: 6, k: 5, pad: 2, oc: 3},
	{n: 2, c: 13, h: 6, w: 6, k: 5, pad: 0, oc: 5},
	{n: 1, c: 2, h: 4, w: 5, k: 3, pad: 2, oc: 3},
	{n: 5, c: 1, h: 8, w: 8, k: 5, pad: 2, oc: 6},
	// Rows of 17 to 32 values (one row a tile of the taps kernel) and past
	// 32 (tiles across rows).
	{n: 2, c: 4, h: 3, w: 20, k: 3, pad: 1, oc: 9},
	{n: 1, c: 2, h: 3, w: 37, k: 3, pad: 1, oc: 3},
	// 32 output channels and more: the filter gradient taken transposed.
	{n: 2, c: 5, h: 4, w: 6, k: 3, pad: 1, oc: 33},
}

func (g *convGeom) setOut() {
	g.stride = 1
	g.oh = g.h + 2*g.pad - g.k + 1
	g.ow = g.w + 2*g.pad - g.k + 1
}

// runShifted computes y, dx and dw with the shifted GEMMs, every plan
// unrolled as (ni, nj) (0: the plan's own choice).
// forcedPlan is newShiftPlan's plan for g with the unrolling forced: 0 the
// plan's own choice, 1 none, 2 rows (c, kj), 3 full.
func forcedPlan[T elem](g *convGeom, kind, unroll int) shiftPlan {
	p := newShiftPlan[T](g, kind)
	switch unroll {
	case 1:
		p = p.with(1, 1)
	case 2:
		p = p.with(1, g.k)
	case 3:
		p = p.with(g.k, g.k)
	}
	return p
}

func runShifted[T elem](g convGeom, ws *Workspace, unroll int, x, w, dy []T) (y, dx, dw []T) {
	plan := func(g *convGeom, kind int) shiftPlan { return forcedPlan[T](g, kind, unroll) }
	y, dx, dw = make([]T, len(dy)), make([]T, len(x)), make([]T, len(w))
	p := plan(&g, shiftForward)
	shiftedConv(&p, ws, x, w, false, y)
	p = plan(&g, shiftFilterGrad)
	shiftedFilterGrad(&p, ws, x, dy, [][]T{dw})
	gt, ok := g.dataGradGeom()
	if !ok {
		panic(fmt.Sprintf("%+v: no data-gradient geometry", g))
	}
	pt := plan(&gt, shiftForward)
	shiftedConv(&pt, ws, dy, w, true, dx)
	return y, dx, dw
}

// TestShiftedConvMatchesNaive checks the forward, data and filter gradient of
// every unrolling against naiveConv in float64 (only the summation order
// differs, so 1e-12 relative).
func TestShiftedConvMatchesNaive(t *testing.T) {
	for _, g := range shiftCases {
		g.setOut()
		rng := rand.New(rand.NewPCG(5, uint64(g.c)))
		x := randSlice(rng, g.n*g.c*g.h*g.w)
		w := randSlice(rng, g.oc*g.c*g.k*g.k)
		dy := randSlice(rng, g.n*g.oc*g.oh*g.ow)
		wy, wdx, wdw := naiveConv(&g, x, w, dy)
		for unroll := range 4 {
			for _, workers := range []int{1, 3} {
				t.Run(fmt.Sprintf("n%d_c%d_%dx%d_k%d_p%d_oc%d/unroll%d/workers%d", g.n, g.c, g.h, g.w, g.k, g.pad, g.oc, unroll, workers), func(t *testing.T) {
					y, dx, dw := runShifted(g, NewWorkspace(workers), unroll, x, w, dy)
					for _, c := range []struct {
						name      string
						got, want []float64
					}{{"y", y, wy}, {"dx", dx, wdx}, {"dw", dw, wdw}} {
						for i := range c.want {
							if d := math.Abs(c.got[i] - c.want[i]); !(d <= 1e-12*(1+math.Abs(c.want[i]))) {
								t.Fatalf("%s[%d] = %v, expected %v", c.name, i, c.got[i], c.want[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestShiftedConvFloat32 checks the float32 results, on the assembly GEMM
// (and its taps kernel) where the CPU has one, against naiveConv in float64
// within float32 rounding (sums of at most 19·36 products of unit normals:
// 1e-4 relative to the largest value) with every unrolling, and that they
// are the same to the bit on 1, 2 and 5 workers.
func TestShiftedConvFloat32(t *testing.T) {
	for _, g := range shiftCases {
		g.n = 19 // more samples than reduceChunks, not a multiple of it
		g.setOut()
		rng := rand.New(rand.NewPCG(7, uint64(g.c)))
		x64, w64, dy64 := randSlice(rng, g.n*g.c*g.h*g.w), randSlice(rng, g.oc*g.c*g.k*g.k), randSlice(rng, g.n*g.oc*g.oh*g.ow)
		x, w, dy := f32s(x64), f32s(w64), f32s(dy64)
		// The reference takes the float32-rounded inputs.
		wy, wdx, wdw := naiveConv(&g, f64s(x), f64s(w), f64s(dy))
		for unroll := range 4 {
			y, dx, dw := runShifted(g, NewWorkspace(1), unroll, x, w, dy)
			for _, c := range []struct {
				name string
				got  []float32
				want []float64
			}{{"y", y, wy}, {"dx", dx, wdx}, {"dw", dw, wdw}} {
				scale := 0.0
				for _, v := range c.want {
					scale = max(scale, math.Abs(v))
				}
				for i, v := range c.want {
					if d := math.Abs(float64(c.got[i]) - v); !(d <= 1e-4*scale) {
						t.Fatalf("%+v unroll %d: %s[%d] = %v, expected %v", g, unroll, c.name, i, c.got[i], v)
					}
				}
			}
		}
		y1, dx1, dw1 := runShifted(g, NewWorkspace(1), 0, x, w, dy)
		for _, workers := range []int{2, 5} {
			y, dx, dw := runShifted(g, NewWorkspace(workers), 0, x, w, dy)
			if !slices.Equal(y, y1) || !slices.Equal(dx, dx1) || !slices.Equal(dw, dw1) {
				t.Errorf("%+v: %d workers differ from 1", g, workers)
			}
		}
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
