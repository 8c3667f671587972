//go:build linux

package memory_test

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time used by the calling OS thread (the caller locks its
// goroutine to the thread), and whether the clock is available.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
