package handler

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// Bounds on what a client chooses and the gateway keeps or repeats.
const (
	// maxIDBytes bounds a request id, as sent (jsonrpc.MaxID).
	maxIDBytes = jsonrpc.MaxID
	// maxName bounds params.name (a tool's or a prompt's name), in
	// characters, as the MCP specification (2025-11-25) recommends for tool
	// names: 1 to 128.
	maxName = 128
	// maxMethod bounds a method name, in bytes: the specification's longest
	// is 35.
	maxMethod = 128
)

// inspect reads and parses a POST body, and puts the body back for the
// upstream exactly as the client sent it. Headers that could make the
// upstream read another request than the gateway admits are checked first,
// before anything is read.
func (h *Handler) inspect(w http.ResponseWriter, x *exchange) error {
	r := x.Request
	if err := h.checkSingleInputs(r, x.Era); err != nil {
		return err
	}
	if h.streams(r) {
		return h.inspectStreaming(w, x)
	}
	body, pooled, err := reqbody.Read(w, r, h.bodyLimits())
	x.pooled = pooled
	if err != nil {
		return err
	}
	x.giveBack(body)
	if !answer.IdentityEncoded(r.Header) {
		return errEncoded
	}
	x.Messages, x.Batch, err = jsonrpc.Parse(body, x.one[:0], h.MaxBatch)
	if err != nil {
		return err
	}
	return checkInspected(x)
}

// giveBack puts a body read whole back on the request, for the upstream
// to read byte for byte.
func (x *exchange) giveBack(body []byte) {
	x.Body = body
	x.reader.Reset(body)
	r := x.Request
	r.Body = &x.reader
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
}

// checkInspected checks the messages read and the headers that mirror
// them.
func checkInspected(x *exchange) error {
	if err := checkMessages(x.Messages); err != nil {
		return err
	}
	return mirror.Check(x.Request.Header, x.Messages, x.Batch, x.Era)
}

// errEncoded is a body sent with a Content-Encoding: the gateway would
// inspect other bytes than a server that decodes them reads.
var errEncoded = errors.New("request body is encoded")

// singleHeaders are the MCP headers a request may carry once at most: with
// two values, the gateway and the upstream may each read another. So may
// every Mcp-Param-{Name} header of MCP 2026-07-28, which a router or the
// server may read in place of a tool's argument (older versions have none).
var singleHeaders = []string{"Mcp-Method", "Mcp-Name", "Mcp-Session-Id", "Mcp-Protocol-Version"}

// paramHeaderPrefix starts the name of every Mcp-Param-{Name} header, in
// the canonical form net/http gives header names.
const paramHeaderPrefix = "Mcp-Param-"

// checkSingleInputs refuses a request of era e giving twice an MCP header,
// or a header, cookie or query parameter a key template reads (see
// keyInputs), or spelling an MCP header with underscores: servers behind a
// CGI-style gateway read Mcp_Name as Mcp-Name, a second value the gateway
// would not have checked.
func (h *Handler) checkSingleInputs(r *http.Request, e era) error {
	for _, name := range singleHeaders {
		if n := len(r.Header[name]); n > 1 {
			return &feature.RepeatError{What: "the " + name + " header", Count: n, MCP: true}
		}
	}
	for name, values := range r.Header {
		if len(name) < len("Mcp-") || !strings.EqualFold(name[:3], "mcp") {
			continue
		}
		if strings.Contains(name, "_") && isMCPHeader(strings.ReplaceAll(name, "_", "-")) {
			return &feature.RepeatError{What: "the " + clip(name) + " header (an MCP header spelled with underscores)", Count: 1, MCP: true}
		}
		if len(values) > 1 && e == statelessEra && strings.HasPrefix(name, paramHeaderPrefix) {
			return &feature.RepeatError{What: "the " + clip(name) + " header", Count: len(values), MCP: true}
		}
	}
	return h.keyInputs.Repeated(r)
}

// isMCPHeader reports whether name (in any letter case) is one of
// singleHeaders or an Mcp-Param-{Name} header.
func isMCPHeader(name string) bool {
	for _, s := range singleHeaders {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return len(name) > len(paramHeaderPrefix) && strings.EqualFold(name[:len(paramHeaderPrefix)], paramHeaderPrefix)
}

// messageError is a message whose id, method or name is beyond what the
// gateway takes.
type messageError struct {
	msg string
	// recovery is what the model is told to do instead.
	recovery string
	// badID: the id itself is refused, so the answer cannot carry it.
	badID bool
}

func (e *messageError) Error() string { return e.msg }

// checkMessages refuses ids, methods and names beyond their bounds: the
// gateway repeats an id in every answer and keeps it while the response
// streams, and keeps methods and names as keys and placeholders (which logs
// show).
func checkMessages(msgs []jsonrpc.Message) error {
	for i := range msgs {
		m := &msgs[i]
		switch name := utf8.RuneCount(m.Name); {
		case len(m.ID) > maxIDBytes:
			return idTooLong(len(m.ID))
		case jsonrpc.IsNonFinite(m.ID):
			return idNotScalar(m.ID)
		case len(m.Method) > maxMethod:
			return methodTooLong(len(m.Method))
		case name > maxName && isCall(m):
			return toolNameTooLong(name)
		case name > maxName:
			return nameTooLong(name)
		}
	}
	return nil
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
