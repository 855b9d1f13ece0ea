package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
)

func TestGradLinear(t *testing.T) {
	for _, relu := range []bool{false, true} {
		for _, needDX := range []bool{true, false} {
			for _, x := range [][]int{{4, 5}, {1, 7}} {
				t.Run(fmt.Sprintf("%v_relu=%v_dx=%v", x, relu, needDX), func(t *testing.T) {
					gradCheck(t, [][]int{x, {x[1], 3}, {3}}, func(ws *Workspace, in []*G.Node) (*G.Node, error) {
						return Linear(ws, in[0], in[1], in[2], relu, needDX)
					})
				})
			}
		}
	}
}

// TestLinearBlocks: the column blocks of every size cover [0, n) in order,
// each at least linearBlockCols wide and starting on a multiple of it.
func TestLinearBlocks(t *testing.T) {
	for n := 1; n <= 700; n++ {
		for _, perCol := range []int{1, 100, 5000, 1 << 16} {
			p := linearBlocks(n, perCol)
			if p < 1 || p > linearMaxBlocks || (p > 1 && n*perCol < 2*linearBlockWork) {
				t.Fatalf("n %d, %d per column: %d blocks", n, perCol, p)
			}
			next := 0
			for i := range p {
				lo, hi := linearBlock(i, p, n)
				if lo != next || lo%linearBlockCols != 0 || (p > 1 && hi-lo < linearBlockCols) {
					t.Fatalf("n %d, %d blocks: block %d is [%d, %d), expected to start at %d", n, p, i, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("n %d, %d blocks end at %d", n, p, next)
			}
		}
	}
}

// TestLinearMatchesReference runs the layer's forward and backward passes on
// shapes that cut every product into several blocks and compares them with
// the formulas summed in float64 one term at a time (y = relu(x·W + b),
// dz = dy·[y > 0], dW = xᵀ·dz, db = Σ_rows dz, dx = dz·Wᵀ), on 1, 2 and 3
// workers: float32 within the rounding of sums of a few hundred terms, and
// bit for bit the same whatever the number of workers.
func TestLinearMatchesReference(t *testing.T) {
	const rows, in, out = 24, 300, 200
	rng := rand.New(rand.NewPCG(1, 2))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, w, b, dy := vec(rows*in), vec(in*out), vec(out), vec(rows*out)
	if linearBlocks(out, rows*in) < 2 || linearBlocks(in, rows*out) < 2 {
		t.Fatal("the shapes do not split the products into blocks")
	}
	for _, relu := range []bool{false, true} {
		// The reference, in float64.
		wantY, wantDZ := make([]float64, rows*out), make([]float64, rows*out)
		for r := range rows {
			for j := range out {
				acc := float64(b[j])
				for l := range in {
					acc += float64(x[r*in+l]) * float64(w[l*out+j])
				}
				if relu && acc <= 0 {
					acc = 0
				}
				wantY[r*out+j] = acc
				if !relu || acc > 0 {
					wantDZ[r*out+j] = float64(dy[r*out+j])
				}
			}
		}
		wantDW, wantDB, wantDX := make([]float64, in*out), make([]float64, out), make([]float64, rows*in)
		for r := range rows {
			for j := range out {
				d := wantDZ[r*out+j]
				wantDB[j] += d
				for l := range in {
					wantDW[l*out+j] += float64(x[r*in+l]) * d
					wantDX[r*in+l] += d * float64(w[l*out+j])
				}
			}
		}
		var first [][]float32
		for _, workers := range []int{1, 2, 3} {
			st := &linearState{ws: NewWorkspace(workers), rows: rows, in: in, out: out, relu: relu, needDX: true}
			y, dw, db, dx := make([]float32, rows*out), make([]float32, in*out), make([]float32, out), make([]float32, rows*in)
			dz := dy
			if relu {
				dz = make([]float32, rows*out)
			}
			linearForward(st, y, x, w, b)
			linearBackward(st, x, w, y, dy, dz, [][]float32{dw}, [][]float32{db}, dx)
			got := [][]float32{y, dw, db, dx}
			if workers == 1 {
				for i, want := range [][]float64{wantY, wantDW, wantDB, wantDX} {
					// float32 sums of up to 300 products of unit normals:
					// rounding stays well under 1e-4 of the largest value.
					if err := closeTo(got[i], want, 1e-4); err != nil {
						t.Errorf("relu=%v, %s: %v", relu, []string{"y", "dW", "db", "dx"}[i], err)
					}
				}
				first = got
				continue
			}
			for i := range got {
				if !slices.Equal(got[i], first[i]) {
					t.Errorf("relu=%v, %d workers: %s differs from 1 worker's", relu, workers, []string{"y", "dW", "db", "dx"}[i])
				}
			}
		}
	}
}

// closeTo checks |got - want| <= tol·max|want| element-wise.
func closeTo(got []float32, want []float64, tol float64) error {
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= tol*scale) {
			return fmt.Errorf("[%d] = %g, expected %g (difference %.3g, scale %.3g)", i, got[i], w, d, scale)
		}
	}
	return nil
}
