//go:build linux

package ops

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime is the CPU time of the calling OS thread: on a shared
// machine it times a benchmark without the time other processes held the
// core.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
