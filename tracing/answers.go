package tracing

import (
	"bytes"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The spans read the answer as it passes (a feature.Hook that edits
// nothing): each response ends the span of the request it answers, as it
// is written, failed when it is a JSON-RPC error or a tool's result with
// isError.

// MaxRead bounds a JSON answer read for the spans: past it, the answer
// passes unread, and its requests' spans end with the answer, their
// outcome unknown. The events of a stream are read whatever its length.
const MaxRead = 1 << 20

// Needs: the messages as they pass, JSON answers within MaxRead.
func (s *Spans) Needs() feature.Needs { return feature.Needs{Max: MaxRead} }

// Message ends the spans of the requests msg (a response, or a batch of
// them) answers.
func (s *Spans) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '[' {
		w := jsonrpc.NewWalker(msg)
		_ = w.Array(func() error {
			start := w.Pos()
			if err := w.Skip(); err != nil {
				return err
			}
			s.response(msg[start:w.Offset()], now)
			return nil
		})
		return nil, nil
	}
	s.response(msg, now)
	return nil, nil
}

// Unreadable is never asked for: the spans fail nothing closed.
func (s *Spans) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

// End records how the answer ended, for the spans its end leaves open.
func (s *Spans) End(_ *feature.Exchange, e feature.Ending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ending = e
}

// response ends the span of the request msg answers, if msg is a
// response to one of them. It reads msg once, descending only into its
// result and error objects.
func (s *Spans) response(msg []byte, now time.Time) {
	var id, errCode, errMessage []byte
	var isError, answered bool
	w := jsonrpc.NewWalker(msg)
	err := w.Object(func(key []byte) error {
		switch {
		case string(key) == "id":
			start := w.Pos()
			err := w.Skip()
			id = msg[start:w.Offset()]
			return err
		case string(key) == "result" && w.Peek() == '{':
			answered = true
			return w.Object(func(key []byte) error {
				if string(key) == "isError" {
					isError = w.Peek() == 't'
				}
				return w.Skip()
			})
		case string(key) == "error" && w.Peek() == '{':
			answered = true
			return w.Object(func(key []byte) error {
				start := w.Pos()
				err := w.Skip()
				switch string(key) {
				case "code":
					errCode = msg[start:w.Offset()]
				case "message":
					errMessage = msg[start:w.Offset()]
				}
				return err
			})
		}
		return w.Skip()
	})
	if err != nil || id == nil || !answered {
		return
	}
	s.answer(id, errCode, errMessage, isError, now)
}

// answer ends the span of the request of id, with the outcome its response
// gave.
func (s *Spans) answer(id, errCode, errMessage []byte, isError bool, now time.Time) {
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.done || m.id == "" || !jsonrpc.MayAnswer([]byte(m.id), id) {
			continue
		}
		switch {
		case errCode != nil:
			code := "_OTHER" // not an integer: not the server's to name freely
			if isCode(errCode) {
				code = string(errCode)
			}
			m.span.SetAttributes(attribute.String("rpc.response.status_code", code))
			s.end(m, code, unquoted(errMessage), now)
		case isError:
			s.end(m, "tool_error", "the tool's result has isError: true", now)
		default:
			s.end(m, "", "", now)
		}
		return
	}
}

// unquoted is a JSON string's content, clipped; "" for anything else.
func unquoted(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	return feature.Clip(string(jsonrpc.AppendUnquoted(nil, v[1:len(v)-1])))
}

// isCode reports whether v is a JSON-RPC error code: an integer.
func isCode(v []byte) bool {
	_, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil
}
