package handler

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// ServeHTTP checks the origin, inspects and admits a JSON-RPC POST, and
// forwards it; GET and DELETE are only origin-checked and forwarded.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	x := &exchange{r: r, start: h.now()}
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Map(x.placeholder)
	defer h.finish(x)
	if !h.origins.allows(r) {
		env := originRefused(r)
		return h.answer(w, x, &env, http.StatusForbidden)
	}
	if r.Method == http.MethodPost {
		if err := h.inspect(x); err != nil {
			x.msgs = nil
			var syntax *syntaxError
			if errors.As(err, &syntax) && !claimsJSON(r) {
				// Not JSON, and not claiming to be: the upstream refuses
				// it in its own words (415 from the SDK servers).
				x.forwarded = true
				return next.ServeHTTP(w, r)
			}
			return h.refuseMalformed(w, x, err)
		}
		if d := h.admit(x, repl); d != nil {
			return h.refuse(w, x, d)
		}
		slot, err := h.enter(x, repl)
		if err != nil {
			h.refund(x)
			return h.shed(w, x, err)
		}
		// Held until the response is completely written: finish releases it.
		x.slot = slot
	}
	return h.forward(w, x, next)
}

// shed answers a request the concurrency guard did not admit.
func (h *Handler) shed(w http.ResponseWriter, x *exchange, err error) error {
	s, ok := isShed(err)
	if !ok {
		// The client went away while it waited: nobody is left to answer.
		x.canceled = true
		return caddyhttp.Error(statusClientClosed, err)
	}
	env := h.concurrency.shedEnvelope(s)
	x.guard, x.cause = h.concurrency.name, s
	return h.answer(w, x, &env, http.StatusServiceUnavailable)
}

// statusClientClosed is the status Caddy records for a client that went
// away before its response.
const statusClientClosed = 499

// finish frees the exchange's place in the guard, counts the exchange and
// recycles its body, once it is over, whatever happened.
func (h *Handler) finish(x *exchange) {
	now := h.now()
	x.slot.ReleaseAt(now)
	h.observe(x, now)
	x.recycle()
}

// denial is why a request was not admitted.
type denial struct {
	limit      *limit
	retryAfter time.Duration
}

// admit takes tokens for every message from every limit that counts it, all
// or nothing, and returns the denial when a limit has too few.
func (h *Handler) admit(x *exchange, repl *caddy.Replacer) *denial {
	if len(h.limits) == 0 {
		return nil
	}
	reqs, owners := x.reqBuf[:0], x.ownerBuf[:0]
	for i := range x.msgs {
		x.cur = i
		for _, l := range h.limits {
			if !l.applies(&x.msgs[i]) {
				continue
			}
			key := repl.ReplaceAll(l.key, "")
			reqs, owners = addCost(reqs, owners, l, key)
		}
	}
	x.cur = 0
	if len(reqs) == 0 {
		return nil
	}
	denied, d := ratelimit.TakeAll(x.start, reqs)
	if denied < 0 {
		for _, l := range owners {
			l.allowed.Inc()
		}
		x.taken = reqs
		return nil
	}
	owners[denied].denied.Inc()
	x.limit, x.key = owners[denied].name, reqs[denied].Key
	return &denial{limit: owners[denied], retryAfter: d.RetryAfter}
}

// refund gives back the tokens the exchange took, when it will not run.
func (h *Handler) refund(x *exchange) {
	now := h.now()
	for _, r := range x.taken {
		r.Store.Refund(now, r.Key, r.Cost, r.Limit)
	}
	x.taken = nil
}

// addCost adds one token to the request for (l, key), so that a batch takes
// one token per message it holds.
func addCost(reqs []ratelimit.Request, owners []*limit, l *limit, key string) ([]ratelimit.Request, []*limit) {
	for i := range reqs {
		if owners[i] == l && reqs[i].Key == key {
			reqs[i].Cost++
			return reqs, owners
		}
	}
	return append(reqs, ratelimit.Request{Store: l.store, Key: key, Cost: 1, Limit: l.lim}), append(owners, l)
}

// envelope is what the model is told of a denial.
func (d *denial) envelope() envelope.Envelope {
	secs := wholeSeconds(d.retryAfter)
	return envelope.Envelope{
		Code:       envelope.RateLimited,
		Severity:   envelope.SeverityError,
		Message:    d.limit.deniedMessage,
		Recovery:   "Wait " + plural(secs, "second") + ", then retry the same call. Calls made sooner are refused too.",
		Details:    d.limit.details,
		RetryAfter: float64(secs),
	}
}

// wholeSeconds rounds a delay up to whole seconds, at least 1.
func wholeSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// countOf counts what a limit or guard with these methods counts: "1 call",
// "3 calls" when it counts only tools/call, else "1 request", "3 requests".
func countOf(n int, methods []string) string {
	unit := "request"
	if len(methods) == 1 && methods[0] == "tools/call" {
		unit = "call"
	}
	return plural(int64(n), unit)
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(n, 10) + " " + unit + "s"
}

// refuse answers a request that was not admitted.
func (h *Handler) refuse(w http.ResponseWriter, x *exchange, d *denial) error {
	env := d.envelope()
	return h.answer(w, x, &env, http.StatusTooManyRequests)
}

// answer answers every request of the exchange with env, in the wire form
// each one needs: a tools/call gets a CallToolResult, another request a
// JSON-RPC error with its id, both with HTTP 200. When nothing in the
// exchange has an id (a notification, a response, a batch of those, a GET),
// the answer is an id-less JSON-RPC error with the HTTP status given.
func (h *Handler) answer(w http.ResponseWriter, x *exchange, env *envelope.Envelope, status int) error {
	h.record(x, env)
	body := make([]byte, 0, 1024)
	answered := 0
	if x.batch {
		body = append(body, '[')
	}
	for i := range x.msgs {
		m := &x.msgs[i]
		if m.kind != request {
			continue
		}
		if answered > 0 {
			body = append(body, ',')
		}
		answered++
		if m.isCall() {
			body = env.AppendToolResult(body, m.id)
		} else {
			body = env.AppendRPCError(body, m.id, envelope.CodeServerError)
		}
	}
	if x.batch {
		body = append(body, ']')
	}
	if answered == 0 {
		body = env.AppendRPCError(nil, nil, envelope.CodeServerError)
	} else {
		status = http.StatusOK
	}
	return writeJSON(w, status, env, body)
}

var contentTypeJSON = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, env *envelope.Envelope, body []byte) error {
	hdr := w.Header()
	// Canonical keys, set directly: this is the path of every refusal.
	hdr["Content-Type"] = contentTypeJSON
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	if s := env.RetryAfterSeconds(); s > 0 {
		hdr["Retry-After"] = []string{strconv.FormatInt(s, 10)}
	}
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// refuseMalformed answers a body the handler could not read or parse.
func (h *Handler) refuseMalformed(w http.ResponseWriter, x *exchange, err error) error {
	var (
		syntax   *syntaxError
		mismatch *mismatchError
		env      envelope.Envelope
		status   int
		rpcCode  = envelope.CodeInvalidRequest
	)
	switch {
	case errors.Is(err, errBodyTooLarge):
		status = http.StatusRequestEntityTooLarge
		env = envelope.New(envelope.ValidationError,
			fmt.Sprintf("Request body is larger than the %d bytes this server accepts", h.MaxRequestBody)).
			Suggest("Send a smaller request: split the work into several calls, or pass large data by reference.").
			Envelope()
	case errors.As(err, &syntax):
		status, rpcCode = http.StatusBadRequest, envelope.CodeParseError
		env = envelope.New(envelope.ValidationError, "Request body is not valid JSON: "+syntax.Error()).
			Suggest("Send one JSON-RPC 2.0 message, or a batch array of them, as the POST body.").
			Envelope()
	case errors.Is(err, errAmbiguous):
		status = http.StatusBadRequest
		env = envelope.New(envelope.ValidationError,
			"Request is ambiguous: a JSON-RPC member (jsonrpc, method, id, params, result, error, params.name) appears twice or in another letter case").
			Suggest("Send each member once, spelled in lower case as JSON-RPC defines it.").
			Envelope()
	case errors.As(err, &mismatch):
		status = http.StatusBadRequest
		env = envelope.New(envelope.ValidationError, "Request headers disagree with its body: "+mismatch.msg).
			Suggest("Send Mcp-Method and Mcp-Name headers equal to the body's method and params.name, or leave them out.").
			Envelope()
	default:
		// The body could not be read: the client went away or broke the
		// framing. Nobody is left to read an envelope.
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	h.record(x, &env)
	// The id could not be read, so it is null, as JSON-RPC says; a body
	// that was never read has no id at all.
	id := envelope.NullID
	if status == http.StatusRequestEntityTooLarge {
		id = nil
	}
	return writeJSON(w, status, &env, env.AppendRPCError(nil, id, rpcCode))
}

// claimsJSON reports whether the request's Content-Type is JSON or absent.
func claimsJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}
