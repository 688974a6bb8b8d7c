// Package keys reads a request with a placeholder template: the key of a
// rate limit's bucket or of a guard's places, the principal a session is
// bound to. A template means the same in a JSON config as in a Caddyfile
// (its shorthands are expanded), and is checked when the config loads, so
// that a typo does not silently become one key shared by every client. It
// reads the request as the servers behind the gateway read it: an
// Authorization header in any spelling of its scheme is one caller, and a
// header, cookie or query parameter it reads may be given once at most
// (Inputs).
package keys

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Template is a checked placeholder template.
type Template struct {
	// Text is the template with the Caddyfile's shorthands expanded.
	Text string
	// Inputs are the parts of the request the template reads.
	Inputs Inputs
	parts  []part
}

// part is a piece of a template: a {http.mcp.*} placeholder, read from
// the message the template is evaluated for, or text for the request's
// replacer to expand (literal text and any other placeholder).
type part struct {
	mcp  string
	text string
}

// Parse checks a template and splits it for evaluation.
func Parse(template string) (*Template, error) {
	text := expandShorthands(template)
	if err := check(text); err != nil {
		return nil, err
	}
	t := &Template{Text: text}
	var literal strings.Builder
	flush := func() {
		if literal.Len() > 0 {
			t.parts = append(t.parts, part{text: literal.String()})
			literal.Reset()
		}
	}
	for piece, p := range piecesOf(text) {
		switch mcp, ours := strings.CutPrefix(p, Prefix); {
		case p == "":
			literal.WriteString(piece)
		case ours:
			flush()
			t.parts = append(t.parts, part{mcp: mcp})
		case strings.HasPrefix(p, "http.request.header."):
			field := textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(p, "http.request.header."))
			t.Inputs.headers = append(t.Inputs.headers, field)
			if field != "Authorization" {
				literal.WriteString(piece)
				break
			}
			// Read as servers read it.
			flush()
			t.parts = append(t.parts, part{mcp: feature.Authorization})
		case strings.HasPrefix(p, "http.request.cookie."):
			t.Inputs.cookies = append(t.Inputs.cookies, strings.TrimPrefix(p, "http.request.cookie."))
			literal.WriteString(piece)
		case strings.HasPrefix(p, "http.request.uri.query."):
			t.Inputs.queries = append(t.Inputs.queries, strings.TrimPrefix(p, "http.request.uri.query."))
			literal.WriteString(piece)
		default:
			literal.WriteString(piece)
		}
	}
	flush()
	return t, nil
}

// Placeholders lists the placeholders of a template, without braces.
func Placeholders(template string) []string {
	var names []string
	for _, p := range piecesOf(template) {
		if p != "" {
			names = append(names, p)
		}
	}
	return names
}

// Value is the template's value for message m of x, unbounded.
func (t *Template) Value(x *feature.Exchange, m *jsonrpc.Message) string {
	if len(t.parts) == 1 {
		return t.parts[0].expand(x, m)
	}
	var b strings.Builder
	for _, p := range t.parts {
		b.WriteString(p.expand(x, m))
	}
	return b.String()
}

func (p part) expand(x *feature.Exchange, m *jsonrpc.Message) string {
	if p.mcp != "" {
		v, _ := x.Value(p.mcp, m)
		return v
	}
	return x.Replacer.ReplaceAll(p.text, "")
}

// Inputs are the parts of a request templates read (the body aside):
// headers (canonical names), cookies and query parameters. A request may
// give each of them once at most: servers disagree on which of two values
// counts (the first, the last, or all joined), so a client could otherwise
// vary its key at will while the server reads the same credentials.
type Inputs struct {
	headers, cookies, queries []string
}

// Add adds what o reads to in.
func (in *Inputs) Add(o Inputs) {
	in.headers = sortedUnion(in.headers, o.headers)
	in.cookies = sortedUnion(in.cookies, o.cookies)
	in.queries = sortedUnion(in.queries, o.queries)
}

func sortedUnion(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Repeated reports, as a *RepeatError, the first input r gives more than
// once.
func (in *Inputs) Repeated(r *http.Request) error {
	for _, name := range in.headers {
		if n := len(r.Header[name]); n > 1 {
			return &RepeatError{What: "the " + name + " header", Count: n}
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
				return &RepeatError{What: "the cookie " + feature.Clip(name), Count: n}
			}
		}
	}
	if len(in.queries) > 0 {
		query := r.URL.Query()
		for _, name := range in.queries {
			if n := len(query[name]); n > 1 {
				return &RepeatError{What: "the query parameter " + feature.Clip(name), Count: n}
			}
		}
	}
	return nil
}

// RepeatError is a part of a request given more than once.
type RepeatError struct {
	What  string
	Count int
	// MCP: an MCP header, whose malformation MCP 2026-07-28 answers with
	// its HeaderMismatch code.
	MCP bool
}

func (e *RepeatError) Error() string {
	if e.Count == 1 {
		return e.What + " is given"
	}
	return fmt.Sprintf("%s is given %d times", e.What, e.Count)
}
