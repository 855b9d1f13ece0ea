//go:build !linux

package ops

import "time"

// threadCPUTime is not measured outside Linux (0: the benchmarks then report
// wall-clock figures only).
func threadCPUTime() time.Duration { return 0 }
