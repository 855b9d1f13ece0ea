package dist

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// approxRel fails t unless got is within 1e-12 relative of want (absolute when want
// is zero): the formulas are a handful of float64 operations, so only rounding
// separates them from the hand-derived values.
func approxRel(t *testing.T, name string, got, want float64) {
	t.Helper()
	tol := 1e-12 * math.Abs(want)
	if want == 0 {
		tol = 1e-12
	}
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.17g, want %.17g", name, got, want)
	}
}

// tmRing10 is the reference network of the derivations below:
// alpha = 50 us = 5e-5 s, B = 10e9/8 = 1.25e9 bytes/s.
var tmRing10 = Network{BandwidthGbps: 10, LatencyUs: 50, Topology: TopologyRing}

func TestRingAllReduce(t *testing.T) {
	// 4 workers, 100 MB: 2*3*5e-5 + 2*3/4 * 1e8/1.25e9 = 0.0003 + 1.5*0.08 = 0.1203 s.
	approxRel(t, "4 workers 100MB 10G", tmRing10.Cost(OpAllReduce, 1e8, 4), 0.1203)
	// Same at 1 Gbit/s (B = 1.25e8): 0.0003 + 1.5*0.8 = 1.2003 s.
	approxRel(t, "4 workers 100MB 1G", tmRing10.At(1).Cost(OpAllReduce, 1e8, 4), 1.2003)
	// At 100 Gbit/s (B = 1.25e10): 0.0003 + 1.5*0.008 = 0.0123 s.
	approxRel(t, "4 workers 100MB 100G", tmRing10.At(100).Cost(OpAllReduce, 1e8, 4), 0.0123)
	// 2 workers, 1 MB: 2*1*5e-5 + 2*1/2 * 1e6/1.25e9 = 1e-4 + 8e-4 = 9e-4 s.
	approxRel(t, "2 workers 1MB", tmRing10.Cost(OpAllReduce, 1e6, 2), 9e-4)
	// Latency only: 8 workers, 0 bytes, 5 us: 2*7*5e-6 = 7e-5 s.
	lat := Network{BandwidthGbps: 10, LatencyUs: 5, Topology: TopologyRing}
	approxRel(t, "8 workers empty", lat.Cost(OpAllReduce, 0, 8), 7e-5)
	// Bandwidth only: 8 workers, 100 MB, no latency: 2*7/8 * 0.08 = 0.14 s.
	approxRel(t, "8 workers no latency", Network{BandwidthGbps: 10, Topology: TopologyRing}.Cost(OpAllReduce, 1e8, 8), 0.14)
}

func TestAllGather(t *testing.T) {
	// 4 workers, 1 MB each, after a gather of the 4-byte lengths:
	// (3*5e-5 + 3*4/1.25e9) + (3*5e-5 + 3*1e6/1.25e9) = 3e-4 + 2.4000096e-3 s.
	approxRel(t, "4 workers 1MB", tmRing10.Cost(OpAllGather, 1e6, 4), 3e-4+2.4000096e-3)
	// 16 workers, 1 MB each: 2*15*5e-5 + 15*(1e6+4)/1.25e9 = 1.5e-3 + 0.012000048 s,
	// linear in N-1 where the ring all-reduce of the same size is almost flat.
	approxRel(t, "16 workers 1MB", tmRing10.Cost(OpAllGather, 1e6, 16), 1.5e-3+0.012000048)
}

func TestParameterServer(t *testing.T) {
	// All-reduce of 100 MB on 4 workers: 2*5e-5 + 2*4*1e8/1.25e9 = 1e-4 + 0.64 = 0.6401 s.
	// All-gather of 1 MB each on 4 workers, after one of the 4-byte lengths:
	// (2*5e-5 + (16 + 64)/1.25e9) + (2*5e-5 + (4e6 + 16e6)/1.25e9)
	// = 2e-4 + 0.016000064 s.
	ps := tmRing10
	ps.Topology = TopologyPS
	approxRel(t, "Cost ps allreduce", ps.Cost(OpAllReduce, 1e8, 4), 0.6401)
	approxRel(t, "Cost ps allgather", ps.Cost(OpAllGather, 1e6, 4), 2e-4+0.016000064)
	approxRel(t, "Cost ring allreduce", tmRing10.Cost(OpAllReduce, 1e8, 4), 0.1203)
}

func TestSingleWorkerHasNoCommunication(t *testing.T) {
	// With one machine (or a nonsensical zero) nothing crosses the network, even
	// though alpha > 0.
	for _, w := range []int{1, 0, -3} {
		for _, topo := range AlgorithmNames() {
			n := tmRing10
			n.Topology = topo
			for _, got := range []float64{
				n.Cost(OpAllReduce, 1e8, w), n.Cost(OpAllGather, 1e8, w),
				n.CommSeconds(StepTraffic{AllReduceBytes: []int64{1e8}, AllGatherBytes: []int64{1e6}}, w),
			} {
				if got != 0 {
					t.Errorf("%s, %d workers: cost %v, want 0", topo, w, got)
				}
			}
		}
	}
}

func TestCommSeconds(t *testing.T) {
	var tr StepTraffic
	tr.Add(OpAllReduce, 1e8)
	tr.Add(OpAllGather, 1e6)
	tr.Add(OpAllGather, 1e6)
	if len(tr.AllReduceBytes) != 1 || len(tr.AllGatherBytes) != 2 {
		t.Fatalf("Add: %+v", tr)
	}
	// Ring, 4 workers: 0.1203 + 2*2.7000096e-3 s.
	approxRel(t, "ring", tmRing10.CommSeconds(tr, 4), 0.1203+2*2.7000096e-3)
	// PS, 4 workers: 0.6401 + 2*0.016200064 s.
	ps := tmRing10
	ps.Topology = TopologyPS
	approxRel(t, "ps", ps.CommSeconds(tr, 4), 0.6401+2*0.016200064)
	// Splitting 100 MB into 10 calls of 10 MB keeps the bandwidth term (0.12 s)
	// but pays the latency ten times: 10*0.0003 + 0.12 = 0.123 s.
	split := StepTraffic{AllReduceBytes: make([]int64, 10)}
	for i := range split.AllReduceBytes {
		split.AllReduceBytes[i] = 1e7
	}
	approxRel(t, "10 calls", tmRing10.CommSeconds(split, 4), 0.123)
	approxRel(t, "empty", tmRing10.CommSeconds(StepTraffic{}, 4), 0)
}

func TestPredict(t *testing.T) {
	tr := StepTraffic{AllReduceBytes: []int64{1e8}}

	// Not pipelined: compute 0.2 s, comm 0.1203 s (TestRingAllReduce), step 0.3203 s;
	// one machine would take 4*0.2 = 0.8 s, so speed-up 0.8/0.3203 ~ 2.4977.
	p := tmRing10.Predict(0.2, tr, 4, false)
	approxRel(t, "comm", p.CommSeconds, 0.1203)
	approxRel(t, "step", p.StepSeconds, 0.3203)
	approxRel(t, "speed-up", p.SpeedUp, 0.8/0.3203)
	if p.Workers != 4 || p.ComputeSeconds != 0.2 || p.Pipelined {
		t.Errorf("fields: %+v", p)
	}

	// Pipelined, compute-bound: step max(0.2, 0.1203) = 0.2 s, speed-up 0.8/0.2 = 4
	// (communication fully hidden: linear scaling).
	p = tmRing10.Predict(0.2, tr, 4, true)
	approxRel(t, "pipelined step", p.StepSeconds, 0.2)
	approxRel(t, "pipelined speed-up", p.SpeedUp, 4)
	if !p.Pipelined {
		t.Error("Pipelined not recorded")
	}

	// Pipelined, communication-bound: compute 0.05 s, step max(0.05, 0.1203) = 0.1203 s,
	// speed-up 4*0.05/0.1203 = 0.2/0.1203 ~ 1.6625.
	p = tmRing10.Predict(0.05, tr, 4, true)
	approxRel(t, "comm-bound step", p.StepSeconds, 0.1203)
	approxRel(t, "comm-bound speed-up", p.SpeedUp, 0.2/0.1203)

	// At 1 Gbit/s the same step is network-bound: comm 1.2003 s, step 1.4003 s,
	// speed-up 0.8/1.4003 ~ 0.571: slower than one machine.
	p = tmRing10.At(1).Predict(0.2, tr, 4, false)
	approxRel(t, "1G step", p.StepSeconds, 1.4003)
	approxRel(t, "1G speed-up", p.SpeedUp, 0.8/1.4003)

	// One machine: no communication, step = compute, speed-up exactly 1.
	for _, pipe := range []bool{false, true} {
		p = tmRing10.Predict(0.2, tr, 1, pipe)
		approxRel(t, "N=1 comm", p.CommSeconds, 0)
		approxRel(t, "N=1 step", p.StepSeconds, 0.2)
		approxRel(t, "N=1 speed-up", p.SpeedUp, 1)
	}

	// Zero workers is read as one.
	if p = tmRing10.Predict(0.2, tr, 0, false); p.Workers != 1 || p.SpeedUp != 1 {
		t.Errorf("0 workers: %+v", p)
	}

	// Nothing to do at all: speed-up is N (the free-communication limit), not NaN.
	if p = tmRing10.Predict(0, StepTraffic{}, 4, false); p.SpeedUp != 4 {
		t.Errorf("empty step: speed-up %v, want 4", p.SpeedUp)
	}
}

func TestAt(t *testing.T) {
	n := tmRing10.At(100)
	if n.BandwidthGbps != 100 || n.LatencyUs != 50 || n.Topology != TopologyRing {
		t.Errorf("At(100) = %+v", n)
	}
	if tmRing10.BandwidthGbps != 10 {
		t.Error("At modified its receiver")
	}
}

func TestValidate(t *testing.T) {
	for _, n := range []Network{
		tmRing10,
		{BandwidthGbps: 1, LatencyUs: 0, Topology: TopologyPS},
		{BandwidthGbps: 0.001, LatencyUs: 1e6, Topology: TopologyRing},
	} {
		if err := n.Validate(); err != nil {
			t.Errorf("%+v: unexpected error %v", n, err)
		}
	}

	// Each bad network must produce an error naming the key, the value and
	// what is expected.
	for _, c := range []struct {
		n    Network
		want []string
	}{
		{Network{0, 50, "ring"}, []string{"network.bandwidth_gbps", "= 0", "> 0"}},
		{Network{-1, 50, "ring"}, []string{"network.bandwidth_gbps", "= -1", "> 0"}},
		{Network{math.NaN(), 50, "ring"}, []string{"network.bandwidth_gbps", "NaN"}},
		{Network{math.Inf(1), 50, "ring"}, []string{"network.bandwidth_gbps", "+Inf", "finite"}},
		{Network{10, -5, "ring"}, []string{"network.latency_us", "= -5", ">= 0"}},
		{Network{10, math.NaN(), "ring"}, []string{"network.latency_us", "NaN"}},
		{Network{10, 50, "torus"}, []string{"network.topology", `"torus"`, "dbtree, ps, ps-duplex, ps-sharded, rd, rhd, ring, tree"}},
		{Network{10, 50, ""}, []string{"network.topology", `""`}},
		// All problems are reported at once.
		{Network{0, -1, "mesh"}, []string{"network.bandwidth_gbps", "network.latency_us", "network.topology"}},
	} {
		err := c.n.Validate()
		if err == nil {
			t.Errorf("%+v: no error", c.n)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not contain %q", c.n, err, w)
			}
		}
	}
}

func TestExpectedMaxGaussian(t *testing.T) {
	approxRel(t, "N=1", ExpectedMaxGaussian(1, 2), 0)
	approxRel(t, "N=0", ExpectedMaxGaussian(0, 2), 0)
	// N=4, sigma=2: 2*sqrt(2 ln 4) = 2*sqrt(4 ln 2) = 4*sqrt(ln 2) ~ 3.3302.
	approxRel(t, "N=4", ExpectedMaxGaussian(4, 2), 4*math.Sqrt(math.Ln2))
	// ln 2981 ~ 8.0000, so sqrt(2 ln N) ~ 4: a range check on a large N.
	if g := ExpectedMaxGaussian(2981, 1); g < 3.99 || g > 4.01 {
		t.Errorf("N=2981: %v, want ~4", g)
	}
}

func TestExpectedMaxExponential(t *testing.T) {
	approxRel(t, "N=0", ExpectedMaxExponential(0, 1), 0)
	approxRel(t, "H_1", ExpectedMaxExponential(1, 1), 1)
	approxRel(t, "H_2", ExpectedMaxExponential(2, 1), 1.5)
	// H_4 = 1 + 1/2 + 1/3 + 1/4 = (12+6+4+3)/12 = 25/12; scaled by a 0.3 s mean.
	approxRel(t, "0.3*H_4", ExpectedMaxExponential(4, 0.3), 0.3*25.0/12)
	// H_10 = 7381/2520.
	approxRel(t, "H_10", ExpectedMaxExponential(10, 1), 7381.0/2520)
}

// Re-evaluating one measured run at three bandwidths: 8 workers, 100 MB of
// float32 gradients (25M parameters) all-reduced once per step, 0.2 s of compute.
func ExampleNetwork_Predict() {
	net := Network{BandwidthGbps: 10, LatencyUs: 50, Topology: TopologyRing}
	if err := net.Validate(); err != nil {
		panic(err)
	}
	traffic := StepTraffic{AllReduceBytes: []int64{100e6}}
	for _, gbps := range []float64{1, 10, 100} {
		p := net.At(gbps).Predict(0.2, traffic, 8, false)
		q := net.At(gbps).Predict(0.2, traffic, 8, true)
		fmt.Printf("%3g Gbit/s: comm %.4f s, step %.4f s, speed-up %.2f (pipelined %.2f)\n",
			gbps, p.CommSeconds, p.StepSeconds, p.SpeedUp, q.SpeedUp)
	}
	// Output:
	//   1 Gbit/s: comm 1.4007 s, step 1.6007 s, speed-up 1.00 (pipelined 1.14)
	//  10 Gbit/s: comm 0.1407 s, step 0.3407 s, speed-up 4.70 (pipelined 8.00)
	// 100 Gbit/s: comm 0.0147 s, step 0.2147 s, speed-up 7.45 (pipelined 8.00)
}

// TestLinkBytes checks the bytes on the busiest link against hand counts, and
// that they are Cost's bandwidth term: Cost with no latency equals
// LinkBytes / B for every collective and topology.
func TestLinkBytes(t *testing.T) {
	ring := Network{BandwidthGbps: 10, Topology: TopologyRing}
	ps := Network{BandwidthGbps: 10, Topology: TopologyPS}
	// Ring all-reduce of 800 B on 8 workers: 7 chunks of 100 B in the
	// reduce-scatter and 7 in the all-gather leave each worker = 1400 B.
	approxRel(t, "ring allreduce", ring.LinkBytes(OpAllReduce, 800, 8), 1400)
	// Ring all-gather of 100 B each on 8 workers: the 7 other payloads = 700 B,
	// after their 7 lengths of 4 B = 728 B.
	approxRel(t, "ring allgather", ring.LinkBytes(OpAllGather, 100, 8), 728)
	// Server, 4 workers, 100 B: 4 pushes + 4 pulls = 800 B; gathered: 4 x 100
	// in, 4 x 400 out = 2000 B, plus the lengths (4 x 4 in, 4 x 16 out) = 2080 B.
	approxRel(t, "ps allreduce", ps.LinkBytes(OpAllReduce, 100, 4), 800)
	approxRel(t, "ps allgather", ps.LinkBytes(OpAllGather, 100, 4), 2080)
	approxRel(t, "one worker", ring.LinkBytes(OpAllGather, 100, 1), 0)
	for _, name := range AlgorithmNames() {
		n := Network{BandwidthGbps: 10, Topology: name}
		for _, k := range []Op{OpAllReduce, OpAllGather} {
			for _, w := range []int{2, 5, 64} {
				approxRel(t, fmt.Sprintf("%s %v N=%d", n.Topology, k, w), n.LinkBytes(k, 12345, w)/n.bytesPerSecond(), n.Cost(k, 12345, w))
			}
		}
	}
	// A step: a dense all-reduce of 800 B and a gathered 100 B payload on 8 workers.
	var st StepTraffic
	st.Add(OpAllReduce, 800)
	st.Add(OpAllGather, 100)
	approxRel(t, "step", ring.StepLinkBytes(st, 8), 2128)
}

// TestAlgorithmsWorkedExample checks every algorithm against the times worked
// by hand for N = 4, S = 100 MB (1e8 B), 10 GbE (beta = 0.8 ns/B), alpha = 50
// us (lg 4 = 2):
//
//	ring          2*3*alpha + 1.5*S*beta    = 0.0003 + 0.12  = 0.1203
//	rhd           2*2*alpha + 1.5*S*beta    = 0.0002 + 0.12  = 0.1202
//	rd            2*alpha   + 2*S*beta      = 0.0001 + 0.16  = 0.1601
//	tree          2*2*(alpha + S*beta)      = 4*(5e-5 + 0.08) = 0.3202
//	dbtree        2*2*alpha + 2*S*beta      = 0.0002 + 0.16  = 0.1602
//	ps            2*(alpha + 4*S*beta)      = 2*(5e-5 + 0.32) = 0.6401
//	ps-duplex     alpha + 4*S*beta          = 0.32005
//	ps-sharded    2*(alpha + S*beta)        = 0.1601
//
// and the short message (4096 B) where the order reverses: rd 2*5e-5 +
// 2*4096*0.8e-9 = 106.5536 us, rhd 4*5e-5 + 1.5*4096*0.8e-9 = 204.9152 us,
// ring 6*5e-5 + the same = 304.9152 us; at N = 64 (lg 6) ring 126*5e-5 +
// 2*63/64*0.08 = 0.1638 s and ps 2*(5e-5 + 64*0.08) = 10.2401 s.
func TestAlgorithmsWorkedExample(t *testing.T) {
	want := map[string]float64{"ring": 0.1203, "rhd": 0.1202, "rd": 0.1601, "tree": 0.3202, "dbtree": 0.1602,
		"ps": 0.6401, "ps-duplex": 0.32005, "ps-sharded": 0.1601}
	if len(want) != len(Algorithms) {
		t.Fatalf("%d algorithms, %d worked values: every algorithm needs one", len(Algorithms), len(want))
	}
	for name, w := range want {
		n := tmRing10
		n.Topology = name
		approxRel(t, name, n.Cost(OpAllReduce, 1e8, 4), w)
	}
	short := map[string]float64{"rd": 106.5536e-6, "rhd": 204.9152e-6, "ring": 304.9152e-6}
	for name, w := range short {
		n := tmRing10
		n.Topology = name
		approxRel(t, name+" 4 KiB", n.Cost(OpAllReduce, 4096, 4), w)
	}
	ps := tmRing10
	ps.Topology = TopologyPS
	approxRel(t, "ring N=64", tmRing10.Cost(OpAllReduce, 1e8, 64), 126*5e-5+2*63.0/64*0.08)
	approxRel(t, "ps N=64", ps.Cost(OpAllReduce, 1e8, 64), 10.2401)
	// Non-powers of two round the rounds up: N = 5 has lg 3.
	rd := tmRing10
	rd.Topology = "rd"
	approxRel(t, "rd N=5", rd.Cost(OpAllReduce, 1e8, 5), 3*5e-5+3*0.08)
	// Pipelined width 2 with C = 0.2 s: compute + ring 0.3203 s a step, against
	// max(0.2, 0.1203) = 0.2 s, 1.60x.
	var st StepTraffic
	st.Add(OpAllReduce, 1e8)
	sync, piped := tmRing10.Predict(0.2, st, 4, false), tmRing10.Predict(0.2, st, 4, true)
	approxRel(t, "sync step", sync.StepSeconds, 0.3203)
	approxRel(t, "pipelined step", piped.StepSeconds, 0.2)
	approxRel(t, "pipelining gain", sync.StepSeconds/piped.StepSeconds, 1.6015)
}
