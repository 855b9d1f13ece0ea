package ops

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// convBenchShapes are the stride-1 convolutions of ResNet-20 and LeNet-5.
var convBenchShapes = []convGeom{
	{c: 3, h: 32, w: 32, k: 3, stride: 1, pad: 1, oc: 16},
	{c: 16, h: 32, w: 32, k: 3, stride: 1, pad: 1, oc: 16},
	{c: 32, h: 16, w: 16, k: 3, stride: 1, pad: 1, oc: 32},
	{c: 64, h: 8, w: 8, k: 3, stride: 1, pad: 1, oc: 64},
	{c: 1, h: 28, w: 28, k: 5, stride: 1, pad: 2, oc: 6},
	{c: 6, h: 14, w: 14, k: 5, stride: 1, pad: 0, oc: 16},
}

// cpuMetric locks the benchmark to its thread and, when the returned
// function runs, reports the thread's CPU time per op (Linux), which other
// processes on a shared machine do not inflate.
func cpuMetric(b *testing.B) func() {
	runtime.LockOSThread()
	cpu0 := threadCPUTime()
	return func() {
		if cpu := threadCPUTime() - cpu0; cpu > 0 {
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "ms-cpu/op")
		}
		runtime.UnlockOSThread()
	}
}

// BenchmarkConvShapes times the forward, data and filter gradient of each
// shape on one worker, through im2col and through each unrolling of the
// shifted GEMMs.
func BenchmarkConvShapes(b *testing.B) {
	for _, g0 := range convBenchShapes {
		g := g0
		g.n = 16
		g.oh = (g.h+2*g.pad-g.k)/g.stride + 1
		g.ow = (g.w+2*g.pad-g.k)/g.stride + 1
		rng := rand.New(rand.NewPCG(1, 2))
		fill := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		x, w, dy := fill(g.n*g.c*g.h*g.w), fill(g.oc*g.c*g.k*g.k), fill(g.n*g.oc*g.oh*g.ow)
		y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
		ws := NewWorkspace(1)
		// The data gradient's own geometry, for the shifted form.
		gt := convGeom{n: g.n, c: g.oc, h: g.oh, w: g.ow, k: g.k, stride: 1, pad: g.k - 1 - g.pad, oc: g.c, oh: g.h, ow: g.w}
		for _, mode := range []string{"im2col", "u0", "u1", "u2"} {
			plan := func(g *convGeom, kind int) shiftPlan {
				p := newShiftPlan[float32](g, kind)
				switch mode {
				case "u0":
					p = p.with(1, 1)
				case "u1":
					p = p.with(1, g.k)
				case "u2":
					p = p.with(g.k, g.k)
				}
				return p
			}
			name := fmt.Sprintf("c%d_k%d_%dx%d_oc%d/%s", g.c, g.k, g.h, g.w, g.oc, mode)
			b.Run(name+"/fwd", func(b *testing.B) {
				defer cpuMetric(b)()
				for b.Loop() {
					if mode == "im2col" {
						shiftedConvs = false
						convForward(&g, ws, x, w, y)
						shiftedConvs = true
						continue
					}
					p := plan(&g, shiftForward)
					shiftedConv(&p, ws, x, w, false, y)
				}
			})
			b.Run(name+"/dx", func(b *testing.B) {
				defer cpuMetric(b)()
				for b.Loop() {
					if mode == "im2col" {
						shiftedConvs = false
						convDataGrad(&g, ws, w, dy, dx)
						shiftedConvs = true
						continue
					}
					p := plan(&gt, shiftForward)
					shiftedConv(&p, ws, dy, w, true, dx)
				}
			})
			b.Run(name+"/dw", func(b *testing.B) {
				defer cpuMetric(b)()
				for b.Loop() {
					if mode == "im2col" {
						shiftedConvs = false
						convFilterGrad(&g, ws, x, dy, dw)
						shiftedConvs = true
						continue
					}
					p := plan(&g, shiftFilterGrad)
					shiftedFilterGrad(&p, ws, x, dy, dw)
				}
			})
		}
	}
}
