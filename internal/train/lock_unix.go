//go:build unix

package train

import (
	"errors"
	"os"
	"syscall"
)

var errLocked = errors.New("locked")

// lockOpenFlags refuses a .lock that is a symbolic link: the holder's text is
// written into the file, which must not land wherever a planted link points.
const lockOpenFlags = syscall.O_NOFOLLOW

// lockFile takes an exclusive advisory lock on f without waiting.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
