package results

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// Reading a kept result (feature.Answerer): resources/read of
// caddymcp://results/<id>, or caddymcp://results/<id>?from=<offset>, is
// answered by the gateway with the page of the text that begins there, as
// much as fits the page budget (pageBudget), cut at a character; its
// _meta names the next page's URI ("caddymcp.dev/next", absent on the
// last), the text's size and the page's offset. Only the result's owner
// (ownerOf: the same principal, or the same session) reads it: any other
// read, like one of an expired, made-up or malformed link, is answered
// the same NOT_FOUND. The lists (resources/list, resources/templates/list)
// pass: results are not listed.

// The _meta keys of a page.
const (
	MetaNext = "caddymcp.dev/next"
	MetaSize = "caddymcp.dev/size"
	MetaFrom = "caddymcp.dev/from"
)

// minPage is the least budget of a page, and minText the least text a
// page gives (but the last).
const (
	minPage = 4 << 10
	minText = 1 << 10
)

// Answer answers resources/read of a result kept.
func (b *Budgets) Answer(x *feature.Exchange) http.Handler {
	m := x.Single()
	if b.store == nil || m == nil || m.Kind != jsonrpc.Request || string(m.Method) != "resources/read" || !bytes.HasPrefix(m.URI, []byte(URIPrefix)) {
		return nil
	}
	rd := &pageRequest{rid: slices.Clone(m.ID), owner: ownerOf(x), span: callSpan(x)}
	rd.id, rd.from, rd.ok = parseURI(string(m.URI))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := b.page(r.Context(), rd)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// pageRequest is a read of result id from byte from, for owner (ok: the
// link was read), traced by span (nil: not traced).
type pageRequest struct {
	rid   json.RawMessage
	id    string
	from  int64
	ok    bool
	owner string
	span  trace.Span
}

// parseURI reads caddymcp://results/<id>[?from=<offset>].
func parseURI(uri string) (id string, from int64, ok bool) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", 0, false
	}
	id, query, hasQuery := strings.Cut(rest, "?")
	if !hasQuery {
		return id, 0, id != ""
	}
	v, ok := strings.CutPrefix(query, "from=")
	if !ok || v == "" || v[0] < '0' || v[0] > '9' {
		return "", 0, false
	}
	from, err := strconv.ParseInt(v, 10, 64)
	return id, from, err == nil && id != ""
}

// pageBudget is a page's budget: the default budget (max, or tokens), the
// strictest when there is none, and at least minPage. A read does not say
// which tool's result it reads.
func (b *Budgets) pageBudget() int {
	budget := b.cfg.Max
	if t := b.cfg.Tokens * BytesPerToken; t > 0 && (budget == 0 || t < budget) {
		budget = t
	}
	if budget == 0 {
		budget = int64(b.strictest())
	}
	return max(int(budget), minPage)
}

// page is the answer to the read rd.
func (b *Budgets) page(ctx context.Context, rd *pageRequest) []byte {
	if !rd.ok || rd.owner == "" {
		b.logRead(pageNotFound, rd.id, rd.from, 0, rd.owner)
		e := notFound()
		return e.AppendRPCError(nil, rd.rid, envelope.CodeServerError)
	}
	// The text's room is the budget less the answer around it; at least
	// minText, so that a request id as long as the budget (the client's
	// own choice) still reads on rather than end at an empty page.
	room := max(b.pageBudget()-len(appendPage(nil, rd.rid, rd.id, mostDigits, nil, mostDigits, mostDigits)), minText)
	p, err := b.store.Read(ctx, rd.id, rd.owner, rd.from, max(0, min(room, b.store.MaxRead())))
	var e envelope.Envelope
	switch {
	case errors.Is(err, resultstore.ErrNotFound):
		b.logRead(pageNotFound, rd.id, rd.from, 0, rd.owner)
		e = notFound()
	case err != nil:
		b.logger.Warn("a page of a tool's result could not be read", zap.Error(err))
		b.logRead(pageFailed, rd.id, rd.from, 0, rd.owner)
		e = readFailed()
	}
	if err != nil {
		return e.AppendRPCError(nil, rd.rid, envelope.CodeServerError)
	}
	traceRead(rd.span, resultURI(rd.id, rd.from), p.Note)
	n := fitText(p.Data, room)
	next := rd.from + int64(n)
	if next >= p.Size || n == 0 {
		next = -1
	}
	b.logRead(pageRead, rd.id, rd.from, n, rd.owner)
	return appendPage(make([]byte, 0, b.pageBudget()), rd.rid, rd.id, rd.from, p.Data[:n], next, p.Size)
}

// appendPage appends the answer to a read: text, from byte from of the
// result id's size bytes, and the next page's offset (-1: none).
func appendPage(dst []byte, rid json.RawMessage, id string, from int64, text []byte, next, size int64) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, rid...)
	dst = append(dst, `,"result":{"contents":[{"uri":`...)
	dst = envelope.AppendJSONString(dst, resultURI(id, from))
	dst = append(dst, `,"mimeType":"text/plain","text":`...)
	dst = envelope.AppendJSONString(dst, string(text))
	dst = append(dst, `}],"_meta":{`...)
	if next >= 0 {
		dst = append(dst, `"`+MetaNext+`":`...)
		dst = envelope.AppendJSONString(dst, resultURI(id, next))
		dst = append(dst, ',')
	}
	dst = append(dst, `"`+MetaSize+`":`...)
	dst = strconv.AppendInt(dst, size, 10)
	dst = append(dst, `,"`+MetaFrom+`":`...)
	dst = strconv.AppendInt(dst, from, 10)
	return append(dst, "}}}"...)
}
