//go:build !linux

package cputime

import "time"

// start is the origin of thread's readings.
var start = time.Now()

// thread is, where no per-thread CPU clock is read, the wall time: an
// upper bound of the CPU time.
func thread() time.Duration { return time.Since(start) }
