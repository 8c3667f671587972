//go:build !linux

package memory_test

import "time"

// threadCPU reports no per-thread clock outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
