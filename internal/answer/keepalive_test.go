package answer

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const every = 10 * time.Second

func TestKeepaliveCommentsAnIdleStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLockedRecorder()
		ka := startKeepalive(w, every, nil)
		defer ka.stop()

		time.Sleep(every / 2)
		synctest.Wait()
		assert.Empty(t, w.Body(), "not before a period has passed")

		time.Sleep(every)
		synctest.Wait()
		assert.Equal(t, ":\n", w.Body(), "a comment line, never a blank line")
		assert.True(t, w.Flushed(), "and flushed at once")

		time.Sleep(2 * every)
		synctest.Wait()
		assert.Equal(t, ":\n:\n:\n", w.Body(), "one per idle period")
	})
}

func TestKeepaliveWritesOnlyAfterALineFeed(t *testing.T) {
	tests := []struct {
		name string
		// last is the upstream's last write.
		last     string
		comments int
	}{
		{"after LF", "data: x\n", 2},
		{"after a blank line", "data: x\n\n", 2},
		{"after CRLF", "data: x\r\n", 2},
		{"never after a CR, whose LF may follow", "data: x\r", 0},
		{"never mid-line", "data: {\"jsonrpc\"", 0},
		{"an empty write changes nothing", "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newLockedRecorder()
				ka := startKeepalive(w, every, nil)
				defer ka.stop()
				time.Sleep(time.Second)
				n, err := ka.write([]byte(tt.last), w.Write)
				require.NoError(t, err)
				require.Equal(t, len(tt.last), n)

				time.Sleep(3*every + every/2)
				synctest.Wait()
				body := w.Body()
				assert.Equal(t, tt.last+strings.Repeat(":\n", tt.comments), body)
			})
		})
	}
}

func TestKeepaliveNeverWritesWhileTheUpstreamDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLockedRecorder()
		ka := startKeepalive(w, every, nil)
		defer ka.stop()
		var sent strings.Builder
		time.Sleep(time.Second) // off the ticks
		for range 12 {
			time.Sleep(every / 2)
			_, err := ka.write([]byte("data: tick\n\n"), w.Write)
			require.NoError(t, err)
			sent.WriteString("data: tick\n\n")
		}
		synctest.Wait()
		assert.Equal(t, sent.String(), w.Body(), "a write every half period leaves no tick idle")

		time.Sleep(2*every + every/2)
		synctest.Wait()
		assert.Equal(t, sent.String()+":\n", w.Body(), "idle for one to two periods, a comment follows")
	})
}

func TestKeepaliveCannotSplitAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLockedRecorder()
		ka := startKeepalive(w, every, nil)
		for _, p := range []string{"event: message\n", "data: {\"jsonrpc\":\"2.0\",\r", "\ndata: \"method\":\"ping\"}\n", "\n"} {
			_, err := ka.write([]byte(p), w.Write)
			require.NoError(t, err)
			time.Sleep(3 * every)
		}
		ka.stop()
		require.Contains(t, w.Body(), ":\n", "comments were written in the pauses")
		events, _ := sseClient([]byte(w.Body()))
		assert.Equal(t, []sseEvent{{Type: "message", Data: "{\"jsonrpc\":\"2.0\",\n\"method\":\"ping\"}"}}, events)
	})
}

func TestKeepaliveStopWaitsForItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLockedRecorder()
		ka := startKeepalive(w, every, nil)
		time.Sleep(every + time.Second)
		ka.stop()
		select {
		case <-ka.stopped:
		default:
			t.Fatal("stop returned before the goroutine ended")
		}
		before := w.Body()
		time.Sleep(10 * every)
		synctest.Wait()
		assert.Equal(t, before, w.Body(), "nothing is written once stopped")
		assert.Equal(t, ":\n", before)
	})
}

func TestNilKeepalivePassesWritesAndFlushesThrough(t *testing.T) {
	var ka *keepalive
	w := httptest.NewRecorder()
	n, err := ka.write([]byte("data: x\n"), w.Write)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	flushed := errors.New("flushed")
	assert.Equal(t, flushed, ka.flush(func() error { return flushed }))
	assert.NotPanics(t, ka.stop)
	assert.Equal(t, "data: x\n", w.Body.String())
}

func TestKeepaliveFlushIsInStepWithItsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newLockedRecorder()
		ka := startKeepalive(w, every, nil)
		defer ka.stop()
		called := false
		require.NoError(t, ka.flush(func() error {
			assert.False(t, ka.mu.TryLock(), "flushes hold the writes' lock")
			called = true
			return nil
		}))
		assert.True(t, called)
	})
}

func TestKeepaliveToABrokenClientDoesNotFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &brokenClient{Hdr: map[string][]string{}}
		ka := startKeepalive(c, every, nil)
		time.Sleep(3*every + time.Second)
		ka.stop()
		writes, flushes := c.Counts()
		assert.Equal(t, 3, writes, "a comment is tried every idle period")
		assert.Zero(t, flushes, "a failed write is not flushed")
	})
}
