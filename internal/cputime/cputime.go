// Package cputime measures the CPU time a function costs the thread that
// runs it. Tests that bound what a hostile input costs assert on it rather
// than on wall time: a loaded machine stretches the wall time of the same
// work many times over, but not the CPU time it takes.
package cputime

import (
	"runtime"
	"time"
)

// Of runs f on a thread of its own and returns the CPU time that thread
// spent in it. f must do its work on the calling goroutine: what other
// goroutines do for it is not counted.
func Of(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := thread()
	f()
	return thread() - before
}
