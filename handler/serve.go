package handler

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
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
		closeAfterAnswer(w, r)
		return h.answer(w, x, &env, http.StatusForbidden)
	}
	if r.Method == http.MethodPost {
		if err := h.inspect(w, x); err != nil {
			if h.passesUninspected(err, r) {
				// Nothing here limits the request, and it is not JSON and
				// does not claim to be: the upstream refuses it in its own
				// words (415 from the SDK servers).
				x.msgs = nil
				x.forwarded = true
				return next.ServeHTTP(w, r)
			}
			return h.refuseBody(w, x, err)
		}
		if d := h.admit(x, repl); d != nil {
			return h.refuse(w, x, d)
		}
		if err := h.enter(x, repl); err != nil {
			h.refund(x)
			return h.shed(w, x, err)
		}
		// The places are held until the response is completely written:
		// finish releases them.
	}
	return h.forward(w, x, next)
}

// passesUninspected reports whether a body the handler could not inspect may
// still go to the upstream: only when no rate limit or guard is configured,
// since any of them could apply to a message the handler cannot read, and
// only when the body does not claim to be JSON (a body that claims it and is
// not is malformed). A body in a Content-Encoding counts as not inspected,
// whatever its bytes: a server that decodes it reads other bytes.
func (h *Handler) passesUninspected(err error, r *http.Request) bool {
	if len(h.limits) > 0 || h.concurrency != nil {
		return false
	}
	var syntax *jsonrpc.SyntaxError
	return errors.Is(err, errEncoded) || (errors.As(err, &syntax) && !claimsJSON(r))
}

// shed answers a request the concurrency guard did not admit.
func (h *Handler) shed(w http.ResponseWriter, x *exchange, err error) error {
	s, ok := isShed(err)
	if !ok {
		// The client went away while it waited: nobody is left to answer.
		x.canceled = true
		return caddyhttp.Error(statusClientClosed, err)
	}
	env := h.concurrency.shedEnvelope(s, x.needed)
	x.guard, x.cause = h.concurrency.name, s
	return h.answer(w, x, &env, http.StatusServiceUnavailable)
}

// statusClientClosed is the status Caddy records for a client that went
// away before its response.
const statusClientClosed = 499

// finish frees the exchange's places in the guard, counts the exchange and
// recycles its body, once it is over, whatever happened.
func (h *Handler) finish(x *exchange) {
	now := h.now()
	x.releaseSlots(now)
	h.observe(x, now)
	x.recycle()
}

// denial is why a request was not admitted.
type denial struct {
	limit      *limit
	retryAfter time.Duration
	// cost is the tokens the request needed from the limit.
	cost int
}

// admit takes tokens for every message from every limit that counts it, all
// or nothing, and returns the denial when a limit has too few.
func (h *Handler) admit(x *exchange, repl *caddy.Replacer) *denial {
	if len(h.limits) == 0 {
		return nil
	}
	c := costs{reqs: x.reqBuf[:0], owners: x.ownerBuf[:0]}
	for i := range x.msgs {
		for _, l := range h.limits {
			if l.applies(&x.msgs[i]) {
				c.add(l, l.key.eval(h, x, repl, i))
			}
		}
	}
	if len(c.reqs) == 0 {
		return nil
	}
	denied, d := ratelimit.TakeAll(x.start, c.reqs)
	if denied < 0 {
		for _, l := range c.owners {
			l.allowed.Inc()
		}
		x.taken = c.reqs
		return nil
	}
	l, r := c.owners[denied], c.reqs[denied]
	l.denied.Inc()
	x.limit, x.key = l.name, r.Key
	return &denial{limit: l, retryAfter: d.RetryAfter, cost: r.Cost}
}

// refund gives back the tokens the exchange took, when it will not run.
func (h *Handler) refund(x *exchange) {
	now := h.now()
	for _, r := range x.taken {
		r.Store.Refund(now, r.Key, r.Cost, r.Limit)
	}
	x.taken = nil
}

// costs are the tokens an exchange takes: one request per limit and key,
// costing one token per message counted, so that a batch takes one token per
// message. A batch of many keys is indexed, so that adding stays constant
// time.
type costs struct {
	reqs   []ratelimit.Request
	owners []*limit
	index  map[costKey]int
}

type costKey struct {
	l   *limit
	key string
}

// indexFrom is the number of requests from which costs are indexed.
const indexFrom = 8

func (c *costs) add(l *limit, key string) {
	if c.index == nil && len(c.reqs) >= indexFrom {
		c.index = make(map[costKey]int, 2*len(c.reqs))
		for i := range c.reqs {
			c.index[costKey{c.owners[i], c.reqs[i].Key}] = i
		}
	}
	i := -1
	if c.index != nil {
		if j, ok := c.index[costKey{l, key}]; ok {
			i = j
		}
	} else {
		for j := range c.reqs {
			if c.owners[j] == l && c.reqs[j].Key == key {
				i = j
				break
			}
		}
	}
	if i >= 0 {
		c.reqs[i].Cost++
		return
	}
	if c.index != nil {
		c.index[costKey{l, key}] = len(c.reqs)
	}
	c.reqs = append(c.reqs, ratelimit.Request{Store: l.store, Key: key, Cost: 1, Limit: l.lim})
	c.owners = append(c.owners, l)
}

// envelope is what the model is told of a denial.
func (d *denial) envelope() envelope.Envelope {
	l := d.limit
	if d.cost > l.lim.Burst {
		// Waiting cannot help: the bucket never holds that many tokens.
		return envelope.New(envelope.RateLimited, fmt.Sprintf("Rate limit exceeded: this batch counts %s against the limit %s, which allows at most %d at once (%s), so it can never pass as one request",
			countOf(d.cost, l.methods), l.name, l.lim.Burst, l.describe())).
			Suggest(fmt.Sprintf("Split the batch into requests of at most %s each, or send them one at a time.", countOf(l.lim.Burst, l.methods))).
			Details(l.details...).
			Envelope()
	}
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
//
// A batch holding more than maxAnswered requests gets one id-less envelope
// instead, so that a refusal never costs much more than the request.
func (h *Handler) answer(w http.ResponseWriter, x *exchange, env *envelope.Envelope, status int) error {
	h.record(x, env)
	requests := 0
	for i := range x.msgs {
		if x.msgs[i].Kind == jsonrpc.Request {
			requests++
		}
	}
	if requests > maxAnswered {
		return writeJSON(w, status, env, env.AppendRPCError(nil, envelope.NullID, envelope.CodeServerError))
	}
	body := make([]byte, 0, 1024)
	answered := 0
	if x.batch {
		body = append(body, '[')
	}
	for i := range x.msgs {
		m := &x.msgs[i]
		if m.Kind != jsonrpc.Request {
			continue
		}
		if answered > 0 {
			body = append(body, ',')
		}
		answered++
		if isCall(m) {
			body = env.AppendToolResult(body, m.ID)
		} else {
			body = env.AppendRPCError(body, m.ID, envelope.CodeServerError)
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

// maxAnswered bounds the envelopes in one answer.
const maxAnswered = 64

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
