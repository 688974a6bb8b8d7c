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
	"net/textproto"
	"strings"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Template is a checked placeholder template.
type Template struct {
	// Text is the template with the Caddyfile's shorthands expanded.
	Text string
	// Inputs are the parts of the request the template reads.
	Inputs feature.Inputs
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
			t.Inputs.AddHeader(field)
			if field != "Authorization" {
				literal.WriteString(piece)
				break
			}
			// Read as servers read it.
			flush()
			t.parts = append(t.parts, part{mcp: feature.Authorization})
		case strings.HasPrefix(p, "http.request.cookie."):
			t.Inputs.AddCookie(strings.TrimPrefix(p, "http.request.cookie."))
			literal.WriteString(piece)
		case strings.HasPrefix(p, "http.request.uri.query."):
			t.Inputs.AddQuery(strings.TrimPrefix(p, "http.request.uri.query."))
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
