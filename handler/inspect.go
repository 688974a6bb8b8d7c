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
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// exchange is what the handler knows of one HTTP request.
type exchange struct {
	r     *http.Request
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
	// slot is the exchange's place in the concurrency guard, if it took one.
	slot busy.Slot
	// pooled is the recycled buffer holding body, if any; forwarded: the
	// request was handed to the next handler; frozen: the placeholders'
	// values once the buffer is recycled.
	pooled    *[]byte
	forwarded bool
	frozen    *frozenPlaceholders
	// reader hands the body on to the upstream, and watch follows what it
	// answers; both live here to save allocations per request.
	reader bodyReader
	watch  upstreamWatch
	// taken are the tokens the exchange took, refunded if it does not run;
	// reqBuf and ownerBuf back it, and one backs msgs, without allocating.
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
	if f := x.frozen; f != nil {
		switch name {
		case "method":
			return f.method, true
		case "tool":
			return f.tool, true
		case "id":
			return f.id, true
		case "batch_size":
			if !x.batch {
				return "", true
			}
			return strconv.Itoa(f.batchSize), true
		}
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

// bodyReader is a read body given back to the request, byte for byte. It
// notes when the upstream's transport is done with it.
type bodyReader struct {
	bytes.Reader
	closed atomic.Bool
}

func (b *bodyReader) Close() error {
	b.closed.Store(true)
	return nil
}

// errBodyTooLarge is a body over MaxRequestBody.
var errBodyTooLarge = errors.New("request body too large")

// Bodies from pooledBodyMin to pooledBodyMax bytes are read into recycled
// buffers: at 64 KiB, a new zeroed buffer per request was most of the
// handler's garbage. Smaller bodies are cheaper to allocate than to recycle
// (recycling copies the placeholders' values out, see exchange.recycle).
const (
	pooledBodyMin = 4 << 10
	pooledBodyMax = 1 << 20
)

var bodyBuffers sync.Pool // of *[]byte

// readBody reads the whole body, refusing one over max bytes without
// reading past max+1. pooled is the recycled buffer holding body, or nil.
func readBody(r *http.Request, max int64) (body []byte, pooled *[]byte, err error) {
	if r.ContentLength > max {
		return nil, nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 {
		n := int(r.ContentLength)
		if n >= pooledBodyMin && n <= pooledBodyMax {
			pooled, _ = bodyBuffers.Get().(*[]byte)
			if pooled == nil {
				pooled = new([]byte)
			}
			if cap(*pooled) < n {
				*pooled = make([]byte, n)
			}
			body = (*pooled)[:n]
		} else {
			body = make([]byte, n)
		}
		if _, err = io.ReadFull(r.Body, body); err != nil && pooled != nil {
			bodyBuffers.Put(pooled)
			pooled = nil
		}
		return body, pooled, err
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, max+1))
	if err == nil && int64(len(body)) > max {
		return nil, nil, errBodyTooLarge
	}
	return body, nil, err
}

// recycle gives the body's buffer back once nothing can read it: the
// request was never forwarded, or the upstream's transport closed the body.
// The placeholders, which log_append reads after the handler returns, keep
// copies of their values.
func (x *exchange) recycle() {
	if x.pooled == nil || (x.forwarded && !x.reader.closed.Load()) {
		return
	}
	var m message
	if len(x.msgs) > 0 {
		m = x.msgs[0]
	}
	x.frozen = &frozenPlaceholders{method: string(m.method), tool: string(m.tool), id: idText(m.id), batchSize: len(x.msgs)}
	x.msgs = nil
	bodyBuffers.Put(x.pooled)
	x.pooled = nil
}

// frozenPlaceholders are the values of the {http.mcp.*} placeholders that
// came from a body whose buffer was recycled.
type frozenPlaceholders struct {
	method, tool, id string
	batchSize        int
}

// inspect reads and parses a POST body, and puts the body back for the
// upstream exactly as the client sent it.
func (h *Handler) inspect(x *exchange) error {
	r := x.r
	body, pooled, err := readBody(r, h.MaxRequestBody)
	x.pooled = pooled
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errBodyTooLarge
		}
		return err
	}
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
