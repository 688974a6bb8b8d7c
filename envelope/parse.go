package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parsed is an envelope read back from text.
type Parsed struct {
	Envelope
	// Raw is the envelope's text as found, from <tool_error to </tool_error>.
	Raw string
}

// ErrNoEnvelope is returned when the text holds no <tool_error> element.
var ErrNoEnvelope = errors.New("envelope: no <tool_error> found")

const (
	openTag  = "<tool_error"
	closeTag = "</tool_error>"
)

// Parse reads the first envelope found in text. It is tolerant the way the
// reference client is: text around the envelope, whitespace and indentation
// between elements (the pretty-printed form of the documentation), either
// quote style for attributes, and unknown sections are accepted. A missing or
// empty severity reads as "error", as it renders. Entities are unescaped in
// one pass, which is equivalent to replacing &amp; last.
func Parse(text string) (Parsed, error) {
	start := indexOpenTag(text)
	if start < 0 {
		return Parsed{}, ErrNoEnvelope
	}
	p := parser{s: text, pos: start + len(openTag)}
	var out Parsed
	out.Severity = SeverityError
	if err := p.attrs(func(name, value string) {
		switch name {
		case "code":
			out.Code = Code(value)
		case "severity":
			if value != "" {
				out.Severity = Severity(value)
			}
		}
	}); err != nil {
		return Parsed{}, err
	}
	end := strings.Index(text[p.pos:], closeTag)
	if end < 0 {
		return Parsed{}, fmt.Errorf("envelope: %s is never closed", openTag)
	}
	end += p.pos
	body := parser{s: text[:end], pos: p.pos}
	if err := body.sections(&out.Envelope); err != nil {
		return Parsed{}, err
	}
	out.Raw = text[start : end+len(closeTag)]
	return out, nil
}

// indexOpenTag finds "<tool_error" followed by whitespace or ">", so that a
// longer element name is not mistaken for the envelope.
func indexOpenTag(text string) int {
	for off := 0; ; {
		i := strings.Index(text[off:], openTag)
		if i < 0 {
			return -1
		}
		i += off
		if next := i + len(openTag); next < len(text) && (text[next] == '>' || isSpace(text[next])) {
			return i
		}
		off = i + len(openTag)
	}
}

// ParseResult reads the envelope out of a CallToolResult's JSON: the first
// text content block that holds one.
func ParseResult(result []byte) (Parsed, error) {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return Parsed{}, fmt.Errorf("envelope: reading result: %w", err)
	}
	for _, c := range r.Content {
		if c.Type != "text" {
			continue
		}
		if p, err := Parse(c.Text); !errors.Is(err, ErrNoEnvelope) {
			return p, err
		}
	}
	return Parsed{}, ErrNoEnvelope
}

var unescaper = strings.NewReplacer(
	"&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&#39;", "'", "&#34;", `"`, "&amp;", "&",
)

func unescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return unescaper.Replace(s)
}

// parser reads the envelope's grammar from s, starting at pos.
type parser struct {
	s   string
	pos int
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func (p *parser) skipSpace() {
	for p.pos < len(p.s) && isSpace(p.s[p.pos]) {
		p.pos++
	}
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("envelope: at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

// attrs reads name="value" pairs up to and including the tag's closing '>'.
func (p *parser) attrs(set func(name, value string)) error {
	for {
		p.skipSpace()
		if p.pos >= len(p.s) {
			return p.errorf("unterminated tag")
		}
		if p.s[p.pos] == '>' {
			p.pos++
			return nil
		}
		nameEnd := strings.IndexAny(p.s[p.pos:], "= \t\r\n>")
		if nameEnd <= 0 {
			return p.errorf("malformed attribute")
		}
		name := p.s[p.pos : p.pos+nameEnd]
		p.pos += nameEnd
		p.skipSpace()
		if p.pos >= len(p.s) || p.s[p.pos] != '=' {
			return p.errorf("attribute %q has no value", name)
		}
		p.pos++
		p.skipSpace()
		if p.pos >= len(p.s) || (p.s[p.pos] != '"' && p.s[p.pos] != '\'') {
			return p.errorf("attribute %q is not quoted", name)
		}
		quote := p.s[p.pos]
		p.pos++
		valueEnd := strings.IndexByte(p.s[p.pos:], quote)
		if valueEnd < 0 {
			return p.errorf("attribute %q is not closed", name)
		}
		set(name, unescape(p.s[p.pos:p.pos+valueEnd]))
		p.pos += valueEnd + 1
	}
}

// openElement reads "<name" and its attributes, and returns the name.
func (p *parser) openElement(set func(name, value string)) (string, error) {
	p.skipSpace()
	if p.pos >= len(p.s) || p.s[p.pos] != '<' {
		return "", p.errorf("expected an element")
	}
	p.pos++
	nameEnd := strings.IndexAny(p.s[p.pos:], " \t\r\n>")
	if nameEnd <= 0 {
		return "", p.errorf("malformed element")
	}
	name := p.s[p.pos : p.pos+nameEnd]
	p.pos += nameEnd
	if set == nil {
		set = func(string, string) {}
	}
	return name, p.attrs(set)
}

// content returns the raw content of the element name, up to its closing tag,
// and moves past that tag. Escaping guarantees the closing tag cannot occur
// inside the content.
func (p *parser) content(name string) (string, error) {
	closing := "</" + name + ">"
	end := strings.Index(p.s[p.pos:], closing)
	if end < 0 {
		return "", p.errorf("<%s> is never closed", name)
	}
	c := p.s[p.pos : p.pos+end]
	p.pos += end + len(closing)
	return c, nil
}

// sections reads the envelope's child elements into e.
func (p *parser) sections(e *Envelope) error {
	for {
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil
		}
		name, err := p.openElement(nil)
		if err != nil {
			return err
		}
		c, err := p.content(name)
		if err != nil {
			return err
		}
		switch name {
		case "message":
			e.Message = unescape(c)
		case "recovery":
			e.Recovery = unescape(c)
		case "retry_after":
			if e.RetryAfter, err = parseRetryAfter(c); err != nil {
				return p.errorf("%v", err)
			}
		case "available_actions":
			if e.Actions, err = items(c, "action", nil); err != nil {
				return err
			}
		case "details":
			keys := map[int]string{}
			values, err := items(c, "detail", func(i int, name, value string) {
				if name == "key" {
					keys[i] = value
				}
			})
			if err != nil {
				return err
			}
			if len(keys) != len(values) {
				return p.errorf("every <detail> needs one key")
			}
			for i := range values {
				e.Details = append(e.Details, Detail{Key: keys[i], Value: values[i]})
			}
		}
	}
}

// items reads a list of <item> elements and returns their unescaped text.
// set, if not nil, receives each item's attributes with the item's index.
func items(list, item string, set func(i int, name, value string)) ([]string, error) {
	p := parser{s: list}
	var out []string
	for {
		p.skipSpace()
		if p.pos >= len(p.s) {
			return out, nil
		}
		var attr func(name, value string)
		if set != nil {
			i := len(out)
			attr = func(name, value string) { set(i, name, value) }
		}
		name, err := p.openElement(attr)
		if err != nil {
			return nil, err
		}
		if name != item {
			return nil, p.errorf("unexpected <%s> in a list of <%s>", name, item)
		}
		c, err := p.content(name)
		if err != nil {
			return nil, err
		}
		out = append(out, unescape(c))
	}
}

// parseRetryAfter reads "N seconds" (or "N second").
func parseRetryAfter(s string) (float64, error) {
	n, unit, _ := strings.Cut(strings.TrimSpace(s), " ")
	if unit != "seconds" && unit != "second" {
		return 0, fmt.Errorf("retry_after %q: want \"N seconds\"", s)
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return 0, fmt.Errorf("retry_after %q: %w", s, err)
	}
	// ParseFloat accepts "NaN", "Inf" and negatives, none of which a rendered
	// envelope can carry.
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("retry_after %q: want a finite number of seconds, not negative", s)
	}
	return f, nil
}
