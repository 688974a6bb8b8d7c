package results

import (
	"strconv"
	"unicode/utf8"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// actionPaged counts a result kept whole and answered with its preview.
const actionPaged = "paged"

// mostDigits is the widest number the words and the answers write.
const mostDigits = 1 << 62

// exampleID is as long as every id of a result (resultstore: 43
// characters), for the bounds of what the answers take.
const exampleID = "Xq3vJ0m2RkY8b5hN1cW7dTzL9pE4sA6gUoFiKjVrBn0"

// pageOverhead is the most a paged answer takes beside its preview's
// text.
func (h *held) pageOverhead() int {
	w := paged(h.tool, mostDigits, mostDigits, mostDigits, mostDigits, h.budget, h.b.ttl(), exampleID, h.paging)
	n := len(h.appendHead(nil, w)) + len(`{"type":"text","text":""},`)
	n += len(appendLink(nil, h.tool, exampleID, mostDigits))
	return n + len(`],"isError":false}}`)
}

// ttl is how long the store keeps a result.
func (b *Budgets) ttl() string {
	if b.store == nil {
		return ""
	}
	return ttlWords(b.store.Limits().TTL.String())
}

// appendPaged is the answer to the call whose result was kept as id:
// size bytes of text out of written bytes of response, others blocks left
// out; preview is the text's first bytes, of which what fits in limit is
// given.
func (h *held) appendPaged(preview []byte, limit int, id string, size int64, written, others int, isError bool) []byte {
	n := fitText(preview, limit)
	w := paged(h.tool, written, int(size), n, others, h.budget, h.b.ttl(), id, h.paging)
	out := h.appendHead(make([]byte, 0, h.budget), w)
	out = append(out, `{"type":"text","text":`...)
	out = envelope.AppendJSONString(out, string(preview[:n]))
	out = append(out, "},"...)
	out = appendLink(out, h.tool, id, size)
	out = append(out, `],"isError":`...)
	out = strconv.AppendBool(out, isError)
	return append(out, "}}"...)
}

// appendLink appends the resource_link to result id, of size bytes.
func appendLink(dst []byte, tool, id string, size int64) []byte {
	dst = append(dst, `{"type":"resource_link","uri":`...)
	dst = envelope.AppendJSONString(dst, resultURI(id, 0))
	dst = append(dst, `,"name":`...)
	dst = envelope.AppendJSONString(dst, feature.Clip(tool)+" result")
	dst = append(dst, `,"mimeType":"text/plain","size":`...)
	dst = strconv.AppendInt(dst, size, 10)
	return append(dst, '}')
}

// fitText is how many bytes of text, cut at a character, take at most
// room bytes written in a JSON string (AppendJSONString, without its
// quotes).
func fitText(text []byte, room int) int {
	used, i := 0, 0
	for i < len(text) {
		c, w, n := text[i], 1, 1
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n = 2
		case c < 0x20:
			n = 6
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(text[i:])
			w, n = size, size
			if r == utf8.RuneError && size == 1 {
				if !utf8.FullRune(text[i:]) {
					return i // a character cut short at the end
				}
				n = 6 // written \ufffd
			}
		}
		if used+n > room {
			break
		}
		used += n
		i += w
	}
	return i
}

// ttlWords is a time.Duration's String in words: "1h0m0s" is "1h".
func ttlWords(d string) string {
	for _, zero := range []string{"0s", "0m"} {
		if len(d) > 2 && d[len(d)-2:] == zero && (d[len(d)-3] < '0' || d[len(d)-3] > '9') {
			d = d[:len(d)-2]
		}
	}
	return d
}
