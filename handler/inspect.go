package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// exchange is what the handler knows of one HTTP request.
type exchange struct {
	r     *http.Request
	body  []byte
	msgs  []message
	batch bool
	// cur is the message whose values the {http.mcp.*} placeholders show:
	// while rate-limit keys are evaluated, each message of a batch in turn;
	// afterwards, the first.
	cur int
	// start is when the handler received the request.
	start time.Time
	// errorCode is the envelope code the handler answered with, if any.
	errorCode string
	// canceled: the client went away while the request waited in a queue.
	canceled bool
	// limit and guard name the rate limit or concurrency guard that refused
	// the request, and key the key value it was refused for.
	limit, guard, key string
	// cause is the error behind an envelope, for the log.
	cause error
	// taken are the tokens the exchange took, refunded if it does not run.
	// reader hands the body on to the upstream, and watch follows what it
	// answers; both live here to save allocations per request.
	reader   bodyReader
	watch    upstreamWatch
	taken    []ratelimit.Request
	reqBuf   [4]ratelimit.Request
	ownerBuf [4]*limit
	one      [1]message
}

// placeholderPrefix starts every placeholder the handler provides.
const placeholderPrefix = "http.mcp."

// placeholder resolves the {http.mcp.*} placeholders. It is registered with
// the request's replacer, so values are computed only when something (a key
// template, a log field, a matcher) asks for them.
func (x *exchange) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, placeholderPrefix)
	if !ok {
		return nil, false
	}
	var m message
	if x.cur < len(x.msgs) {
		m = x.msgs[x.cur]
	}
	switch name {
	case "method":
		return string(m.method), true
	case "tool":
		return string(m.tool), true
	case "id":
		return idText(m.id), true
	case "session_id":
		return x.r.Header.Get("Mcp-Session-Id"), true
	case "protocol_version":
		return x.r.Header.Get("Mcp-Protocol-Version"), true
	case "batch_size":
		if !x.batch {
			return "", true
		}
		return strconv.Itoa(len(x.msgs)), true
	case "error_code":
		return x.errorCode, true
	}
	return nil, false
}

// idText is an id as a log reads it: a string id without its quotes, a
// number as written, "" when absent.
func idText(id json.RawMessage) string {
	if len(id) == 0 || id[0] != '"' {
		return string(id)
	}
	if bytes.IndexByte(id, '\\') < 0 {
		return string(id[1 : len(id)-1])
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return string(id)
	}
	return s
}

// bodyReader is a read body given back to the request, byte for byte.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// errBodyTooLarge is a body over MaxRequestBody.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole body, refusing one over max bytes without
// reading past max+1.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 {
		body := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, body)
		return body, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err == nil && int64(len(body)) > max {
		return nil, errBodyTooLarge
	}
	return body, err
}

// inspect reads and parses a POST body, and puts the body back for the
// upstream exactly as the client sent it.
func (h *Handler) inspect(x *exchange) error {
	r := x.r
	body, err := readBody(r, h.MaxRequestBody)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errBodyTooLarge
		}
		return err
	}
	x.body = body
	x.reader.Reset(body)
	r.Body = &x.reader
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	x.msgs, x.batch, err = parseMessages(body, x.one[:0])
	if err != nil {
		return err
	}
	return checkMirrorHeaders(r.Header, x)
}

// checkMirrorHeaders refuses a request whose Mcp-Method or Mcp-Name header
// (MCP 2026-07-28) disagrees with its body: policy is decided from the body,
// and a proxy or server that routes on the header must not see another
// method than the gateway admitted.
func checkMirrorHeaders(h http.Header, x *exchange) error {
	method, name := h.Get("Mcp-Method"), h.Get("Mcp-Name")
	if method == "" && name == "" {
		return nil
	}
	if x.batch || len(x.msgs) != 1 {
		return &mismatchError{"a batch cannot carry Mcp-Method or Mcp-Name headers"}
	}
	m := &x.msgs[0]
	if method != "" && method != string(m.method) {
		return &mismatchError{fmt.Sprintf("the Mcp-Method header says %q but the body's method is %q", method, m.method)}
	}
	if name != "" && m.tool != nil && name != string(m.tool) {
		return &mismatchError{fmt.Sprintf("the Mcp-Name header says %q but the body's name is %q", name, m.tool)}
	}
	return nil
}

// mismatchError is a request whose headers disagree with its body.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }
