package logsample

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const interval = 10 * time.Second

// lines records what a Sampler lets its caller log: the events let through
// and the counts reported, each with the time it was logged at.
type lines struct {
	mu     sync.Mutex
	events []line
	counts []line
}

type line struct {
	at       time.Time
	kind     string
	n        int64
	overflow bool
}

func (l *lines) report(c Count[string]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts = append(l.counts, line{at: time.Now(), kind: c.Kind, n: c.N, overflow: c.Overflow})
}

// note notes an event of kind k, coarse when the sampler is full, and
// records its line if it is to be logged.
func (l *lines) note(s *Sampler[string], k, coarse string) bool {
	log, overflow := s.Note(k, coarse)
	if log {
		l.mu.Lock()
		l.events = append(l.events, line{at: time.Now(), kind: k, n: 1, overflow: overflow})
		l.mu.Unlock()
	}
	return log
}

// takeCounts returns the counts reported so far, and forgets them.
func (l *lines) takeCounts() []line {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	l.counts = nil
	for i := range c {
		c[i].at = time.Time{}
	}
	return c
}

func newSampler(max int) (*Sampler[string], *lines) {
	l := &lines{}
	return New(interval, max, l.report), l
}

// idle reports whether s holds nothing and runs no timer.
func idle(s *Sampler[string]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fine) == 0 && len(s.coarse) == 0 && s.timer == nil
}

func TestTheFirstEventOfEachKindIsLoggedAndTheRestCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l := newSampler(8)
		assert.True(t, l.note(s, "a", "all"), "the first a")
		assert.True(t, l.note(s, "b", "all"), "the first b: a kind of its own")
		for range 3 {
			assert.False(t, l.note(s, "a", "all"), "a again, within the interval")
		}
		time.Sleep(interval)
		synctest.Wait()
		assert.Equal(t, []line{{kind: "a", n: 3}}, l.takeCounts(), "the three a counted; b had no more")
	})
}

// A storm of one kind, 10,000 events in 10 seconds, is logged as its first
// event and one count a second (with a one-second interval): at most one
// line per interval, and the counts add up to every event.
func TestAStormCostsALinePerIntervalAndEveryEventIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lines{}
		s := New(time.Second, 8, l.report)
		start := time.Now()
		const events = 10_000
		for range events {
			l.note(s, "storm", "all")
			time.Sleep(time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()

		require.Len(t, l.events, 1, "the first event only")
		var counted int64
		last := l.events[0].at
		for _, c := range l.counts {
			counted += c.n
			assert.GreaterOrEqual(t, c.at.Sub(last), time.Second, "one line per interval at most")
			last = c.at
		}
		assert.Equal(t, int64(events), 1+counted, "every event logged or counted")
		assert.LessOrEqual(t, len(l.counts), 11, "one count a second, for the 10 seconds and the last")
		assert.Equal(t, start.Add(10*time.Second), last, "the last count is reported once its interval is over")
		assert.True(t, idle(s), "a storm over is forgotten")
	})
}

func TestAKindQuietForAnIntervalIsLoggedAgainAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l := newSampler(8)
		require.True(t, l.note(s, "a", "all"))
		time.Sleep(interval)
		synctest.Wait()
		assert.Empty(t, l.takeCounts(), "nothing counted, nothing to report")
		assert.True(t, idle(s))
		assert.True(t, l.note(s, "a", "all"), "a quiet kind is logged at once")

		assert.False(t, l.note(s, "a", "all"))
		time.Sleep(interval)
		synctest.Wait()
		assert.Equal(t, []line{{kind: "a", n: 1}}, l.takeCounts())
		assert.False(t, l.note(s, "a", "all"), "the count opened a's next interval: a is counted in it")
		time.Sleep(interval)
		synctest.Wait()
		assert.Equal(t, []line{{kind: "a", n: 1}}, l.takeCounts())
		time.Sleep(interval)
		synctest.Wait()
		assert.True(t, idle(s))
		assert.True(t, l.note(s, "a", "all"), "an interval without a: logged at once")
	})
}

// A caller rotating its kinds cannot grow the sampler beyond max: kinds it
// has no room for are counted under their coarse kind, and their lines say
// so.
func TestKindsBeyondMaxAreCountedUnderTheirCoarseKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l := newSampler(2)
		require.True(t, l.note(s, "a", "letters"))
		require.True(t, l.note(s, "b", "letters"))
		const rotated = 10_000
		for i := range rotated {
			l.note(s, fmt.Sprint("k", i), "letters")
		}
		assert.False(t, l.note(s, "a", "letters"), "a kind held is counted as its own")
		s.mu.Lock()
		assert.Len(t, s.fine, 2)
		assert.Len(t, s.coarse, 1)
		s.mu.Unlock()
		assert.Equal(t, []line{{kind: "a", n: 1}, {kind: "b", n: 1}, {kind: "k0", n: 1, overflow: true}}, withoutTimes(l.events),
			"the first event beyond max is logged, saying it stands for a coarse kind")

		time.Sleep(interval)
		synctest.Wait()
		assert.ElementsMatch(t, []line{{kind: "a", n: 1}, {kind: "letters", n: rotated - 1, overflow: true}}, l.takeCounts())
		time.Sleep(interval)
		synctest.Wait()
		assert.True(t, idle(s))
		assert.True(t, l.note(s, "k1", "letters"), "once there is room, a kind is its own again")
		assert.False(t, l.events[len(l.events)-1].overflow)
	})
}

func TestStopReportsEveryCountAndLetsEveryEventThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l := newSampler(1)
		l.note(s, "a", "all")
		l.note(s, "a", "all")
		l.note(s, "b", "all")
		l.note(s, "c", "all")
		s.Stop()
		assert.ElementsMatch(t, []line{{kind: "a", n: 1}, {kind: "all", n: 1, overflow: true}}, l.takeCounts())
		for range 3 {
			log, overflow := s.Note("a", "all")
			assert.True(t, log, "once stopped, nothing is counted")
			assert.False(t, overflow)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		assert.Empty(t, l.takeCounts())
		assert.True(t, idle(s), "no timer left")
	})
}

func withoutTimes(ls []line) []line {
	out := make([]line, len(ls))
	for i, l := range ls {
		l.at = time.Time{}
		out[i] = l
	}
	return out
}
