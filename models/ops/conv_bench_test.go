package ops

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"
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
		fill := func(n int) []float32 { return f32s(randSlice(rng, n)) }
		x, w, dy := fill(g.n*g.c*g.h*g.w), fill(g.oc*g.c*g.k*g.k), fill(g.n*g.oc*g.oh*g.ow)
		y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
		ws := NewWorkspace(1)
		gt := g.transposed()
		// Each product through im2col (unroll -1) or the shifted GEMMs.
		products := []struct {
			name string
			run  func(unroll int)
		}{
			{"fwd", func(unroll int) {
				if unroll < 0 {
					convForward(&g, ws, x, w, y)
					return
				}
				p := forcedPlan[float32](&g, shiftForward, unroll)
				shiftedConv(&p, ws, x, w, false, y)
			}},
			{"dx", func(unroll int) {
				if unroll < 0 {
					convDataGrad(&g, ws, w, dy, dx)
					return
				}
				p := forcedPlan[float32](&gt, shiftForward, unroll)
				shiftedConv(&p, ws, dy, w, true, dx)
			}},
			{"dw", func(unroll int) {
				if unroll < 0 {
					convFilterGrad(&g, ws, x, dy, [][]float32{dw})
					return
				}
				p := forcedPlan[float32](&g, shiftFilterGrad, unroll)
				shiftedFilterGrad(&p, ws, x, dy, [][]float32{dw})
			}},
		}
		for _, mode := range []struct {
			name   string
			unroll int // forcedPlan's, -1 for im2col
		}{{"im2col", -1}, {"u0", 1}, {"u1", 2}, {"u2", 3}} {
			for _, pr := range products {
				b.Run(fmt.Sprintf("c%d_k%d_%dx%d_oc%d/%s/%s", g.c, g.k, g.h, g.w, g.oc, mode.name, pr.name), func(b *testing.B) {
					shiftedConvs = mode.unroll > 0
					defer func() { shiftedConvs = true }()
					defer cpuMetric(b)()
					for b.Loop() {
						pr.run(mode.unroll)
					}
				})
			}
		}
	}
}

// BenchmarkShiftedTaps times ResNet-20's stride-1 forward convolutions on
// Fashion-MNIST (28, 14 and 7 wide; 32 samples, one worker) through each
// way shiftGEMM can sum the taps on this CPU's assembly kernel: one GEMM a
// tap ("pertap"), a taps kernel by image-row segments ("segs"; on a strip
// kernel, one call a segment) and a strip kernel by 16-column strips of the
// padded rows' layout ("flat"), in GFLOP/s of wall-clock time and CPU
// milliseconds per op.
func BenchmarkShiftedTaps(b *testing.B) {
	kern := sgemmAsm
	if kern == nil || kern.taps == nil && kern.tapsStrip == nil {
		b.Skip("no assembly taps kernel on this CPU")
	}
	taps, strip := kern.taps, kern.tapsStrip
	defer func() { kern.taps, kern.tapsStrip = taps, strip }()
	segs := taps
	if segs == nil {
		segs = func(k, nt int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int) {
			strip(k, nt, a, ars, b, offs, bks, c, ldc, mr, n1)
			if n2 > 0 {
				strip(k, nt, a, ars, (*float32)(unsafe.Add(unsafe.Pointer(b), 4*b2)), offs, bks, (*float32)(unsafe.Add(unsafe.Pointer(c), 4*c2)), ldc, mr, n2)
			}
		}
	}
	type mode struct {
		name  string
		taps  tapsFunc
		strip tapsStripFunc
	}
	modes := []mode{{"pertap", nil, nil}, {"segs", segs, nil}}
	if strip != nil {
		modes = append(modes, mode{"flat", nil, strip})
	}
	for _, g0 := range []convGeom{
		{c: 16, h: 28, w: 28, k: 3, stride: 1, pad: 1, oc: 16},
		{c: 32, h: 14, w: 14, k: 3, stride: 1, pad: 1, oc: 32},
		{c: 64, h: 7, w: 7, k: 3, stride: 1, pad: 1, oc: 64},
	} {
		g := g0
		g.n, g.oh, g.ow = 32, g.h, g.w
		rng := rand.New(rand.NewPCG(1, 2))
		x, w := f32s(randSlice(rng, g.n*g.c*g.h*g.w)), f32s(randSlice(rng, g.oc*g.c*g.k*g.k))
		y := make([]float32, g.n*g.oc*g.oh*g.ow)
		ws := NewWorkspace(1)
		flops := 2 * float64(g.n*g.oc*g.oh*g.ow*g.c*g.k*g.k)
		for _, mode := range modes {
			kern.taps, kern.tapsStrip = mode.taps, mode.strip
			p := newShiftPlan[float32](&g, shiftForward)
			b.Run(fmt.Sprintf("c%d_w%d_%s", g.c, g.w, mode.name), func(b *testing.B) {
				done := cpuMetric(b)
				for range b.N {
					shiftedConv(&p, ws, x, w, false, y)
				}
				done()
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkFilterGradDot times the filter gradient of LeNet-5's and
// ResNet-20's stride-1 convolutions (on 28x28 inputs, 32 samples, one
// worker, the op's own plan) with the kernel's dot-product form allowed
// (where useDot takes it) and withheld: the choice useDot makes per shape.
func BenchmarkFilterGradDot(b *testing.B) {
	kern := sgemmAsm
	if kern == nil || kern.dot == nil {
		b.Skip("no dot-product kernel on this CPU")
	}
	dot := kern.dot
	defer func() { kern.dot = dot }()
	for _, g0 := range []convGeom{
		{c: 1, h: 28, w: 28, k: 5, stride: 1, pad: 2, oc: 6},
		{c: 6, h: 14, w: 14, k: 5, stride: 1, pad: 0, oc: 16},
		{c: 16, h: 28, w: 28, k: 3, stride: 1, pad: 1, oc: 16},
		{c: 32, h: 14, w: 14, k: 3, stride: 1, pad: 1, oc: 32},
	} {
		g := g0
		g.n = 32
		g.oh = (g.h+2*g.pad-g.k)/g.stride + 1
		g.ow = (g.w+2*g.pad-g.k)/g.stride + 1
		rng := rand.New(rand.NewPCG(1, 2))
		x, dy := f32s(randSlice(rng, g.n*g.c*g.h*g.w)), f32s(randSlice(rng, g.n*g.oc*g.oh*g.ow))
		dw := make([]float32, g.oc*g.c*g.k*g.k)
		ws := NewWorkspace(1)
		p := newShiftPlan[float32](&g, shiftFilterGrad)
		for _, on := range []bool{true, false} {
			name := fmt.Sprintf("c%d_k%d_%dx%d_oc%d/dot=%v", g.c, g.k, g.h, g.w, g.oc, on)
			b.Run(name, func(b *testing.B) {
				kern.dot = nil
				if on {
					kern.dot = dot
				}
				defer cpuMetric(b)()
				for b.Loop() {
					shiftedFilterGrad(&p, ws, x, dy, [][]float32{dw})
				}
			})
		}
	}
}
