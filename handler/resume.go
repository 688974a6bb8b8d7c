package handler

import (
	"errors"
	"net/http"

	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// Resuming a broken stream. An upstream whose events carry ids (the
// TypeScript SDK's servers with an event store, the Go SDK's with one) can
// replay a stream after any of them: a GET with Last-Event-ID. When such
// a stream to a POST breaks while it still owes responses, the gateway
// resumes it itself, on the same upstream (the request's session and pin),
// and splices what the upstream replays into the client's stream: the
// client sees one stream, whose events pass as the upstream wrote them.
// When the upstream cannot resume it (the connection refused: the server
// died; 404: it restarted and lost the session; any other answer but an
// event stream), the gateway ends the client's stream with the envelope
// for each response still owed, which says the call may have run. The
// client is never left to resume a stream only to meet a server that is
// gone, with an answer it cannot match to its call.
//
// A stream the upstream ended whole, without a response, is its own to
// close (a server may close one and ask the client to come back with
// Last-Event-ID): it is left to the client, as it always was.

// maxResumes bounds the GETs the gateway sends to resume one answer: a
// server that breaks every stream it resumes costs that many, and then
// the envelope.
const maxResumes = 3

// errNotResumed refuses the body of an answer to a resuming GET that is
// no event stream.
var errNotResumed = errors.New("caddy-mcp: the upstream's answer resumes no stream")

// resumeBroken resumes the stream the upstream broke, while it owes
// responses, on up to maxResumes GETs, and reports whether the resumed
// stream ended whole: the client has then had what it replayed, and what
// it still owes, if anything, is settled as for any stream its upstream
// ended. Otherwise the stream is no longer resumable, and settle ends it
// with the envelope for each response it still owes.
func (h *Handler) resumeBroken(x *exchange, u *answer.Watch, next caddyhttp.Handler) bool {
	t := u.Stream()
	if t == nil || !t.Resumable() || t.Owed() == 0 || t.Stopped() != nil {
		return false
	}
	if h.resumeAgain(x, u, next) {
		return true
	}
	t.Unresumable()
	return false
}

// resumeAgain sends the GETs of resumeBroken, one after the other while
// each resumed stream breaks again.
func (h *Handler) resumeAgain(x *exchange, u *answer.Watch, next caddyhttp.Handler) bool {
	t := u.Stream()
	for range maxResumes {
		id, retry, ok := t.ResumeAt()
		if !ok || x.Request.Context().Err() != nil || u.Deadline.Passed() || !u.WaitToResume(retry) {
			return false
		}
		if _, err := u.ToClient(t.Restart()); err != nil {
			return false
		}
		streamed, broke := h.resumeOnce(x, u, next, id)
		switch {
		case !streamed || t.Stopped() != nil:
			return false
		case !broke || t.Owed() == 0:
			// Ended whole, or broken after its last response: the client
			// has its answers, or the stream is the upstream's to end.
			return true
		}
	}
	return false
}

// resumeOnce sends the GET that resumes the stream after id, through the
// rest of the route (to the session's upstream), and passes what it
// answers into the client's stream when it is an event stream. streamed
// reports that it was, broke that the upstream broke it again.
func (h *Handler) resumeOnce(x *exchange, u *answer.Watch, next caddyhttp.Handler, id string) (streamed, broke bool) {
	w := &resumeWriter{u: u, header: make(http.Header)}
	r, repl := own.Prepare(own.Resume(u.Upstream.Context(), x.Request, id), own.Vars(x.Request), w)
	repl.Map(x.placeholder)
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			streamed, broke = w.streamed, true
		}
	}()
	u.StartKeepalive()
	defer u.StopKeepalive()
	err := next.ServeHTTP(w, r)
	if w.status == 0 {
		resumes.WithLabelValues("refused").Inc()
	}
	if !w.streamed {
		h.logger.Debug("the upstream did not resume a broken stream", zap.String("last_event_id", id), zap.Int("status", w.status), zap.Error(err))
	}
	return w.streamed, err != nil
}

// resumeWriter takes the upstream's answer to a resuming GET: an event
// stream passes into the client's, as the stream it resumes; anything else
// is refused at its first byte, which stops the proxy reading it.
type resumeWriter struct {
	u        *answer.Watch
	header   http.Header
	status   int
	streamed bool
}

func (w *resumeWriter) Header() http.Header { return w.header }

func (w *resumeWriter) WriteHeader(status int) {
	if w.status != 0 || status < 200 {
		return
	}
	w.status = status
	w.streamed = status == http.StatusOK && answer.IsEventStream(w.header) && answer.IdentityEncoded(w.header)
	outcome := "refused"
	if w.streamed {
		outcome = "streamed"
	}
	resumes.WithLabelValues(outcome).Inc()
}

func (w *resumeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.streamed {
		// Not read on: an answer that is no stream may never end.
		return 0, errNotResumed
	}
	return w.u.WriteEvents(p)
}

// FlushError flushes the client's stream, as the proxy does after each
// event.
func (w *resumeWriter) FlushError() error {
	if !w.streamed {
		return nil
	}
	return w.u.FlushError()
}
