package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/internal/atomicfile"
)

// checkpointDir is the run directory's folder of checkpoints.
const checkpointDir = "checkpoints"

// checkpointPath names the checkpoint taken after globalStep optimizer steps,
// at an epoch end or inside an epoch: checkpoints/step-00001234.ckpt. The
// padding makes names sort by step in a directory listing; listCheckpoints
// parses the number, so steps beyond 8 digits still order correctly.
func checkpointPath(dir string, globalStep int) string {
	return filepath.Join(dir, checkpointDir, fmt.Sprintf("step-%08d.ckpt", globalStep))
}

type checkpointFile struct {
	path string
	step int
}

// listCheckpoints lists the step-N.ckpt files of a run directory, newest (highest
// step) first. A run directory without a checkpoints folder has none.
func listCheckpoints(dir string) ([]checkpointFile, error) {
	entries, err := os.ReadDir(filepath.Join(dir, checkpointDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	var out []checkpointFile
	for _, e := range entries {
		num, hasPrefix := strings.CutPrefix(e.Name(), "step-")
		num, hasSuffix := strings.CutSuffix(num, ".ckpt")
		if !hasPrefix || !hasSuffix || !e.Type().IsRegular() || num == "" || strings.Trim(num, "0123456789") != "" {
			continue
		}
		step, err := strconv.Atoi(num)
		if err != nil {
			continue // more digits than an int holds: not a name checkpointPath makes
		}
		out = append(out, checkpointFile{filepath.Join(dir, checkpointDir, e.Name()), step})
	}
	slices.SortFunc(out, func(a, b checkpointFile) int {
		if a.step != b.step {
			return b.step - a.step
		}
		return strings.Compare(b.path, a.path)
	})
	return out, nil
}

// errNoCheckpoint: the run directory has no checkpoint file at all.
var errNoCheckpoint = errors.New("no checkpoint")

// latestCheckpoint loads the newest checkpoint of a run directory that fits
// want. A newest file that is damaged (CRC mismatch, cut short) is skipped for
// the next older one: skipped says which files were passed over and why, and
// path which one was loaded. Any other error (another model, another number of
// workers, a value out of range) stops the search, since an older checkpoint
// of the same run would not fit either. Checkpoints named epoch-NNNN.ckpt are
// from gradwire versions before format 2 and are refused, not read.
func latestCheckpoint(dir string, want layout) (c *checkpoint, path string, skipped []error, err error) {
	files, err := listCheckpoints(dir)
	if err != nil {
		return nil, "", nil, fmt.Errorf("resume: %w", err)
	}
	if len(files) == 0 {
		if err := checkLegacy(dir); err != nil {
			return nil, "", nil, err
		}
		return nil, "", nil, fmt.Errorf("resume: %w in %s (expected %s)", errNoCheckpoint, dir, filepath.Join(dir, checkpointDir, "step-NNNNNNNN.ckpt"))
	}
	for _, f := range files {
		c, err := loadCheckpoint(f.path, want)
		if err == nil {
			return c, f.path, skipped, nil
		}
		if !isDamaged(err) {
			return nil, "", skipped, err
		}
		skipped = append(skipped, err)
	}
	return nil, "", skipped, fmt.Errorf("resume: no usable checkpoint in %s: %w", dir, errors.Join(skipped...))
}

// checkLegacy refuses a run directory whose checkpoints are named
// epoch-NNNN.ckpt: gradwire versions before checkpoint format 2 wrote them.
func checkLegacy(dir string) error {
	legacy, _ := filepath.Glob(filepath.Join(dir, checkpointDir, "epoch-*.ckpt"))
	if len(legacy) == 0 {
		return nil
	}
	return fmt.Errorf("resume: %s was written by an older version of gradwire (checkpoint format %s, named epoch-NNNN.ckpt); this version reads format %s (step-NNNNNNNN.ckpt): start the run afresh in another directory or finish it with the version that wrote it",
		legacy[len(legacy)-1], gobFormat, checkpointFormat)
}

// CheckpointPosition is where a run's newest usable checkpoint stands.
type CheckpointPosition struct {
	Epochs      int // epochs completed
	StepInEpoch int // steps taken into the next epoch (an interrupt's mid-epoch checkpoint), else 0
	// StepsPerEpoch is the run's, from the checkpoint's step count once an
	// epoch has finished; 0 (unknown) before that, or when the position
	// fields do not fit one count.
	StepsPerEpoch int
}

// NewestCheckpoint reports whether a run directory holds a checkpoint a resume
// can start from and where its newest one stands, without building the model:
// it verifies each file's CRC and position fields, newest first, passing over
// damaged files as a resume does.
func NewestCheckpoint(dir string) (pos CheckpointPosition, ok bool, err error) {
	files, err := listCheckpoints(dir)
	if err != nil {
		return pos, false, err
	}
	if len(files) == 0 {
		return pos, false, checkLegacy(dir)
	}
	for _, f := range files {
		meta, kind, err := scanCheckpoint(f.path)
		switch kind {
		case scanGood:
			pos = CheckpointPosition{Epochs: meta.Epoch, StepInEpoch: meta.StepInEpoch}
			// Only a count the position fields agree on (as a resume checks
			// them against the run's own): a hostile file gets no estimate.
			if spe := (meta.GlobalStep - meta.StepInEpoch) / max(meta.Epoch, 1); meta.Epoch > 0 &&
				spe > meta.StepInEpoch && spe*meta.Epoch+meta.StepInEpoch == meta.GlobalStep {
				pos.StepsPerEpoch = spe
			}
			return pos, true, nil
		case scanUnreadable:
			return pos, false, err
		}
	}
	return pos, false, nil
}

// removeStaleTemps removes the temporary files that a process killed while
// writing left in the run directory and its checkpoints folder. Call it before
// the run writes anything (no other process may be writing there).
func removeStaleTemps(dir string) (removed []string, err error) {
	for _, d := range []string{dir, filepath.Join(dir, checkpointDir)} {
		r, err := atomicfile.RemoveTemps(d)
		removed = append(removed, r...)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
	}
	return removed, nil
}

// selectionLoss is the loss an epoch's checkpoint is ranked by: the
// validation loss when there is one, else the test loss.
func selectionLoss(r EpochResult) float64 {
	if r.ValLoss != nil {
		return *r.ValLoss
	}
	return r.TestLoss
}

// pruneCheckpoints deletes the checkpoints a run no longer needs. It keeps the
// newest keep checkpoints that verify (CRC and position fields) and, among the
// epoch-end checkpoints that verify, the one with the lowest validation loss
// when the run holds a validation split out (data.validation), else the lowest
// test loss (the last record of its Epochs), so that the kept best is not
// picked on the test set when it need not be; it deletes the others, damaged ones included,
// oldest first. Checkpoints of another format are left alone. When no
// checkpoint verifies, or one cannot be read, it deletes nothing. A crash
// mid-prune leaves a superset of what it keeps; call it after the newest
// checkpoint was written, never instead of writing it.
func pruneCheckpoints(dir string, keep int) error {
	if keep < 1 {
		return fmt.Errorf("prune checkpoints: keep %d, expected at least 1 (train.keep_checkpoints)", keep)
	}
	files, err := listCheckpoints(dir)
	if err != nil {
		return fmt.Errorf("prune %w", err)
	}
	var good, doomed []checkpointFile
	best, bestLoss := -1, 0.0
	for _, f := range files {
		meta, kind, err := scanCheckpoint(f.path)
		switch kind {
		case scanUnreadable:
			return fmt.Errorf("prune checkpoints: %w (nothing deleted)", err)
		case scanForeign:
			continue
		case scanBad:
			doomed = append(doomed, f)
			continue
		}
		good = append(good, f)
		if meta.StepInEpoch == 0 && len(meta.Epochs) > 0 {
			// Ties go to the newest; a NaN loss is never the best.
			if loss := selectionLoss(meta.Epochs[len(meta.Epochs)-1]); !math.IsNaN(loss) && (best < 0 || loss < bestLoss) {
				best, bestLoss = len(good)-1, loss
			}
		}
	}
	if len(good) == 0 {
		return nil
	}
	for i, f := range good {
		if i >= keep && i != best {
			doomed = append(doomed, f)
		}
	}
	slices.SortFunc(doomed, func(a, b checkpointFile) int { return a.step - b.step })
	var errs []error
	for _, f := range doomed {
		if err := os.Remove(f.path); err != nil {
			errs = append(errs, fmt.Errorf("prune checkpoints: %w", err))
		}
	}
	return errors.Join(errs...)
}

// What scanCheckpoint found.
type scanKind int

const (
	scanGood       scanKind = iota // verifies; meta decoded
	scanBad                        // damaged, or its position fields do not load
	scanForeign                    // another format version: not this version's to judge
	scanUnreadable                 // could not be read
)

// scanCheckpoint verifies a checkpoint file's CRC without holding the tensors
// in memory and decodes its meta section (position, records). err says why a
// file is not scanGood.
func scanCheckpoint(path string) (meta *checkpoint, kind scanKind, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, scanUnreadable, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, scanUnreadable, err
	}
	bad := func(format string, args ...any) (*checkpoint, scanKind, error) {
		return nil, scanBad, fmt.Errorf("checkpoint %s: %s", path, fmt.Sprintf(format, args...))
	}
	unreadable := func(err error) (*checkpoint, scanKind, error) {
		return nil, scanUnreadable, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	head := make([]byte, headerBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return unreadable(err)
	}
	if err := checkHeader(head[:n]); err != nil {
		if isDamaged(err) {
			return bad("%v", err)
		}
		return nil, scanForeign, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	size := st.Size()
	if size < int64(headerBytes+4) {
		return bad("corrupt or truncated (%d bytes, shorter than the %d-byte header and CRC)", size, headerBytes+4)
	}
	crc := crc32.NewIEEE()
	crc.Write(head)
	rest := size - 4 - int64(headerBytes)
	metaLen := int64(binary.LittleEndian.Uint32(head[headerBytes-4:]))
	var metaBytes []byte
	if metaLen <= rest && metaLen <= maxMetaBytes {
		metaBytes = make([]byte, metaLen)
		if _, err := io.ReadFull(f, metaBytes); err != nil {
			return unreadable(err)
		}
		crc.Write(metaBytes)
		rest -= metaLen
	}
	if _, err := io.CopyN(crc, f, rest); err != nil {
		if errors.Is(err, io.EOF) {
			return bad("corrupt or truncated (shrank while being read)")
		}
		return unreadable(err)
	}
	var sum [4]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil {
		return bad("corrupt or truncated (%v)", err)
	}
	if got, want := crc.Sum32(), binary.LittleEndian.Uint32(sum[:]); got != want {
		return bad("corrupt or truncated (CRC-32 %08x, expected %08x)", got, want)
	}
	if metaBytes == nil {
		return bad("field meta length: %d bytes, expected at most %d", metaLen, min(rest, maxMetaBytes))
	}
	c, err := decodeMeta(metaBytes, formatOf(head))
	if err != nil {
		return bad("%v", err)
	}
	return c, scanGood, nil
}
