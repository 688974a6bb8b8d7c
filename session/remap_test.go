package session

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func refOf(i int) tokenRef {
	var r tokenRef
	copy(r[:], strconv.Itoa(i))
	return r
}

func TestTheRemapFindsWhatItKeptUntilTheTokenExpires(t *testing.T) {
	m := newRemap(10, 1<<20)
	_, _, ok := m.find(refOf(1), t0)
	assert.False(t, ok, "an empty remap")
	m.keep(refOf(1), "10.0.0.8:8080", "new-id", t0.Add(time.Hour), t0)
	upstream, id, ok := m.find(refOf(1), t0.Add(time.Hour))
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.8:8080", upstream)
	assert.Equal(t, "new-id", id)
	_, _, ok = m.find(refOf(2), t0)
	assert.False(t, ok, "another token")

	_, _, ok = m.find(refOf(1), t0.Add(time.Hour+time.Second))
	assert.False(t, ok, "past the token's expiry")
	assert.Equal(t, 1, m.len(t0.Add(time.Hour)))
	assert.Equal(t, 0, m.len(t0.Add(time.Hour+time.Second)), "dropped once expired")
	assert.Zero(t, m.bytes)

	m.keep(refOf(3), "u:1", "late", t0, t0.Add(time.Second))
	assert.Equal(t, 0, m.len(t0), "a token expired already is not kept")
}

func TestTheRemapEvictsTheEntriesThatExpireSoonest(t *testing.T) {
	m := newRemap(3, 1<<20)
	for i, expires := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		m.keep(refOf(i), "u:1", "id-"+strconv.Itoa(i), t0.Add(expires), t0)
	}
	m.keep(refOf(3), "u:1", "id-3", t0.Add(30*time.Minute), t0)
	assert.Equal(t, 3, m.len(t0))
	_, _, ok := m.find(refOf(1), t0)
	assert.False(t, ok, "the entry that expired soonest made room")
	for _, i := range []int{0, 2, 3} {
		_, id, ok := m.find(refOf(i), t0)
		assert.True(t, ok)
		assert.Equal(t, "id-"+strconv.Itoa(i), id)
	}

	m.keep(refOf(0), "u:2", "replaced", t0.Add(3*time.Hour), t0)
	assert.Equal(t, 3, m.len(t0), "a token reopened again replaces its entry, evicting none")
	upstream, id, _ := m.find(refOf(0), t0)
	assert.Equal(t, "u:2", upstream)
	assert.Equal(t, "replaced", id)
}

func TestTheRemapIsBoundedInBytes(t *testing.T) {
	long := strings.Repeat("i", 6<<10) // the longest id a token holds
	m := newRemap(1000, 3*(len(long)+remappedOverhead+3))
	for i := range 5 {
		m.keep(refOf(i), "u:1", long, t0.Add(time.Duration(i+1)*time.Hour), t0)
		assert.LessOrEqual(t, m.bytes, m.maxBytes)
	}
	assert.Equal(t, 3, m.len(t0))
	for i, want := range []bool{false, false, true, true, true} {
		_, _, ok := m.find(refOf(i), t0)
		assert.Equal(t, want, ok, "entry %d", i)
	}

	m.keep(refOf(4), "u:1", strings.Repeat(long, 4), t0.Add(time.Hour), t0)
	_, _, ok := m.find(refOf(4), t0)
	assert.False(t, ok, "an entry larger than the bound is not kept, and the one it replaces names a session gone")
	assert.Equal(t, 2, m.len(t0))
	assert.Equal(t, 2*(len(long)+remappedOverhead+3), m.bytes)
}

// Requests find and reopen sessions at once: run with -race.
func TestTheRemapIsSafeForConcurrentUse(t *testing.T) {
	m := newRemap(64, 1<<20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				ref := refOf(g*1000 + i%100)
				m.keep(ref, "u:1", "id", t0.Add(time.Duration(i)*time.Minute), t0)
				m.find(ref, t0)
				if i%50 == 0 {
					m.len(t0)
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, m.len(t0), 64)
	assert.Equal(t, int64(m.len(t0)), m.held.Load())
}
