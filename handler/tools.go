package handler

import (
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/logsample"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Learning tools and checking calls against them (Handler.ValidateCalls): the
// response step reads the tools/list answers passing through (a JSON body
// or the response event of a stream, every page), and keeps each tool's
// inputSchema per endpoint and authorization scope (toolschema.Catalog);
// the request step checks a tools/call's arguments against it after the
// rate limits have counted the call and before it takes a guard place.

// catalog is the process's tools, shared by every handler that validates
// and kept across config reloads: clients list tools once, when they
// connect, and a reload must not leave their calls unchecked. Lists are
// keyed by endpoint (host and path), so sites do not mix. Its bound is
// the largest max_catalog_size of the config loaded last.
var (
	catalogOnce sync.Once
	catalog     atomic.Pointer[toolschema.Catalog]
)

func sharedCatalog() *toolschema.Catalog {
	catalogOnce.Do(func() { catalog.Store(toolschema.NewCatalog(0)) })
	return catalog.Load()
}

// heldBytes gathers an answer's bytes up to a bound, in chunks never
// copied as they fill: what it allocates is what it holds, plus at most a
// chunk, so that an answer found too long on the way costs the bound and
// no more (a slice grown by append allocates about five times what it
// ends up holding, at Go's growth of large slices).
type heldBytes struct {
	chunks [][]byte
	n      int
}

// Chunks grow from firstHeld to maxHeld bytes, each twice the last.
const (
	firstHeld = 4 << 10
	maxHeld   = 256 << 10
)

// add holds p too, unless that makes more than limit bytes (then it holds
// nothing more, and reports false); the chunks never take more than limit.
// want is the length the answer declared, -1 when it declared none: an
// answer declared longer than limit is refused at once, and what one
// declares is held in one chunk.
func (h *heldBytes) add(p []byte, limit int, want int64) bool {
	if h.n+len(p) > limit || want > int64(limit) {
		return false
	}
	for len(p) > 0 {
		last := len(h.chunks) - 1
		if last < 0 || len(h.chunks[last]) == cap(h.chunks[last]) {
			size := firstHeld
			if last >= 0 {
				size = min(2*cap(h.chunks[last]), maxHeld)
			}
			if want > int64(h.n) {
				size = int(want) - h.n
			}
			size = max(min(size, limit-h.n), len(p))
			h.chunks = append(h.chunks, make([]byte, 0, size))
			last++
		}
		k := min(len(p), cap(h.chunks[last])-len(h.chunks[last]))
		h.chunks[last] = append(h.chunks[last], p[:k]...)
		h.n += k
		p = p[k:]
	}
	return true
}

// bytes is what is held, in one slice.
func (h *heldBytes) bytes() []byte {
	if len(h.chunks) == 1 {
		return h.chunks[0]
	}
	out := make([]byte, 0, h.n)
	for _, c := range h.chunks {
		out = append(out, c...)
	}
	return out
}

// listKey is the list a request's tools come from: the endpoint it was
// sent to, as Caddy routed it (the listener, the scheme, the host in lower
// case without its port, the path before any handle_path stripped it, and
// the replica a session is pinned to), and its authorization scope: the
// credentials' digest, or "anonymous" (never the public scope, which only
// a server's cacheScope public opens).
func listKey(x *feature.Exchange) toolschema.ListKey {
	return toolschema.ListKey{Endpoint: endpointOf(x), Scope: credentialsScope(x.Request)}
}

// lastEndpoint is the endpoint endpointOf worked out last: a request to
// the same one (nearly every request, on most gateways) reuses its string
// instead of allocating another.
var lastEndpoint atomic.Pointer[string]

// endpointOf is the endpoint part of a request's list key.
func endpointOf(x *feature.Exchange) string {
	r := x.Request
	var arr [128]byte
	b := arr[:0]
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		// As addr.String() writes it, without allocating.
		if ta, ok := addr.(*net.TCPAddr); ok && len(ta.IP) > 0 {
			ap := ta.AddrPort()
			b = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).AppendTo(b)
		} else {
			b = append(b, addr.String()...)
		}
	}
	if r.TLS != nil {
		b = append(b, " https "...)
	} else {
		b = append(b, " http "...)
	}
	host := r.Host
	if strings.IndexByte(host, ':') >= 0 {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	b = append(b, strings.ToLower(host)...)
	p := r.URL.Path
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		p = orig.URL.Path
	}
	b = append(b, p...)
	if x.Replica != "" {
		b = append(b, ' ')
		b = append(b, x.Replica...)
	}
	if last := lastEndpoint.Load(); last != nil && *last == string(b) {
		return *last
	}
	e := string(b)
	lastEndpoint.Store(&e)
	return e
}

// credentialsScope is the scope part of a request's list key: 16 bytes of
// digest, as bytes (the catalog keeps one per caller).
func credentialsScope(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(normalizedAuthorization(auth)))
	return string(sum[:16])
}

// validate checks a tools/call's arguments against the tool's learned
// schema, answering the call itself when they break it (a CallToolResult
// with the §6 text, isError) or when the tool is not in a complete list
// (UNKNOWN_ACTION); it reports whether it answered. A call it cannot check
// passes, and is counted.
func (h *Handler) validate(w http.ResponseWriter, x *exchange) (bool, error) {
	if h.catalog == nil {
		return false, nil
	}
	if h.policy != nil {
		if answered, err := h.refuseHidden(w, x); answered {
			return true, err
		}
	}
	if x.batch || len(x.msgs) != 1 {
		// A batch's arguments pass unchecked, but a tool whose contract
		// broke is refused in a batch as alone: the whole batch is.
		for i := range x.msgs {
			m := &x.msgs[i]
			if !isCall(m) {
				continue
			}
			if breaking, refused := h.refuseBroken(x, string(m.Name)); refused {
				env := contractBrokenInBatch(string(m.Name), breaking)
				return true, h.answer(w, x, &env, http.StatusOK)
			}
			if h.ValidateCalls {
				validUnchecked.Inc()
			}
		}
		return false, nil
	}
	if !isCall(&x.msgs[0]) {
		return false, nil
	}
	m := &x.msgs[0]
	tool := string(m.Name)
	if breaking, refused := h.refuseBroken(x, tool); refused {
		env := contractBroken(tool, breaking)
		return true, h.answer(w, x, &env, http.StatusOK)
	}
	if !h.ValidateCalls && (h.policy == nil || !h.policy.Hides()) {
		return false, nil
	}
	// A tool a complete, fresh list lacks is unknown; under a policy that
	// hides tools, it gets the answer a hidden one gets, so that the two
	// look alike, whatever the call's size.
	schema, found, names := h.catalog.Lookup(listKey(x.view()), tool, x.start)
	if found == toolschema.Absent {
		if h.ValidateCalls {
			validUnknown.Inc()
		}
		env := unknownTool(tool, h.nearestAllowed(tool, names))
		return true, h.answer(w, x, &env, http.StatusOK)
	}
	if !h.ValidateCalls {
		return false, nil
	}
	if found != toolschema.Known {
		// No schema to check with: the call passes, as the server reads
		// it.
		validUnchecked.Inc()
		return false, nil
	}
	problems, err := schema.CheckCall(x.r.Context(), x.body)
	switch {
	case errors.Is(err, toolschema.ErrOverBudget):
		// Checking it would cost more than its bytes allow: it passes,
		// as a call whose tool is not known does.
		validOverBudget.Inc()
		h.logOverBudget(tool, len(x.body))
		return false, nil
	case err != nil:
		// The client left: nothing is checked for it any more, and the
		// forward step gives up on it.
		validUnchecked.Inc()
		return false, nil
	case problems == nil:
		validValid.Inc()
		return false, nil
	}
	validInvalid.Inc()
	env := argumentsRefused(tool, len(problems))
	h.answered(x, &env)
	text := envelope.ValidationText(tool, problems)
	texts := []string{text}
	if aw := h.awareness(x, tool); aw != "" {
		texts = append(texts, aw)
	}
	body := appendTextResult(make([]byte, 0, 96+len(text)+len(m.ID)), m.ID, true, texts...)
	return true, writeJSON(w, http.StatusOK, &env, body)
}

// overBudgetEvery is the least time between two log lines of calls passed
// unchecked because checking them would cost more than their budget: the
// first is logged at once, the ones after it counted on one line a minute
// (every call is counted by caddy_mcp_validations_total).
const overBudgetEvery = time.Minute

// overBudget is the one kind of line logOverBudget writes.
type overBudget struct{}

// logOverBudget logs a call passed unchecked for its cost, unless one was
// logged within overBudgetEvery: then it is only counted.
func (h *Handler) logOverBudget(tool string, size int) {
	if log, _ := h.overBudgetLog.Note(overBudget{}, overBudget{}); log {
		h.logger.Warn("checking a call's arguments would cost more than their budget: the call passes unchecked",
			zap.String("tool", clip(tool)), zap.Int("bytes", size))
	}
}

// logOverBudgetRepeated logs the calls passed unchecked for their cost and
// not logged.
func (h *Handler) logOverBudgetRepeated(c logsample.Count[overBudget]) {
	h.logger.Warn("more calls' arguments would cost more than their budget to check: they passed unchecked",
		zap.Int64("repeated", c.N))
}

// absent reports whether the complete, fresh list of the exchange's tools
// lacks tool.
func (h *Handler) absent(x *exchange, tool string) bool {
	_, found, _ := h.catalog.Lookup(listKey(x.view()), tool, x.start)
	return found == toolschema.Absent
}

// nearestAllowed are the five names nearest to tool among names (the
// catalog's, which it leaves as they are), none of them hidden by the
// tools policy.
func (h *Handler) nearestAllowed(tool string, names []string) []string {
	if h.policy != nil {
		allowed := make([]string, 0, len(names))
		for _, name := range names {
			if h.policy.Allowed(name) {
				allowed = append(allowed, name)
			}
		}
		names = allowed
	}
	return toolschema.Nearest(tool, names, 5)
}

var (
	validations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "validations_total",
		Help: "tools/call arguments checked against the learned inputSchema, by outcome: valid, invalid, unknown_tool, unchecked (no schema known, or the client left: the call passed), or over_budget (checking it would cost more than its bytes allow: the call passed).",
	}, []string{"outcome"})
	// The outcomes' counters, looked up once rather than on every call.
	validValid      = validations.WithLabelValues("valid")
	validInvalid    = validations.WithLabelValues("invalid")
	validUnknown    = validations.WithLabelValues("unknown_tool")
	validUnchecked  = validations.WithLabelValues("unchecked")
	validOverBudget = validations.WithLabelValues("over_budget")
	toolsLearned    = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tools_learned_total",
		Help: "Tools learned from tools/list answers, with a schema that compiles.",
	})
	badSchemas = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tool_schemas_invalid_total",
		Help: "Tools listed with an inputSchema that does not compile (their calls pass unchecked).",
	})
	catalogState = catalogCollector{
		bytes:     prometheus.NewDesc("caddy_mcp_tool_catalog_bytes", "Memory the tools learned from tools/list answers take: lists, compiled schemas, and an entry per endpoint and scope.", nil, nil),
		maxBytes:  prometheus.NewDesc("caddy_mcp_tool_catalog_max_bytes", "The bound of that memory (max_catalog_size).", nil, nil),
		keys:      prometheus.NewDesc("caddy_mcp_tool_catalog_keys", "Endpoints and scopes (callers' credentials, or public) given a tool list.", nil, nil),
		lists:     prometheus.NewDesc("caddy_mcp_tool_catalog_lists", "Distinct tool lists held, each once however many keys were given it.", nil, nil),
		schemas:   prometheus.NewDesc("caddy_mcp_tool_catalog_schemas", "Distinct compiled inputSchemas held.", nil, nil),
		evictions: prometheus.NewDesc("caddy_mcp_tool_catalog_evictions_total", "Keys whose list was dropped to stay within max_catalog_size (their calls pass unchecked until listed again).", nil, nil),
	}
)

// catalogCollector reads the catalog at scrape time.
type catalogCollector struct {
	bytes, maxBytes, keys, lists, schemas, evictions *prometheus.Desc
}

func (c catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.maxBytes, c.keys, c.lists, c.schemas, c.evictions} {
		ch <- d
	}
}

func (c catalogCollector) Collect(ch chan<- prometheus.Metric) {
	cat := catalog.Load()
	if cat == nil {
		return
	}
	s := cat.Stats()
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.maxBytes, prometheus.GaugeValue, float64(s.MaxBytes))
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(s.Keys))
	ch <- prometheus.MustNewConstMetric(c.lists, prometheus.GaugeValue, float64(s.Lists))
	ch <- prometheus.MustNewConstMetric(c.schemas, prometheus.GaugeValue, float64(s.Schemas))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(s.Evictions))
}
