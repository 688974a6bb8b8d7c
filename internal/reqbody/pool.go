package reqbody

import (
	"math/bits"
	"sync"
)

const (
	// smallBody: a body declared up to this size is read into a buffer of
	// its size, allocated rather than recycled (recycling makes the caller
	// copy out what it keeps of the body, and for small bodies that costs
	// more than the allocation).
	smallBody = 4 << 10
	// firstChunk is the most allocated for a body before its bytes arrive.
	firstChunk = 16 << 10
	// Recycled buffers come in size classes: firstChunk, then every power of
	// two from 64 KiB to maxPooled (8 MiB). A larger body gets a buffer of
	// its own.
	minClassShift = 16
	maxClassShift = 23
	maxPooled     = 1 << maxClassShift
	classes       = 2 + maxClassShift - minClassShift
)

// buffers are the recycled buffers, by size class.
var buffers [classes]sync.Pool // of *[]byte

// classOf is the size class of a buffer able to hold n bytes, and its
// capacity; class -1 is not recycled.
func classOf(n int) (class, size int) {
	switch {
	case n <= firstChunk:
		return 0, firstChunk
	case n > maxPooled:
		return -1, n
	}
	shift := max(bits.Len(uint(n-1)), minClassShift)
	return 1 + shift - minClassShift, 1 << shift
}

// Get returns a buffer able to hold n bytes, recycled when one of its size
// class is at hand.
func Get(n int) *[]byte {
	class, size := classOf(n)
	if class >= 0 {
		if p, _ := buffers[class].Get().(*[]byte); p != nil {
			return p
		}
	}
	b := make([]byte, size)
	return &b
}

// Put recycles a buffer got from Get, once nothing reads it.
func Put(p *[]byte) {
	if class, size := classOf(cap(*p)); class >= 0 && size == cap(*p) {
		buffers[class].Put(p)
	}
}

// grown is the capacity a buffer of capacity c grows to: four times as
// much while small, then twice (memory stays within twice the bytes
// received), never beyond limit.
func grown(c, limit int) int {
	want := 2 * c
	if c < 64<<10 {
		want = 4 * c
	}
	return min(want, limit)
}

// grow returns a buffer holding the first n bytes of p, with room for more
// (see grown). p is recycled.
func grow(p *[]byte, n, limit int) *[]byte {
	q := Get(grown(cap(*p), limit))
	copy(*q, (*p)[:n])
	Put(p)
	return q
}
