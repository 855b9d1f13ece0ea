package sweep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/internal/atomicfile"
	"github.com/gradwire/gradwire/internal/train"
)

// CopiedRun is a run the sweep copied from another sweep's results folder
// instead of training it, as invocations.jsonl records it.
type CopiedRun struct {
	Run  string `json:"run"`  // <variation>/seed-<k> in this sweep
	From string `json:"from"` // the finished run directory it was copied from
}

// notCopied are the files of a finished run that stay behind: the starting
// point and lock of its training, and a failure record (a finished run has
// none, but a copy must never carry one).
var notCopied = []string{"init.ckpt", ".lock", failedFile}

// findReusable returns the first finished run (a summary.json that reads) in
// the reuse folders, in their order and then by run directory name, whose
// config.yaml equals r's config, seed included; "" when there is none. A run
// directory whose config or summary does not load is passed over: it is not
// a finished run of the same config.
func findReusable(r Run, folders []string) (string, error) {
	for _, folder := range folders {
		dirs, err := filepath.Glob(filepath.Join(folder, "runs", "*", "seed-"+strconv.FormatInt(r.Seed, 10)))
		if err != nil {
			return "", err
		}
		slices.Sort(dirs)
		for _, dir := range dirs {
			if _, err := train.ReadSummary(filepath.Join(dir, "summary.json")); err != nil {
				continue
			}
			cfg, err := configs.Load(filepath.Join(dir, "config.yaml"), nil)
			if err != nil {
				continue
			}
			if len(configDiff(cfg, r.Config)) == 0 {
				return dir, nil
			}
		}
	}
	return "", nil
}

// copyRun copies the finished run in src to dst, summary.json last, so that
// a copy cut short is not taken for a finished run (the next sweep copies it
// again), and notes the copy at the end of dst's train.log. It holds dst's
// run lock meanwhile, as training does, and first clears what an unfinished
// run left there; copied is false when dst turned out finished already
// (another sweep on the same folder got there first).
func copyRun(src, dst string, r Run, sweepName string) (copied bool, err error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return false, err
	}
	release, done, err := train.ClaimForCopy(dst)
	if err != nil || done {
		return false, err
	}
	defer release()
	if err := clearFailure(dst); err != nil {
		return false, err
	}
	copyFile := func(name string, extra []byte) error {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil && !(errors.Is(err, os.ErrNotExist) && extra != nil) {
			return err
		}
		return atomicfile.Write(filepath.Join(dst, name), append(data, extra...))
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || name == "summary.json" || slices.Contains(notCopied, name) || atomicfile.IsTemp(name) {
			continue
		}
		if name == "train.log" {
			continue // written below, with the note
		}
		if err := copyFile(name, nil); err != nil {
			return false, fmt.Errorf("copying %s to %s: %w", src, dst, err)
		}
	}
	note := fmt.Sprintf("time=%s level=INFO msg=\"copied by gradwire sweep\" sweep=%s variation=%s seed=%d from=%s\n",
		time.Now().UTC().Format(time.RFC3339), sweepName, r.Variation, r.Seed, strconv.Quote(filepath.ToSlash(src)))
	if err := copyFile("train.log", []byte(note)); err != nil {
		return false, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if err := copyFile("summary.json", nil); err != nil {
		return false, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return true, nil
}
