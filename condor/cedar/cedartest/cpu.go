package cedartest

import (
	"syscall"
	"time"
)

// CPUTime returns the user and system CPU time the process has used so
// far, for benchmarks that report CPU seconds per operation next to the
// wall time, which a loaded machine inflates.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
