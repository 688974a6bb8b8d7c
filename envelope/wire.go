package envelope

import (
	"encoding/json"
	"sync"
	"unicode/utf8"
)

// JSON-RPC error codes the gateway uses.
const (
	// CodeServerError carries an envelope in answer to a request that is not
	// a tools/call.
	CodeServerError = -32000
	// CodeParseError answers a body that is not JSON.
	CodeParseError = -32700
	// CodeInvalidRequest answers a message that is JSON but not JSON-RPC.
	CodeInvalidRequest = -32600
)

// NullID is the id of a response to a request whose id could not be read.
var NullID = json.RawMessage("null")

// AppendToolResult appends the JSON-RPC response to a tools/call request with
// the given id, carrying e as the call's result:
//
//	{"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":"<envelope>"}],"isError":<bool>}}
//
// id is written exactly as given, so a number stays a number (large integers
// unrounded) and a string stays a string. It must be valid JSON.
func (e *Envelope) AppendToolResult(dst []byte, id json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = e.AppendCallToolResult(dst)
	return append(dst, '}')
}

// AppendTextResult appends a JSON-RPC response whose result is a
// CallToolResult of text blocks, one per text, with isError as given: an
// envelope's text beside another section the model reads (a
// <validation_error>, a <contract_awareness>).
func AppendTextResult(dst []byte, id json.RawMessage, isError bool, texts ...string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{"content":[`...)
	for i, t := range texts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendTextContent(dst, t)
	}
	dst = append(dst, `],"isError":`...)
	dst = strconvBool(dst, isError)
	return append(dst, "}}"...)
}

// AppendPlainRPCError appends a JSON-RPC error response that carries no
// envelope, for the answers the protocol itself defines (a session that is
// gone):
//
//	{"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":"<message>"}}
func AppendPlainRPCError(dst []byte, id json.RawMessage, code int, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = AppendNumber(dst, float64(code))
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, message)
	return append(dst, "}}"...)
}

// AppendTextContent appends a text content block holding text:
// {"type":"text","text":"<text>"}.
func AppendTextContent(dst []byte, text string) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = appendJSONString(dst, text)
	return append(dst, '}')
}

// AppendCallToolResult appends e as a CallToolResult: one text block holding
// the envelope, and isError per the severity.
func (e *Envelope) AppendCallToolResult(dst []byte) []byte {
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst = e.appendTextJSON(dst)
	dst = append(dst, `}],"isError":`...)
	dst = strconvBool(dst, e.IsError())
	return append(dst, '}')
}

// AppendRPCError appends a JSON-RPC error response carrying e:
//
//	{"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":"<message>","data":{"code","severity","recovery","retryAfter","envelope"}}}
//
// A nil id leaves the "id" member out: the form sent with an HTTP error status
// to a notification or a GET. recovery and retryAfter are left out when e has
// none. code is normally CodeServerError.
func (e *Envelope) AppendRPCError(dst []byte, id json.RawMessage, code int) []byte {
	dst = append(dst, `{"jsonrpc":"2.0",`...)
	if id != nil {
		dst = append(dst, `"id":`...)
		dst = append(dst, id...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"error":{"code":`...)
	dst = AppendNumber(dst, float64(code))
	dst = append(dst, `,"message":`...)
	dst = AppendJSONString(dst, e.Message)
	dst = append(dst, `,"data":{"code":`...)
	dst = AppendJSONString(dst, string(e.Code))
	dst = append(dst, `,"severity":`...)
	dst = AppendJSONString(dst, string(e.severity()))
	if e.Recovery != "" {
		dst = append(dst, `,"recovery":`...)
		dst = AppendJSONString(dst, e.Recovery)
	}
	if e.HasRetryAfter() {
		dst = append(dst, `,"retryAfter":`...)
		dst = AppendNumber(dst, e.RetryAfter)
	}
	dst = append(dst, `,"envelope":`...)
	dst = e.appendTextJSON(dst)
	return append(dst, "}}}"...)
}

// scratch holds rendered envelopes on their way into JSON.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendTextJSON appends the rendered envelope as a JSON string.
func (e *Envelope) appendTextJSON(dst []byte) []byte {
	buf := scratch.Get().(*[]byte)
	text := e.AppendText((*buf)[:0])
	dst = appendJSONString(dst, text)
	*buf = text
	scratch.Put(buf)
	return dst
}

func strconvBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

const hex = "0123456789abcdef"

// AppendJSONString appends s as a JSON string without HTML escaping, so that
// < and > stay as they are and the envelope reads the same inside JSON as
// outside it. Control characters are escaped, and invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func AppendJSONString(dst []byte, s string) []byte {
	return appendJSONString(dst, s)
}

func appendJSONString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func decodeRune[S string | []byte](s S) (rune, int) {
	var b [utf8.UTFMax]byte
	n := copy(b[:], s)
	return utf8.DecodeRune(b[:n])
}
