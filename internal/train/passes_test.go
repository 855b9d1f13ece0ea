package train

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestPassesOneByOne: dist.passes one_by_one makes every replica compute its
// workers one after the other where auto computes them in one pass (fused
// for a dense exchange, grouped for DGC); the log says which, and both learn.
func TestPassesOneByOne(t *testing.T) {
	for _, c := range []struct{ compressor, auto string }{{"none", "passes=fused"}, {"dgc", "passes=grouped"}} {
		for _, passes := range []string{"auto", "one_by_one"} {
			cfg := smallConfig(t, "mlp", "model.hidden=32", "dist.workers=4", "dist.replicas=2",
				"compress.name="+c.compressor, "dist.passes="+passes, "train.epochs=2")
			var log strings.Builder
			sum, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatalf("%s, %s: %v", c.compressor, passes, err)
			}
			want := c.auto
			if passes == "one_by_one" {
				want = `passes="one by one"`
			}
			if !strings.Contains(log.String(), want) {
				t.Errorf("%s, dist.passes %s: the log lacks %s:\n%s", c.compressor, passes, want, log.String())
			}
			if *sum.TestAccuracy < 0.5 {
				t.Errorf("%s, dist.passes %s: test accuracy %.3f on an easy synthetic task", c.compressor, passes, *sum.TestAccuracy)
			}
		}
	}
}
