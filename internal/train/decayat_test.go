package train

import "testing"

// TestDGCWeightDecayAtOptimizerReachesSGD: with compress.dgc.weight_decay_at
// optimizer the run's SGD applies the decay to the tensors DGC compresses,
// in its momentum buffers (DecaySteps), which stay zero under the default
// placement (PlainSteps); the two runs end with different parameters.
func TestDGCWeightDecayAtOptimizerReachesSGD(t *testing.T) {
	sets := []string{"model.hidden=32", "dist.workers=2", "data.batch_size=8", "compress.name=dgc", "compress.density=0.01",
		"compress.dgc.warmup_epochs=0", "train.epochs=1"}
	params := map[string][]float32{}
	for _, at := range []string{"velocity", "optimizer"} {
		cfg := smallConfig(t, "mlp", append(sets, "compress.dgc.weight_decay_at="+at)...)
		dir := t.TempDir()
		runCfg(t, cfg, dir, false)
		ck := loadNewest(t, cfg, dir)
		params[at] = ck.Params
		// fc1.w (784x32) is compressed; its SGD buffer holds the decay momentum.
		const name = "momentum/fc1.w"
		buf := ck.Optim.Buffers[name]
		if len(buf) != 784*32 {
			t.Fatalf("%s: buffer %s has %d values, want %d", at, name, len(buf), 784*32)
		}
		nonzero := 0
		for _, v := range buf {
			if v != 0 {
				nonzero++
			}
		}
		if at == "velocity" && nonzero != 0 || at == "optimizer" && nonzero < len(buf)/2 {
			t.Errorf("weight_decay_at %s: %d of %d values of SGD's buffer %s nonzero", at, nonzero, len(buf), name)
		}
	}
	if relDiff(params["velocity"], params["optimizer"]) == 0 {
		t.Error("the two placements ended with the same parameters")
	}
}
