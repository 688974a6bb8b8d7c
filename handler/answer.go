package handler

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// Writing the gateway's answers. Every envelope reaches the client through
// answer or writeRefusal, which record the outcome (the error_code
// placeholder, the metric) and log it, once.

// answer answers every request of the exchange with env, in the wire form
// each one needs: a tools/call gets a CallToolResult, another request a
// JSON-RPC error with its id, both with HTTP 200. When nothing in the
// exchange has an id (a notification, a response, a batch of those, a GET),
// the answer is an id-less JSON-RPC error with the HTTP status given.
//
// A batch holding more than maxAnswered requests gets one id-less envelope
// instead, so that a refusal never costs much more than the request.
func (h *Handler) answer(w http.ResponseWriter, x *exchange, env *envelope.Envelope, status int) error {
	h.answered(x, env)
	requests := 0
	for i := range x.Messages {
		if x.Messages[i].Kind == jsonrpc.Request {
			requests++
		}
	}
	if requests == 0 || requests > maxAnswered {
		id := json.RawMessage(nil)
		if requests > 0 {
			id = envelope.NullID
		}
		return writeJSON(w, status, env, env.AppendRPCError(nil, id, x.Era.RPCCode(env)))
	}
	body := make([]byte, 0, 1024)
	if x.Batch {
		body = append(body, '[')
	}
	for i := range x.Messages {
		m := &x.Messages[i]
		if m.Kind != jsonrpc.Request {
			continue
		}
		if len(body) > 1 {
			body = append(body, ',')
		}
		if isCall(m) {
			body = h.appendCallResult(body, x, env, m.ID, m.Name)
		} else {
			body = env.AppendRPCError(body, m.ID, x.Era.RPCCode(env))
		}
	}
	if x.Batch {
		body = append(body, ']')
	}
	return writeJSON(w, http.StatusOK, env, body)
}

// maxAnswered bounds the envelopes in one answer.
const maxAnswered = 64

// answered records that the exchange was answered with env: the outcome the
// {http.mcp.error_code} placeholder and the metrics show, and one log line.
func (h *Handler) answered(x *exchange, env *envelope.Envelope) {
	if x.dropsAnswers() {
		return // the client gets the body's refusal instead (streaming.go)
	}
	x.errorCode = string(env.Code)
	if x.trace != nil {
		x.trace.Answered(env, x.refusedBy)
	}
	envelopeCounters.Get(x.errorCode).Inc()
	h.envelopes.Write(&x.Exchange, env, x.refusedBy, x.cause)
}

var contentTypeJSON = []string{"application/json"}

// writeJSON writes a refusal's body, JSON, with the Retry-After of env (nil
// for an answer that is no envelope).
func writeJSON(w http.ResponseWriter, status int, env *envelope.Envelope, body []byte) error {
	hdr := w.Header()
	// Canonical keys, set directly: this is the path of every refusal.
	hdr["Content-Type"] = contentTypeJSON
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	if env != nil && env.RetryAfterSeconds() > 0 {
		hdr["Retry-After"] = []string{strconv.FormatInt(env.RetryAfterSeconds(), 10)}
	}
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// statusClientClosed is the status Caddy records for a client that went
// away before its response.
const statusClientClosed = 499

// bodyRefusal is how the gateway answers a POST it could not read, parse or
// take.
type bodyRefusal struct {
	env envelope.Envelope
	// status and code are the HTTP status and JSON-RPC code of the id-less
	// answer; id is null when the body was read but its id cannot be
	// echoed, and absent when the body was not read at all.
	status int
	code   int
	id     json.RawMessage
	// parsed: the messages are as they were read, and the log line may say
	// what they were; perRequest: each request gets its own answer, its id
	// being fine.
	parsed, perRequest bool
}

// refuseBody answers a POST the handler could not read, parse or take; a
// body that could not be read at all is nobody's to answer.
func (h *Handler) refuseBody(w http.ResponseWriter, x *exchange, err error) error {
	ref, ok := h.refusalOf(x.Request, x.Era, err)
	switch {
	case errors.Is(err, reqbody.ErrUnread):
		x.Messages = nil
		return caddyhttp.Error(http.StatusInternalServerError, err)
	case !ok:
		// The client went away or broke the framing.
		x.Messages = nil
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	if ref.perRequest {
		return h.answer(w, x, &ref.env, ref.status)
	}
	if !ref.parsed {
		x.Messages = nil
	}
	if ref.id == nil {
		closeAfterAnswer(w, x.Request)
	}
	h.answered(x, &ref.env)
	x.Messages = nil
	return writeJSON(w, ref.status, &ref.env, ref.env.AppendRPCError(nil, ref.id, ref.code))
}

// refusalOf is the answer to a body of era e refused for err.
func (h *Handler) refusalOf(r *http.Request, e era, err error) (bodyRefusal, bool) {
	var (
		syntax   *jsonrpc.SyntaxError
		mismatch *mirror.Mismatch
		repeat   *feature.RepeatError
		bad      *messageError
	)
	ref := bodyRefusal{status: http.StatusBadRequest, code: envelope.CodeInvalidRequest, id: envelope.NullID}
	switch {
	case errors.Is(err, reqbody.ErrTooLarge):
		ref.env, ref.status, ref.id = bodyTooLarge(h.MaxRequestBody), http.StatusRequestEntityTooLarge, nil
	case errors.Is(err, reqbody.ErrTimeout):
		ref.env, ref.status, ref.id = bodyTooSlow(time.Duration(h.ReadBodyTimeout)), http.StatusRequestTimeout, nil
	case errors.As(err, &repeat):
		ref.env, ref.id = inputRepeated(repeat), nil
		if repeat.MCP && e == statelessEra {
			ref.code = mirror.Code
		}
	case errors.Is(err, errEncoded):
		ref.env, ref.status = bodyEncoded(strings.Join(r.Header.Values("Content-Encoding"), ", ")), http.StatusUnsupportedMediaType
	case errors.As(err, &syntax):
		ref.env, ref.code = bodyNotJSON(syntax, r.Header.Get("Content-Type"), claimsJSON(r)), envelope.CodeParseError
	case errors.Is(err, jsonrpc.ErrAmbiguous):
		ref.env = messageAmbiguous()
	case errors.As(err, &mismatch):
		ref.env, ref.parsed, ref.code, ref.id = headersDisagree(mismatch), true, mirror.Code, mismatch.ID
	case errors.Is(err, jsonrpc.ErrTooManyMessages):
		ref.env, ref.parsed = batchTooLarge(h.MaxBatch), true
	case errors.As(err, &bad):
		ref.env, ref.parsed, ref.perRequest = messageRefused(bad), true, !bad.badID
	default:
		return ref, false
	}
	return ref, true
}

// closeAfterAnswer closes an HTTP/1 connection once the answer is written,
// for an answer given before the body was read: net/http would otherwise
// read up to 256 KiB of the unread body first, and wait as long as the
// client takes to send it.
func closeAfterAnswer(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// appendCallResult appends the answer to a tools/call: the envelope as a
// CallToolResult, with what the annotators say of the tool (the
// contract's <contract_awareness>) in text blocks after it.
//
// The gateway's own capacity answers (RATE_LIMITED, SERVER_BUSY) carry
// none: they say nothing about the tool.
//
// The tool's name is made a string only when an annotator reads it: a
// refusal costs no allocation more for it.
func (h *Handler) appendCallResult(dst []byte, x *exchange, env *envelope.Envelope, id json.RawMessage, tool []byte) []byte {
	if len(h.annotators) == 0 || env.Code == envelope.RateLimited || env.Code == envelope.ServerBusy {
		return env.AppendToolResult(dst, id)
	}
	sections := h.annotate(x.view(), string(tool))
	if len(sections) == 0 {
		return env.AppendToolResult(dst, id)
	}
	return envelope.AppendTextResult(dst, id, env.IsError(), append([]string{env.Text()}, sections...)...)
}
