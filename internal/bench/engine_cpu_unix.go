//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far (user and system,
// all threads); ok is false where the system does not report it.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
