package handler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Keys: the placeholder templates of rate limits and guards (and of the
// principal sessions are bound to), and the values they give. A template
// is checked when the config loads, so that a typo does not silently
// become one bucket shared by every client. A value is
// kept (as a bucket's or a guard's key) in at most maxKeyBytes: a longer one
// is kept as its SHA-256 digest.

// maxKeyBytes bounds the bytes a key value keeps in memory.
const maxKeyBytes = 128

// digestPrefix starts a key kept as a digest, and a key shown as one.
const digestPrefix = "sha256:"

// boundKey returns the key kept for the value v: v itself, or, when v is
// longer than maxKeyBytes (or could be mistaken for a digest), "sha256:" and
// the hex SHA-256 of v: 71 bytes, with collisions out of reach.
func boundKey(v string) string {
	if len(v) <= maxKeyBytes && !strings.HasPrefix(v, digestPrefix) {
		return v
	}
	return digestOf(v)
}

func digestOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return digestPrefix + hex.EncodeToString(sum[:])
}

// shownKey is a key as the status API shows it without log_key: "sha256:"
// and the first 16 hex digits of the SHA-256 of the value, which an
// operator can compute for a value they know
// (printf %s "$KEY" | sha256sum | cut -c1-16).
func shownKey(k string) string {
	if !strings.HasPrefix(k, digestPrefix) {
		k = digestOf(k) // a kept digest is already digestOf the value
	}
	return k[:len(digestPrefix)+16]
}

// requestTemplate is a placeholder template read from a request as the
// servers read it: a rate limit's or a guard's key, or the principal
// sessions are bound to.
type requestTemplate struct {
	// text is the template with the Caddyfile's shorthands expanded.
	text string
	// parts are text split for evaluation.
	parts []keyPart
	// inputs are the parts of the request the template reads.
	inputs keyInputs
}

// keyPart is a piece of a template: a {http.mcp.*} placeholder, read from
// the message the template is evaluated for, or text for the request's
// replacer to expand (literal text and any other placeholder).
type keyPart struct {
	mcp  string
	text string
}

// newRequestTemplate checks and splits a template.
func newRequestTemplate(template string) (*requestTemplate, error) {
	text := expandShorthands(template)
	if err := checkKeyTemplate(text); err != nil {
		return nil, err
	}
	t := &requestTemplate{text: text}
	var literal strings.Builder
	flush := func() {
		if literal.Len() > 0 {
			t.parts = append(t.parts, keyPart{text: literal.String()})
			literal.Reset()
		}
	}
	for piece, p := range piecesOf(text) {
		switch mcp, ours := strings.CutPrefix(p, placeholderPrefix); {
		case p == "":
			literal.WriteString(piece)
		case ours:
			flush()
			t.parts = append(t.parts, keyPart{mcp: mcp})
		case strings.HasPrefix(p, "http.request.header."):
			field := textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(p, "http.request.header."))
			t.inputs.headers = append(t.inputs.headers, field)
			if field != "Authorization" {
				literal.WriteString(piece)
				break
			}
			// Read as servers read it.
			flush()
			t.parts = append(t.parts, keyPart{mcp: authorization})
		case strings.HasPrefix(p, "http.request.cookie."):
			t.inputs.cookies = append(t.inputs.cookies, strings.TrimPrefix(p, "http.request.cookie."))
			literal.WriteString(piece)
		case strings.HasPrefix(p, "http.request.uri.query."):
			t.inputs.queries = append(t.inputs.queries, strings.TrimPrefix(p, "http.request.uri.query."))
			literal.WriteString(piece)
		default:
			literal.WriteString(piece)
		}
	}
	flush()
	return t, nil
}

// value is the template's value for message m of x, unbounded.
func (t *requestTemplate) value(x *exchange, repl *caddy.Replacer, m *jsonrpc.Message) string {
	if len(t.parts) == 1 {
		return t.parts[0].expand(x, repl, m)
	}
	var b strings.Builder
	for _, p := range t.parts {
		b.WriteString(p.expand(x, repl, m))
	}
	return b.String()
}

func (p keyPart) expand(x *exchange, repl *caddy.Replacer, m *jsonrpc.Message) string {
	if p.mcp != "" {
		v, _ := x.value(p.mcp, m)
		return v
	}
	return repl.ReplaceAll(p.text, "")
}

// keyTemplate is the provisioned key template of a rate limit or a guard.
type keyTemplate struct {
	requestTemplate
	// kind and name say whose template it is: "rate_limit" or
	// "concurrency", and the name.
	kind, name string
	// empty counts values that came out empty; warned is when that was
	// last logged (Unix nanoseconds).
	empty  prometheus.Counter
	warned atomic.Int64
	logger *zap.Logger
}

// newKeyTemplate checks and provisions a key template.
func newKeyTemplate(kind, name, template string, logger *zap.Logger) (*keyTemplate, error) {
	t, err := newRequestTemplate(template)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", template, err)
	}
	return &keyTemplate{requestTemplate: *t, kind: kind, name: name, empty: emptyKeys.WithLabelValues(kind, name), logger: logger}, nil
}

// emptyKeyWarnEvery is the least time between two log lines about a
// template's empty values.
const emptyKeyWarnEvery = time.Minute

// eval returns the key of message m of x: the template's value, bounded.
// An empty value is counted, and logged once a minute at most: it puts
// every such request under one shared key.
func (k *keyTemplate) eval(x *exchange, repl *caddy.Replacer, m *jsonrpc.Message) string {
	v := k.value(x, repl, m)
	if v == "" {
		k.empty.Inc()
		now := x.Start.UnixNano()
		if last := k.warned.Load(); now-last >= int64(emptyKeyWarnEvery) && k.warned.CompareAndSwap(last, now) {
			k.logger.Warn("a key template gave an empty value: requests without one share a single key",
				zap.String(k.kind, k.name), zap.String("key", k.text))
		}
	}
	return boundKey(v)
}

// authorization is the {http.mcp.*} placeholder of the Authorization header
// as servers read it, which a key reads in the header's place: "Bearer
// secret", "BEARER  secret" and "bearer\tsecret" are one token to the SDK
// servers, and so one key.
const authorization = "authorization"

// normalizedAuthorization is an Authorization header value as callers
// are compared by it.
var normalizedAuthorization = feature.NormalizedAuthorization

// keyInputs are the parts of a request key templates read (the body aside):
// headers (canonical names), cookies and query parameters. A request may
// give each of them once at most: servers disagree on which of two values
// counts (the first, the last, or all joined), so a client could otherwise
// vary its key at will while the server reads the same credentials.
type keyInputs struct {
	headers, cookies, queries []string
}

func (in *keyInputs) add(o keyInputs) {
	in.headers = sortedUnion(in.headers, o.headers)
	in.cookies = sortedUnion(in.cookies, o.cookies)
	in.queries = sortedUnion(in.queries, o.queries)
}

func sortedUnion(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// repeated reports the first input r gives more than once.
func (in *keyInputs) repeated(r *http.Request) error {
	for _, name := range in.headers {
		if n := len(r.Header[name]); n > 1 {
			return &repeatError{what: "the " + name + " header", count: n}
		}
	}
	if len(in.cookies) > 0 {
		cookies := r.Cookies()
		for _, name := range in.cookies {
			// Caddy's cookie placeholder takes the first cookie of the name
			// in any letter case.
			n := 0
			for _, c := range cookies {
				if strings.EqualFold(c.Name, name) {
					n++
				}
			}
			if n > 1 {
				return &repeatError{what: "the cookie " + clip(name), count: n}
			}
		}
	}
	if len(in.queries) > 0 {
		query := r.URL.Query()
		for _, name := range in.queries {
			if n := len(query[name]); n > 1 {
				return &repeatError{what: "the query parameter " + clip(name), count: n}
			}
		}
	}
	return nil
}

// repeatError is a part of a request given more than once.
type repeatError struct {
	what  string
	count int
	// mcp: an MCP header, whose malformation MCP 2026-07-28 answers with
	// its HeaderMismatch code.
	mcp bool
}

func (e *repeatError) Error() string {
	if e.count == 1 {
		return e.what + " is given"
	}
	return fmt.Sprintf("%s is given %d times", e.what, e.count)
}
