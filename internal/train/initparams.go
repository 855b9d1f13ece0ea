package train

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gradwire/gradwire/models"
)

// InitFile is the run directory's record of the parameters before the first
// step, RUN_DIR/init.ckpt: gradwire measure's distances to the
// initialisation (Jiang et al. 2020, measures 40 and 41) need it. It is a
// checkpoint file (checkpoint_codec.go: CRC-checked, written atomically) at
// step 0 holding the parameters and the model buffers (BatchNorm running
// statistics) only: no optimizer, compressor or worker state, no records and
// no config, so it is the size of the parameters (4 bytes each) plus their
// names. It lies beside checkpoints/, not in it, so that pruning and resuming
// never see it. A fresh run with train.checkpoint on writes it on rank 0
// before its first step; a resumed run leaves it as it is.
const InitFile = "init.ckpt"

// initLayout is what init.ckpt must hold for net: its tensors and buffers,
// no logical workers.
func initLayout(net *models.Net) layout { return layoutOf(net, 0, nil) }

// saveInit writes net's current parameters and buffers to dir/init.ckpt.
func saveInit(dir, version string, net *models.Net) error {
	c := &checkpoint{Version: version, Model: net.Name(), Params: append([]float32(nil), net.Flat()...)}
	for _, p := range net.Params() {
		c.ParamNames = append(c.ParamNames, p.Name)
	}
	for _, b := range net.Buffers() {
		c.BufferNames = append(c.BufferNames, b.Name)
		c.Buffers = append(c.Buffers, append([]float32(nil), b.Value...))
	}
	return saveCheckpoint(filepath.Join(dir, InitFile), c)
}

// loadInit reads dir/init.ckpt for net: nil and no error when the run has
// none (runs of versions before it, or train.checkpoint off); an error when
// the file is there but damaged or of another model.
func loadInit(dir string, net *models.Net) (*checkpoint, error) {
	path := filepath.Join(dir, InitFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("initial parameters: %w", err)
	}
	c, err := loadCheckpoint(path, initLayout(net))
	if err != nil {
		return nil, fmt.Errorf("initial parameters (expected the parameters this run started from, written by gradwire train): %w", err)
	}
	if c.GlobalStep != 0 {
		return nil, fmt.Errorf("initial parameters %s: taken after %d steps, expected 0", path, c.GlobalStep)
	}
	return c, nil
}
