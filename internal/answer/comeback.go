package answer

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
)

// A session's GET stream (the standalone one, or a resumed one) whose
// upstream cannot be reached now: the server is down, restarting, or the
// replica of its session unavailable. No model reads the answer to a GET,
// and the official clients do not read a 502 there as a pause: the Go
// SDK's client closes its whole session on it, before the model makes its
// next call. The gateway answers instead with an empty event stream that
// asks the client, in its retry field, to come back in ComeBackAfter: the
// specification's way for a server to close a stream (2025-11-25), which
// both clients follow, the Go SDK's five times in a row. A server that
// restarts within that time keeps its clients (the core gives them their
// session back when the upstream lost it).

// ComeBackAfter is the retry field of the stream.
const ComeBackAfter = 2 * time.Second

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

// MayComeBack reports whether r, sent in era e, is a GET of a session, in
// the era of sessions, that asks for an event stream: one ComeBack
// answers when its upstream is out of reach.
func MayComeBack(r *http.Request, e feature.Era) bool {
	return r.Method == http.MethodGet && e.Resumes() && r.Header.Get("Mcp-Session-Id") != "" &&
		acceptsEventStream(r.Header["Accept"])
}

// ComeBack answers a GET of MayComeBack with the empty stream that says
// when to come back.
func ComeBack(w http.ResponseWriter) error {
	hdr := w.Header()
	ClearEntityHeaders(hdr)
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte("retry: " + strconv.FormatInt(ComeBackAfter.Milliseconds(), 10) + "\n\n"))
	return err
}
