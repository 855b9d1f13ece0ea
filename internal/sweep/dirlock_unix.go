//go:build unix

package sweep

import (
	"os"
	"syscall"
)

// dirLocking: lockDir locks here.
const dirLocking = true

// lockDir holds an exclusive advisory lock on dir itself until the returned
// function is called, waiting for it: two sweeps working on one results
// folder each read, change and rewrite invocations.jsonl, and without the
// lock one could rewrite the file from a copy read before the other's write.
// Locking the folder, not the file, because the file is replaced by a rename
// on every write.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
