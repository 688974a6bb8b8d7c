package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// thread is the CPU time the calling thread has used.
func thread() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("cputime: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
