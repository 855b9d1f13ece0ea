package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFilterGradGroups checks the filter gradient over k groups of samples
// laid end to end against each group's own filter gradient: from naiveConv
// on stride-1 geometries (the shifted GEMMs, and the transposed form from 32
// output channels), from convFilterGrad on the group alone on the others
// (im2col: stride 2, pointwise). float64: only the summation order differs.
func TestFilterGradGroups(t *testing.T) {
	cases := append([]convGeom(nil), shiftCases...)
	for i := range cases {
		cases[i].setOut()
	}
	for _, g := range []convGeom{
		{c: 3, h: 9, w: 7, k: 3, stride: 2, pad: 1, oc: 5},
		{c: 4, h: 5, w: 5, k: 1, stride: 1, pad: 0, oc: 6},
		{c: 2, h: 6, w: 6, k: 3, stride: 2, pad: 0, oc: 40},
	} {
		g.oh = (g.h+2*g.pad-g.k)/g.stride + 1
		g.ow = (g.w+2*g.pad-g.k)/g.stride + 1
		cases = append(cases, g)
	}
	ws := NewWorkspace(3)
	for ci, base := range cases {
		for _, k := range []int{2, 3, 5} {
			for _, ng := range []int{1, 3, 8} {
				g := base
				g.n = k * ng
				rng := rand.New(rand.NewPCG(uint64(ci), uint64(10*k+ng)))
				in, out := g.c*g.h*g.w, g.oc*g.oh*g.ow
				x, dy := randSlice(rng, g.n*in), randSlice(rng, g.n*out)
				nw := g.oc * g.c * g.k * g.k
				dws := make([][]float64, k)
				for i := range dws {
					dws[i] = make([]float64, nw)
				}
				convFilterGrad(&g, ws, x, dy, dws)
				for gi, got := range dws {
					one := g
					one.n = ng
					xg, dyg := x[gi*ng*in:][:ng*in], dy[gi*ng*out:][:ng*out]
					var want []float64
					if g.stride == 1 {
						_, _, want = naiveConv(&one, xg, make([]float64, nw), dyg)
					} else {
						want = make([]float64, nw)
						convFilterGrad(&one, ws, xg, dyg, [][]float64{want})
					}
					var scale float64
					for _, v := range want {
						scale = math.Max(scale, math.Abs(v))
					}
					for i := range want {
						if d := math.Abs(got[i] - want[i]); d > 1e-12*scale {
							t.Fatalf("%+v, %d groups of %d: group %d's dw[%d] = %v, its own %v", base, k, ng, gi, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestLinearBackwardGroups checks a linear layer's weight and bias gradients
// over k groups of rows against linearBackward on each group alone; dz and dx
// do not depend on the grouping.
func TestLinearBackwardGroups(t *testing.T) {
	const in, out, rg, k = 37, 70, 5, 3
	rng := rand.New(rand.NewPCG(1, 2))
	for _, relu := range []bool{false, true} {
		rows := k * rg
		x, w, y, dy := randSlice(rng, rows*in), randSlice(rng, in*out), randSlice(rng, rows*out), randSlice(rng, rows*out)
		st := &linearState{ws: NewWorkspace(2), rows: rows, in: in, out: out, relu: relu, needDX: true}
		dz, dx := make([]float64, rows*out), make([]float64, rows*in)
		dws, dbs := make([][]float64, k), make([][]float64, k)
		for i := range k {
			dws[i], dbs[i] = make([]float64, in*out), make([]float64, out)
		}
		linearBackward(st, x, w, y, dy, dz, dws, dbs, dx)
		for g := range k {
			one := &linearState{ws: NewWorkspace(1), rows: rg, in: in, out: out, relu: relu, needDX: true}
			dz1, dx1, dw1, db1 := make([]float64, rg*out), make([]float64, rg*in), make([]float64, in*out), make([]float64, out)
			linearBackward(one, x[g*rg*in:][:rg*in], w, y[g*rg*out:][:rg*out], dy[g*rg*out:][:rg*out], dz1, [][]float64{dw1}, [][]float64{db1}, dx1)
			for _, c := range []struct {
				name      string
				got, want []float64
			}{{"dW", dws[g], dw1}, {"db", dbs[g], db1}, {"dz", dz[g*rg*out:][:rg*out], dz1}, {"dx", dx[g*rg*in:][:rg*in], dx1}} {
				for i, v := range c.want {
					if math.Abs(c.got[i]-v) > 1e-12*math.Max(1, math.Abs(v)) {
						t.Fatalf("relu %v, group %d: %s[%d] = %v, the group alone gives %v", relu, g, c.name, i, c.got[i], v)
					}
				}
			}
		}
	}
}
