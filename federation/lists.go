package federation

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// Merged lists. A list is asked of every server in parallel, every page
// of it, each server within list_timeout and its bounds (max_list_size,
// max_list_items): a server that is down, slow or answers too much is
// left out of the list, and logged, and the others are listed. Tools and
// prompts are named (names.go); resources and templates keep their URIs,
// the first server's kept when two give one. The merged list is paged to
// the client page_size entries at a time, with a cursor sealed by the
// node: a cursor it did not write, or one written for another session or
// another list, is refused.

// kind is a list the federation merges.
type kind struct {
	method string
	member string // the result's member holding the entries
	key    string // the entries' member that names them
	named  bool   // the entries are named (tools, prompts), not located
}

var (
	toolsList     = &kind{"tools/list", "tools", "name", true}
	promptsList   = &kind{"prompts/list", "prompts", "name", true}
	resourcesList = &kind{"resources/list", "resources", "uri", false}
	templatesList = &kind{"resources/templates/list", "resourceTemplates", "uriTemplate", false}
	lists         = map[string]*kind{
		toolsList.method: toolsList, promptsList.method: promptsList,
		resourcesList.method: resourcesList, templatesList.method: templatesList,
	}
)

// listed is one server's answer to a list: its entries, or why it has
// none.
type listed struct {
	entries []*entry
	err     error
	// reopened is the session the server was given anew, having lost
	// the client's ("" none), and the replica that holds it.
	reopened, replica string
	// stream: the server answered its list with an event stream.
	stream bool
}

// listAll asks every server for its whole list of k, in parallel, from
// the client's request from, under the session o (nil: none).
func (f *federation) listAll(ctx context.Context, from *http.Request, o *opened, k *kind) []listed {
	out := make([]listed, len(f.servers))
	vars := own.Vars(from)
	var wg sync.WaitGroup
	for i, s := range f.servers {
		sid, connected := "", true
		if o != nil {
			sid, connected = o.ids[s.name]
		}
		if !connected {
			out[i].err = errNotConnected
			continue
		}
		wg.Go(func() {
			defer f.recover("federation list")
			ctx, stop := context.WithTimeout(ctx, f.listTimeout)
			defer stop()
			vars := varsFor(vars, o, s)
			out[i].entries, out[i].stream, out[i].err = f.listOne(ctx, from, vars, s, sid, k)
			if errors.Is(out[i].err, errSessionLost) && o.params != nil {
				// Restarted: given a new session for the client's, and
				// asked again under it.
				id, replica, err := f.initialize(ctx, from, vars, s, o.params)
				if err != nil {
					out[i].err = errors.Join(out[i].err, err)
					return
				}
				out[i].reopened, out[i].replica = id, replica
				out[i].entries, out[i].stream, out[i].err = f.listOne(ctx, from, varsFor(vars, &opened{pins: map[string]string{s.name: replica}}, s), s, id, k)
			}
		})
	}
	wg.Wait()
	for i, l := range out {
		if l.reopened != "" {
			f.reopenedFor(o, f.servers[i], l.reopened, l.replica)
		}
	}
	for i, l := range out {
		if l.err != nil {
			listFailures.WithLabelValues(f.servers[i].name).Inc()
			f.logger.Warn("a server's list is left out of the merged list",
				zap.String("server", f.servers[i].name), zap.String("list", k.method), zap.Error(l.err))
		}
	}
	return out
}

// listOne asks s for every page of its list of k.
func (f *federation) listOne(ctx context.Context, from *http.Request, vars map[string]any, s *server, sid string, k *kind) (_ []*entry, stream bool, err error) {
	var entries []*entry
	budget := f.maxList
	cursor := ""
	for page := 0; ; page++ {
		// An id of its own: a server refuses two requests of one session
		// in flight under one id (the tools and the prompts are listed at
		// once).
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"caddy-mcp-federation-%d","method":%q`, f.ids.Add(1), k.method)
		if cursor != "" {
			c, _ := json.Marshal(cursor)
			body = fmt.Appendf(body, `,"params":{"cursor":%s}`, c)
		}
		body = append(body, '}')
		rep, err := f.ask(ctx, from, vars, s, sid, k.method, body, budget)
		if err != nil {
			return nil, false, err
		}
		if rep.rpcErr != nil {
			return nil, false, fmt.Errorf("the server answered an error: %s", clipBytes(rep.rpcErr))
		}
		budget -= int64(len(rep.result))
		var result map[string]json.RawMessage
		if err := json.Unmarshal(rep.result, &result); err != nil {
			return nil, false, fmt.Errorf("the server's list is no object: %w", err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(result[k.member], &items); err != nil {
			return nil, false, fmt.Errorf("the server's list holds no %s array: %w", k.member, err)
		}
		if len(entries)+len(items) > f.maxItems {
			return nil, false, fmt.Errorf("the server lists over %d entries", f.maxItems)
		}
		for _, item := range items {
			var named map[string]json.RawMessage
			var name string
			if json.Unmarshal(item, &named) != nil || json.Unmarshal(named[k.key], &name) != nil || name == "" {
				continue // an entry with no name cannot be called: left out
			}
			entries = append(entries, &entry{server: s, own: name, raw: item, meta: named["_meta"] != nil})
		}
		next := result["nextCursor"]
		if next == nil || bytes.Equal(next, []byte("null")) {
			return entries, rep.stream, nil
		}
		if err := json.Unmarshal(next, &cursor); err != nil || cursor == "" {
			return entries, rep.stream, nil
		}
		if page > f.maxItems {
			return nil, false, errors.New("the server's list does not end")
		}
	}
}

// merged is a list of k merged: its entries, in the order the servers
// are listed, as the client sees them.
func (f *federation) merge(k *kind, all []listed) ([]*entry, *names) {
	per := make([][]*entry, len(all))
	for i, l := range all {
		per[i] = l.entries
	}
	if !k.named {
		seen := map[string]bool{}
		var out []*entry
		for _, list := range per {
			for _, e := range list {
				if seen[e.own] {
					continue
				}
				seen[e.own] = true
				e.advertised = e.own
				out = append(out, e)
			}
		}
		return out, nil
	}
	for i, l := range all {
		if l.err != nil {
			per[i] = f.known(k, f.servers[i])
		}
	}
	n, left, prefixed := f.name(per, f.pinsOf(k))
	for _, d := range left {
		f.logger.Warn("a server's entry is left out of the merged list",
			zap.String("server", d.server), zap.String("name", d.name), zap.String("why", d.why))
	}
	namesPrefixed.WithLabelValues(k.method).Set(float64(prefixed))
	visible := make([]*entry, 0, len(n.all))
	for _, e := range n.all {
		if !e.stale {
			visible = append(visible, e)
		}
	}
	return visible, &n
}

// known are the entries of k that s gave in the last lists, for a server
// whose list failed now: they are named with the others' (so that no
// name changes while a server is down) and routed by (so that its calls
// are answered as a server down, not as names unknown), but not listed.
func (f *federation) known(k *kind, s *server) []*entry {
	c := f.names.Load()
	if c == nil {
		return nil
	}
	n := &c.tools
	if k == promptsList {
		n = &c.prompts
	}
	var out []*entry
	for _, e := range n.all {
		if e.server == s {
			out = append(out, &entry{server: s, own: e.own, raw: e.raw, meta: e.meta, stale: true})
		}
	}
	return out
}

// appendItem appends the entry as the client sees it: as its server wrote
// it, but for its name when it is advertised under another, and, in a list
// of tools or prompts, for the server it comes from, named in its _meta
// (contract.ServerMeta, beside the server's own members): what `caddy
// mcp-lock` records for pins.
func (e *entry) appendItem(dst []byte, k *kind) []byte {
	if !k.named {
		return append(dst, e.raw...)
	}
	raw := bytes.TrimSpace(e.raw)
	if e.advertised == e.own && !e.meta && len(raw) > 2 && raw[len(raw)-1] == '}' {
		// The common case: the member spliced in, the rest the server's bytes.
		dst = append(dst, raw[:len(raw)-1]...)
		dst = fmt.Appendf(dst, `,"_meta":{%q:%q}}`, contract.ServerMeta, e.server.name)
		return dst
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.raw, &m) != nil {
		return append(dst, e.raw...)
	}
	m[k.key], _ = json.Marshal(e.advertised)
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) != nil || meta == nil {
		meta = map[string]json.RawMessage{} // none, or not an object: ours alone
	}
	meta[contract.ServerMeta], _ = json.Marshal(e.server.name)
	m["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(m)
	if err != nil {
		return append(dst, e.raw...)
	}
	return append(dst, b...)
}

// page is the result of a list: page_size entries from offset, and the
// cursor of the next page.
func (f *federation) page(k *kind, entries []*entry, offset int, bind []byte) []byte {
	end := min(offset+f.pageSize, len(entries))
	out := fmt.Appendf(nil, `{%q:[`, k.member)
	for i, e := range entries[min(offset, end):end] {
		if i > 0 {
			out = append(out, ',')
		}
		out = e.appendItem(out, k)
	}
	out = append(out, ']')
	if end < len(entries) {
		out = fmt.Appendf(out, `,"nextCursor":%q`, f.cursor(k, end, len(entries), bind))
	}
	return append(out, '}')
}

// A cursor is base64url(offset (4) | entries (4) | issued (8) |
// HMAC-SHA256(key, list | session | the first 16)[:16]).
const cursorLife = time.Hour

// cursor seals the offset of the next page of k, for the session bind.
func (f *federation) cursor(k *kind, offset, total int, bind []byte) string {
	b := binary.BigEndian.AppendUint32(nil, uint32(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint64(b, uint64(f.now().Unix()))
	return base64.RawURLEncoding.EncodeToString(append(b, f.cursorMAC(k, bind, b)...))
}

func (f *federation) cursorMAC(k *kind, bind, head []byte) []byte {
	m := hmac.New(sha256.New, f.cursorKey)
	m.Write([]byte(k.method))
	m.Write([]byte{0})
	m.Write(bind)
	m.Write([]byte{0})
	m.Write(head)
	return m.Sum(nil)[:16]
}

// errCursor: a cursor the gateway did not write for this list and
// session, or one too old.
var errCursor = errors.New("the cursor is not one this gateway gave for this list and session, or it expired: list again without a cursor")

// offset reads a cursor of k for the session bind: the offset of the
// page it names, and the length of the list it was cut from.
func (f *federation) offset(k *kind, cursor string, bind []byte) (offset, total int, err error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != 32 {
		return 0, 0, errCursor
	}
	if !hmac.Equal(b[16:], f.cursorMAC(k, bind, b[:16])) {
		return 0, 0, errCursor
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(b[8:16])), 0)
	if f.now().Sub(issued) > cursorLife {
		return 0, 0, errCursor
	}
	return int(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:8])), nil
}

// clipBytes is b for a log, within a bound.
func clipBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
