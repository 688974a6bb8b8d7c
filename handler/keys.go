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
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Keys: the placeholder templates of rate limits and guards, and the values
// they give. A template is checked when the config loads, so that a typo
// does not silently become one bucket shared by every client. A value is
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

// keyTemplate is the provisioned key template of a rate limit or a guard.
type keyTemplate struct {
	// text is the template with the Caddyfile's shorthands expanded.
	text string
	// kind and name say whose template it is: "rate_limit" or
	// "concurrency", and the name.
	kind, name string
	// expr is text as the key is evaluated: with the Authorization header
	// read as servers read it.
	expr string
	// inputs are the parts of the request the template reads.
	inputs keyInputs
	// empty counts values that came out empty; warned is when that was
	// last logged (Unix nanoseconds).
	empty  prometheus.Counter
	warned atomic.Int64
}

// newKeyTemplate checks and provisions a key template.
func newKeyTemplate(kind, name, template string) (*keyTemplate, error) {
	text := expandShorthands(template)
	if err := checkKeyTemplate(text); err != nil {
		return nil, fmt.Errorf("key %q: %w", template, err)
	}
	k := &keyTemplate{text: text, expr: text, kind: kind, name: name, empty: emptyKeys.WithLabelValues(kind, name)}
	for _, p := range placeholdersOf(text) {
		switch {
		case strings.HasPrefix(p, "http.request.header."):
			field := textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(p, "http.request.header."))
			k.inputs.headers = append(k.inputs.headers, field)
			if field == "Authorization" {
				k.expr = strings.ReplaceAll(k.expr, "{"+p+"}", "{"+authorizationPlaceholder+"}")
			}
		case strings.HasPrefix(p, "http.request.cookie."):
			k.inputs.cookies = append(k.inputs.cookies, strings.TrimPrefix(p, "http.request.cookie."))
		case strings.HasPrefix(p, "http.request.uri.query."):
			k.inputs.queries = append(k.inputs.queries, strings.TrimPrefix(p, "http.request.uri.query."))
		}
	}
	return k, nil
}

// authorizationPlaceholder is the Authorization header as servers read it,
// which a key reads in its place: "Bearer  secret", "BEARER secret" and
// "bearer\tsecret" are one token to the SDK servers, and so one key.
const authorizationPlaceholder = "http.mcp.authorization"

// normalizedAuthorization is an Authorization header value with its scheme
// in lower case and its runs of whitespace made one space.
func normalizedAuthorization(v string) string {
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return ""
	}
	fields[0] = strings.ToLower(fields[0])
	return strings.Join(fields, " ")
}

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
}

func (e *repeatError) Error() string {
	return fmt.Sprintf("%s is given %d times", e.what, e.count)
}

// emptyKeyWarnEvery is the least time between two log lines about a
// template's empty values.
const emptyKeyWarnEvery = time.Minute

// eval returns the key of message i of x: the template's value, bounded.
// An empty value is counted, and logged once a minute at most: it puts
// every such request under one shared key.
func (k *keyTemplate) eval(h *Handler, x *exchange, repl *caddy.Replacer, i int) string {
	x.cur = i
	v := repl.ReplaceAll(k.expr, "")
	x.cur = 0
	if v == "" {
		k.empty.Inc()
		now := x.start.UnixNano()
		if last := k.warned.Load(); now-last >= int64(emptyKeyWarnEvery) && k.warned.CompareAndSwap(last, now) {
			h.logger.Warn("a key template gave an empty value: requests without one share a single key",
				zap.String(k.kind, k.name), zap.String("key", k.text))
		}
	}
	return boundKey(v)
}

// expandShorthands expands the Caddyfile's placeholder shorthands, such as
// {client_ip} for {http.vars.client_ip}, so that a key template means the
// same in a JSON config as in a Caddyfile.
func expandShorthands(template string) string {
	seg := caddyfile.Segment{{Text: template}}
	httpcaddyfile.NewShorthandReplacer().ApplyToSegment(&seg)
	return seg[0].Text
}

// placeholdersOf lists the placeholders of a template, without braces, as
// Caddy's replacer finds them (a backslash escapes a brace).
func placeholdersOf(text string) []string {
	var names []string
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++
		case '{':
			end := strings.IndexByte(text[i+1:], '}')
			if end < 0 {
				return names
			}
			names = append(names, text[i+1:i+1+end])
			i += end + 1
		}
	}
	return names
}

// checkKeyTemplate refuses placeholders that would expand to nothing on every
// request: an unknown shorthand ({clientip}), an unknown namespace, or an
// unknown name under http.request or http.mcp; and the request body, which
// would cost a copy of the body per message. Placeholders of other
// http.* namespaces (http.vars, http.auth, http.regexp, ...) are set by
// other handlers, and are taken as written.
func checkKeyTemplate(text string) error {
	for _, p := range placeholdersOf(text) {
		namespace, rest, dotted := strings.Cut(p, ".")
		switch {
		case !dotted:
			return unknownPlaceholder(p, shorthandNames)
		case namespace == "env" || namespace == "system" || namespace == "time" || namespace == "file":
		case namespace != "http":
			return fmt.Errorf("unknown placeholder {%s}: placeholders are {http.*}, {env.*}, {system.*}, {time.*} or a shorthand such as {client_ip}", p)
		case strings.HasPrefix(rest, "mcp."):
			if !slices.Contains(mcpPlaceholders, p) {
				return unknownPlaceholder(p, mcpPlaceholders)
			}
		case p == "http.request.body" || p == "http.request.body_base64":
			return fmt.Errorf("{%s} copies the whole request body for every message a limit counts, and differs with every id: key on who calls or on what, such as {client_ip}, a header or {http.mcp.tool}", p)
		case strings.HasPrefix(rest, "request."):
			if !knownRequestPlaceholder(p) {
				return unknownPlaceholder(p, requestCandidates(p))
			}
		}
	}
	return nil
}

func unknownPlaceholder(p string, known []string) error {
	if near := nearest(p, known); near != "" {
		return fmt.Errorf("unknown placeholder {%s}: did you mean {%s}?", p, near)
	}
	return fmt.Errorf("unknown placeholder {%s}", p)
}

// mcpPlaceholders are the placeholders the handler provides.
var mcpPlaceholders = []string{
	"http.mcp.method", "http.mcp.tool", "http.mcp.id", "http.mcp.session_id",
	"http.mcp.protocol_version", "http.mcp.batch_size", "http.mcp.error_code",
	authorizationPlaceholder,
}

// shorthandNames are the Caddyfile shorthands most used in keys, for
// suggestions.
var shorthandNames = []string{
	"client_ip", "remote_host", "remote", "host", "method", "path", "uri",
	"header.Authorization", "vars.client_ip",
}

// requestPlaceholders are the fixed {http.request.*} placeholders of Caddy
// v2.11, and requestPrefixes those that end in a name or an index.
var (
	requestPlaceholders = []string{
		"http.request.method", "http.request.scheme", "http.request.proto", "http.request.proto_name",
		"http.request.host", "http.request.port", "http.request.hostport", "http.request.local",
		"http.request.local.host", "http.request.local.port", "http.request.remote",
		"http.request.remote.host", "http.request.remote.port", "http.request.uri",
		"http.request.uri_escaped", "http.request.uri.path", "http.request.uri.path_escaped",
		"http.request.uri.path.file", "http.request.uri.path.dir", "http.request.uri.path.file.base",
		"http.request.uri.path.file.ext", "http.request.uri.query", "http.request.uri.query_escaped",
		"http.request.uri.prefixed_query", "http.request.duration", "http.request.duration_ms",
		"http.request.uuid", "http.request.body", "http.request.body_base64", "http.request.orig_method",
		"http.request.orig_uri", "http.request.orig_uri.path", "http.request.orig_uri.path.file",
		"http.request.orig_uri.path.file_escaped", "http.request.orig_uri.path.dir",
		"http.request.orig_uri.query", "http.request.orig_uri.prefixed_query",
	}
	requestPrefixes = []string{
		"http.request.header.", "http.request.cookie.", "http.request.host.labels.",
		"http.request.tls.", "http.request.uri.path.", "http.request.uri.query.",
		"http.request.orig_uri.path.", "http.request.remote.host/",
	}
)

// requestCandidates are what an unknown {http.request.*} placeholder may
// have meant: the fixed ones, and each prefix with the name p ends in
// ({http.request.headers.X-Key} for {http.request.header.X-Key}).
func requestCandidates(p string) []string {
	candidates := slices.Clone(requestPlaceholders)
	if parts := strings.SplitN(p, ".", 4); len(parts) == 4 {
		for _, prefix := range requestPrefixes {
			if strings.Count(prefix, ".") == 3 {
				candidates = append(candidates, prefix+parts[3])
			}
		}
	}
	return candidates
}

func knownRequestPlaceholder(p string) bool {
	if slices.Contains(requestPlaceholders, p) {
		return true
	}
	for _, prefix := range requestPrefixes {
		if len(p) > len(prefix) && strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// nearest returns the candidate closest to s, if it is close enough to be
// what was meant: at most a third of s's length in edits, and at most 3.
func nearest(s string, candidates []string) string {
	best, bestDist := "", min(3, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, or bound when
// it is bound or more.
func editDistance(a, b string, bound int) int {
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], bound)
}
