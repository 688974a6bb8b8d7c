package handler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// refuseBody answers a POST the handler could not read, parse or take: the
// body was too large, too slow, not JSON, ambiguous, beyond a bound, or
// carried headers that disagree with it.
func (h *Handler) refuseBody(w http.ResponseWriter, x *exchange, err error) error {
	var (
		syntax   *jsonrpc.SyntaxError
		mismatch *mismatchError
		repeat   *repeatError
		bad      *messageError
		env      envelope.Envelope
		status   = http.StatusBadRequest
		rpcCode  = envelope.CodeInvalidRequest
		// id is null when the body was read but its id cannot be echoed,
		// and absent when the body was not read at all.
		id = envelope.NullID
		// parsed: the messages were read as they are, and the log line
		// may say what they were.
		parsed bool
	)
	switch {
	case errors.Is(err, errBodyTooLarge):
		status, id = http.StatusRequestEntityTooLarge, nil
		env = envelope.New(envelope.ValidationError,
			fmt.Sprintf("Request body is larger than the %d bytes this server accepts", h.MaxRequestBody)).
			Suggest("Send a smaller request: split the work into several calls, or pass large data by reference.").
			Envelope()
	case errors.Is(err, errBodyTimeout):
		status, id = http.StatusRequestTimeout, nil
		env = envelope.New(envelope.ValidationError,
			fmt.Sprintf("Request body did not arrive within %s", formatWindow(time.Duration(h.ReadBodyTimeout)))).
			Suggest("Send the whole request at once, and retry it on a faster connection or with a smaller body.").
			Envelope()
	case errors.As(err, &repeat):
		id = nil
		env = envelope.New(envelope.ValidationError, "Request is ambiguous: "+repeat.Error()).
			Suggest("Send " + repeat.what + " once.").
			Envelope()
	case errors.Is(err, errEncoded):
		status = http.StatusUnsupportedMediaType
		env = envelope.New(envelope.ValidationError,
			"Request body is sent with Content-Encoding "+clip(strings.Join(x.r.Header.Values("Content-Encoding"), ", "))+": this server reads every request before it runs, and takes them uncompressed only").
			Suggest("Send the request body uncompressed, without a Content-Encoding header.").
			Envelope()
	case errors.As(err, &syntax):
		rpcCode = envelope.CodeParseError
		message := "Request body is not valid JSON: " + syntax.Error()
		if !claimsJSON(x.r) {
			message = "Request body is not JSON (Content-Type " + clip(x.r.Header.Get("Content-Type")) + "): this server reads every request before it runs, and could not read it: " + syntax.Error()
		}
		env = envelope.New(envelope.ValidationError, message).
			Suggest("Send one JSON-RPC 2.0 message, or a batch array of them, as the POST body, with Content-Type: application/json.").
			Envelope()
	case errors.Is(err, jsonrpc.ErrAmbiguous):
		env = envelope.New(envelope.ValidationError,
			"Request is ambiguous: a JSON-RPC member (jsonrpc, method, id, params, result, error, params.name) appears twice or in another letter case").
			Suggest("Send each member once, spelled in lower case as JSON-RPC defines it.").
			Envelope()
	case errors.As(err, &mismatch):
		parsed = true
		env = envelope.New(envelope.ValidationError, "Request headers disagree with its body: "+mismatch.msg).
			Suggest("Send Mcp-Method and Mcp-Name headers equal to the body's method and params.name, or leave them out.").
			Envelope()
	case errors.Is(err, jsonrpc.ErrTooManyMessages):
		parsed = true
		env = envelope.New(envelope.ValidationError,
			fmt.Sprintf("Request is a batch of more than %d messages, the most this server takes in one request", h.MaxBatch)).
			Suggest(fmt.Sprintf("Send at most %d messages per batch, or send them one at a time.", h.MaxBatch)).
			Envelope()
	case errors.As(err, &bad):
		env = envelope.New(envelope.ValidationError, "Request refused: "+bad.msg).Suggest(bad.recovery).Envelope()
		if !bad.badID {
			// The ids are fine: each request gets its answer.
			return h.answer(w, x, &env, http.StatusBadRequest)
		}
		parsed = true
	default:
		// The body could not be read: the client went away or broke the
		// framing. Nobody is left to read an envelope.
		x.msgs = nil
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	if !parsed {
		x.msgs = nil
	}
	if id == nil {
		closeAfterAnswer(w, x.r)
	}
	h.record(x, &env)
	x.msgs = nil
	return writeJSON(w, status, &env, env.AppendRPCError(nil, id, rpcCode))
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

// claimsJSON reports whether the request's Content-Type is JSON or absent.
// It is read as leniently as the most lenient official server reads it (the
// Python SDK's): any comma-separated part of any Content-Type header whose
// media type is application/json.
func claimsJSON(r *http.Request) bool {
	values := r.Header.Values("Content-Type")
	if len(values) == 0 {
		return true
	}
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
				return true
			}
		}
	}
	return false
}

// maxEchoed bounds, in bytes, a client-chosen value (a method, a tool name,
// an id, a header, a key) written into a log line or an envelope.
const maxEchoed = 256

// clip returns s cut to maxEchoed bytes at a character boundary, saying how
// long it was.
func clip(s string) string {
	if len(s) <= maxEchoed {
		return s
	}
	cut := maxEchoed
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
