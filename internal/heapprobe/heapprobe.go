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
func Peak() (stop func() uint64) { return peak(0) }

// CollectedPeak is Peak with a collection run whenever the heap objects
// grew by step since the last one ended: the most the heap held, give or
// take step of garbage and what is allocated during a millisecond. Peak
// alone also counts what the collector lets pile up between its runs (at
// least 1 MiB past the live heap, more on a larger heap), which is not
// what anything holds.
func CollectedPeak(step uint64) (stop func() uint64) { return peak(step) }

// peak samples the heap objects every millisecond, collecting once they
// grew by step (0: never).
func peak(step uint64) (stop func() uint64) {
	done, most := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var peak, base uint64
		for {
			metrics.Read(s)
			n := s[0].Value.Uint64()
			peak = max(peak, n)
			if base == 0 {
				base = n
			}
			if step > 0 && n > base+step {
				runtime.GC()
				metrics.Read(s)
				base = s[0].Value.Uint64()
				peak = max(peak, base)
			}
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
