package train

import (
	"testing"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/models"
)

// cfgLayout is the checkpoint layout of a run of cfg, with the model built as
// Run builds it.
func cfgLayout(t testing.TB, cfg configs.Config) layout {
	t.Helper()
	ds, err := data.Open(data.Options{Name: cfg.Data.Name, Dir: cfg.Data.Dir, SeqLen: cfg.Data.SeqLen, Normalize: cfg.Data.Normalize}, "train")
	if err != nil {
		t.Fatal(err)
	}
	in := models.Input{Shape: ds.XShape(), Classes: ds.Classes(), YLen: ds.YLen()}
	net, err := models.New(cfg.Model, in, cfg.WorkerBatch(), 0, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	return layoutOf(net, cfg.Dist.Workers)
}

// latestPath is the newest checkpoint file of a run directory.
func latestPath(t testing.TB, dir string) string {
	t.Helper()
	files, err := listCheckpoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no checkpoint in %s", dir)
	}
	return files[0].path
}
