package train

import (
	"math"
	"testing"
)

// TestTimeModelRoundsAtTheirCollectives checks summary.json's link bytes per
// step against hand formulas on a 4-worker ring. topk all-gathers its payload
// P: (N-1) P. ScaleCom all-gathers the leader's indices (4 sum(k) bytes from
// one worker of N, so 4 sum(k)/N on average) and all-reduces 4 sum(k) bytes
// of values, so P = 4 sum(k) (N+1)/N and the link carries
// (N-1) 4 sum(k)/N + 2(N-1)/N 4 sum(k). The dense biases add 2(N-1)/N D, and
// each all-gather the (N-1) 4-byte lengths of the others' payloads.
// Splitting ScaleCom's P evenly over its two rounds (the old accounting)
// gives 1.5 P + 0.75 P = 2.25 P instead of 1.35 P and fails.
func TestTimeModelRoundsAtTheirCollectives(t *testing.T) {
	const n = 4.0
	for _, tc := range []struct {
		name string
		sets []string
		link func(p float64) float64 // compressed link bytes from the compressed payload
		// gathered is the all-gather the predictions time: the largest payload
		// any worker sent (top-k: all equal; ScaleCom: the leader's indices,
		// not their mean over the workers).
		gathered func(p float64) float64
	}{
		{"topk", []string{"compress.name=topk"}, func(p float64) float64 { return (n-1)*p + (n-1)*4 }, func(p float64) float64 { return p }},
		{"scalecom", []string{"compress.name=scalecom", "compress.scalecom.warmup_epochs=0"}, func(p float64) float64 {
			k4 := p * n / (n + 1)
			return (n-1)*k4/n + 2*(n-1)/n*k4 + (n-1)*4
		}, func(p float64) float64 { return p * n / (n + 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig(t, "mlp", append([]string{"dist.workers=4", "train.epochs=1", "compress.min_size=0",
				"compress.density=0.05"}, tc.sets...)...)
			s := runCfg(t, cfg, t.TempDir(), false)
			tm := s.TimeModel
			if tm == nil {
				t.Fatal("no time model in the summary")
			}
			if s.CompressionRatioSteady <= 1 {
				t.Fatalf("steady ratio %v: nothing compressed", s.CompressionRatioSteady)
			}
			// The biases travel dense: bytes per step minus the compressed payload.
			dense := biasBytes(cfg.Model.Hidden, 10)
			p := float64(tm.BytesPerWorkerStep) - dense
			want := 2*(n-1)/n*dense + tc.link(p)
			if got := float64(tm.LinkBytesPerStep); math.Abs(got-want) > 4 {
				t.Errorf("link bytes per step %v, want %.1f (payload %.1f, dense %.1f)", got, want, p, dense)
			}
			if len(tm.AllGatherBytes) != 1 || math.Abs(float64(tm.AllGatherBytes[0])-tc.gathered(p)) > 2 {
				t.Errorf("all-gather timed at %v bytes, want %.1f", tm.AllGatherBytes, tc.gathered(p))
			}
			t.Logf("%s: %d B sent per worker-step, %d B per link-step", tc.name, tm.BytesPerWorkerStep, tm.LinkBytesPerStep)
		})
	}
}

// biasBytes is the float32 bytes of an mlp's biases, its only 1-D tensors
// (the ones that travel dense with compress.min_size 0).
func biasBytes(hidden []int, classes int) float64 {
	b := 4 * float64(classes)
	for _, h := range hidden {
		b += 4 * float64(h)
	}
	return b
}
