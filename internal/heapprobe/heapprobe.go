// Package heapprobe reads the process's heap for the tests that hold the
// gateway's memory to the bytes it is sent (runtime/metrics): what is
// live after a collection, what was allocated, and the most the heap held
// while something ran.
package heapprobe

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// Read is the runtime metric name, a uint64.
func Read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Objects is the bytes of live heap objects after a full collection.
func Objects() uint64 {
	runtime.GC()
	runtime.GC()
	return Read("/memory/classes/heap/objects:bytes")
}

// Allocated is the bytes allocated on the heap since the process started.
func Allocated() uint64 { return Read("/gc/heap/allocs:bytes") }

// Peak reads the bytes of heap objects (live or not yet swept) every
// millisecond until the function it returns is called, which returns the
// most it read.
func Peak() (stop func() uint64) {
	done, most := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				most <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-most
	}
}
