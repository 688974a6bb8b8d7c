package handler

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// The handler's own goroutines and timers (the keep-alives, the reading of
// a streamed body, the giving back of what lingers, the log sampler's
// counts) each end a panic of the code they run: the panic is logged and
// counted, and what the goroutine held is given back. On a goroutine of
// the handler's, an unrecovered panic would stop Caddy.

// observed is a logger that records its lines at debug and above.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// panicAfterHead is a request body that gives a tools/call's head, then
// panics on the next read.
type panicAfterHead struct{ given bool }

var errBodyPanics = errors.New("the body panics")

func (p *panicAfterHead) Read(b []byte) (int, error) {
	if p.given {
		panic(errBodyPanics)
	}
	p.given = true
	return copy(b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"`), nil
}

func TestAStreamedBodyWhoseReadingPanicsIsRefusedAndItsUpstreamRequestAborted(t *testing.T) {
	logger, logs := observed()
	h := provision(t, &Handler{StreamAbove: 64, logger: logger})
	before := recoveredAt(reqbody.PanicSite)
	r := post("")
	r.Body, r.ContentLength = io.NopCloser(&panicAfterHead{}), 4096
	var upstreamRead error
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, upstreamRead = io.ReadAll(r.Body)
		return upstreamRead
	})
	err := h.ServeHTTP(httptest.NewRecorder(), r, next)

	var he caddyhttp.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusInternalServerError, he.StatusCode, "the gateway's bug")
	assert.ErrorIs(t, upstreamRead, reqbody.ErrRefused, "the upstream's request was aborted")
	assert.Equal(t, before+1, recoveredAt(reqbody.PanicSite))
	lines := logs.FilterMessage("recovered a panic").All()
	require.Len(t, lines, 1)
	assert.Equal(t, reqbody.PanicSite, lines[0].ContextMap()["site"])
	assert.Equal(t, errBodyPanics.Error(), lines[0].ContextMap()["panic"])
	assert.Contains(t, lines[0].ContextMap()["stack"], "handler.(*panicAfterHead).Read")
}

// lingeringUndo is a guard's places as the core sees them: it lingers,
// and counts its giving back; panicking, it panics then.
type lingeringUndo struct {
	panicking bool
	given     *atomic.Int32
}

func (u lingeringUndo) Linger() time.Duration { return time.Hour }
func (u lingeringUndo) Undo(time.Time, bool) {
	if u.panicking {
		panic("an undo panics")
	}
	u.given.Add(1)
}

func TestWhatLingersComesBackThoughOneUndoPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger, logs := observed()
		before := recoveredAt(siteLinger)
		given := new(atomic.Int32)
		x := &exchange{}
		x.undos = append(x.undoBuf[:0], lingeringUndo{given: given}, lingeringUndo{panicking: true, given: given}, lingeringUndo{given: given})
		x.holdFor(time.Minute, logger)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(2), given.Load(), "the undos after the one that panicked are called too")
		assert.Equal(t, before+1, recoveredAt(siteLinger))
		require.Equal(t, 1, logs.FilterMessage("recovered a panic").Len())
	})
}
