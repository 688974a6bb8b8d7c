package answer

import (
	"net/http"
	"strings"
)

// IsEventStream reports whether h declares an event stream.
func IsEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

// IdentityEncoded reports whether a body (an answer's, or a request's) can
// be read as it is: every Content-Encoding it declares is identity, or it
// declares none.
func IdentityEncoded(h http.Header) bool {
	for _, v := range h["Content-Encoding"] {
		for part := range strings.SplitSeq(v, ",") {
			if p := strings.TrimSpace(part); p != "" && !strings.EqualFold(p, "identity") {
				return false
			}
		}
	}
	return true
}
