package handler

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/answer"
	"go.uber.org/zap"
)

// A session's GET stream (the standalone one, or a resumed one) whose
// upstream cannot be reached now: the server is down, restarting, or the
// replica of its session unavailable. No model reads the answer to a GET,
// and the official clients do not read a 502 there as a pause: the Go
// SDK's client closes its whole session on it, before the model makes its
// next call. The gateway answers instead with an empty event stream that
// asks the client, in its retry field, to come back in comeBackAfter: the
// specification's way for a server to close a stream (2025-11-25), which
// both clients follow, the Go SDK's five times in a row. A server that
// restarts within that time keeps its clients (reopen.go gives them their
// session back).

// comeBackAfter is the retry field of the stream.
const comeBackAfter = 2 * time.Second

// comesBack reports whether x is a GET of a session, in the era of
// sessions, that asks for an event stream.
func comesBack(x *exchange) bool {
	r := x.Request
	return r.Method == http.MethodGet && x.Era.Resumes() && r.Header.Get("Mcp-Session-Id") != "" &&
		acceptsEventStream(r.Header["Accept"])
}

// acceptsEventStream reports whether an Accept header names
// text/event-stream (or any type).
func acceptsEventStream(accept []string) bool {
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			t, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(t)) {
			case "text/event-stream", "text/*", "*/*":
				return true
			}
		}
	}
	return false
}

// comeBack answers a GET of comesBack with the empty stream that says
// when to come back; why is what kept the upstream out of reach.
func (h *Handler) comeBack(w http.ResponseWriter, x *exchange, why error) error {
	if c := h.logger.Check(zap.DebugLevel, "the upstream of a session's GET stream is out of reach: the client is asked to come back"); c != nil {
		c.Write(zap.Duration("retry", comeBackAfter), zap.Error(why))
	}
	hdr := w.Header()
	answer.ClearEntityHeaders(hdr)
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte("retry: " + strconv.FormatInt(comeBackAfter.Milliseconds(), 10) + "\n\n"))
	return err
}
