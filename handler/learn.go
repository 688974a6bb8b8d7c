package handler

import (
	"bytes"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Learning tools from the tools/list answers that pass (validate, and the
// contract's comparison): hooks that watch answers, never edit them.

// maxListBody bounds the tools/list answer read to learn from; a longer one
// passes through unread (its calls are then not checked), and costs no
// more than maxListBody to find out.
const maxListBody = 8 << 20

// listing is a request for one page of a listing of tools: where its
// tools go, and whether it begins a listing.
type listing struct {
	key   toolschema.ListKey
	first bool
}

// listingOf is the listing a body holding one tools/list request asks for.
// The cursor is read as the servers read it (case-sensitive, a byte-order
// mark skipped); a request the gateway cannot read as surely as they do (a
// cursor under another letter case, any other parameter that may filter
// the list) teaches nothing.
func listingOf(x *feature.Exchange) (listing, bool) {
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request || string(m.Method) != "tools/list" || x.Body == nil {
		return listing{}, false
	}
	v, err := toolschema.Decode(x.Body)
	if err != nil {
		return listing{}, false
	}
	msg, _ := v.(map[string]any)
	params, _ := msg["params"].(map[string]any)
	first := true
	for k, val := range params {
		switch {
		case k == "cursor":
			first = val == nil
		case k == "_meta":
		default:
			return listing{}, false
		}
	}
	return listing{key: listKey(x), first: first}, true
}

// catalogAnswers is validate's responder: it learns tools from the answer
// to a tools/list, and forgets them when a stream says they changed.
type catalogAnswers struct{ h *Handler }

func (c catalogAnswers) Open(x *feature.Exchange) feature.Hook {
	if l, ok := listingOf(x); ok {
		return &listLearner{watch: toolsChanges{c.h}, listing: l, learn: c.h.learnTools}
	}
	return toolsChanges{c.h}
}

// toolsChanges forgets the tools learned for a request's list, and the list
// every caller shares, when a stream says they changed.
type toolsChanges struct{ h *Handler }

func (toolsChanges) Needs() feature.Needs { return feature.Needs{} }

func (t toolsChanges) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	if !bytes.Contains(msg, []byte("list_changed")) {
		return nil, nil
	}
	_, _ = jsonrpc.Each(msg, func(m jsonrpc.Message) error {
		if m.Kind == jsonrpc.Notification && string(m.Method) == "notifications/tools/list_changed" {
			key := listKey(x)
			t.h.catalog.Forget(key)
			t.h.catalog.Forget(toolschema.ListKey{Endpoint: key.Endpoint})
		}
		return nil
	})
	return nil, nil
}

func (toolsChanges) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.Envelope{}
}

func (toolsChanges) End(*feature.Exchange, feature.Ending) {}

// listLearner learns from the answer to one tools/list: the response with
// its id, as the hooks before it let it through.
type listLearner struct {
	watch   toolsChanges
	listing listing
	learn   func(l listing, result []byte)
	done    bool
}

func (l *listLearner) Needs() feature.Needs { return feature.Needs{Max: maxListBody} }

func (l *listLearner) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	if !l.done {
		if result := resultFor(msg, x.Single().ID); result != nil {
			l.done = true
			l.learn(l.listing, result)
			return nil, nil
		}
	}
	if l.watch.h != nil {
		return l.watch.Message(x, msg)
	}
	return nil, nil
}

func (l *listLearner) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.Envelope{}
}

func (l *listLearner) End(*feature.Exchange, feature.Ending) {}

// resultFor is the result of the response with id in msg, nil when it is
// not that response, is an error, or cannot be read with certainty.
func resultFor(msg []byte, id json.RawMessage) []byte {
	r, err := jsonrpc.Result(msg, id)
	if err != nil || r.Start == 0 {
		return nil
	}
	return msg[r.Start:r.End]
}

// learnTools keeps the tools of a tools/list answer in the catalog.
func (h *Handler) learnTools(l listing, result []byte) {
	page, err := h.catalog.Learn(l.key, result, l.first, time.Now())
	if err != nil {
		return
	}
	toolsLearned.Add(float64(page.Tools - len(page.Bad)))
	for name, err := range page.Bad {
		badSchemas.Inc()
		h.logger.Warn("a tool's inputSchema does not compile: its calls pass unchecked",
			zap.String("tool", clip(name)), zap.Error(err))
	}
	if page.Dropped {
		h.logger.Warn("the tools listed take more memory than max_catalog_size: they are not kept, and their calls pass unchecked",
			zap.String("endpoint", clip(l.key.Endpoint)), zap.Int("tools", page.Tools), zap.Int64("max_catalog_size", h.catalog.Stats().MaxBytes))
	}
}

// contractAnswers is the contract's responder: it compares the tools of
// each tools/list answer, as the upstream wrote it, with the lockfile.
type contractAnswers struct{ s *contractState }

func (c contractAnswers) Open(x *feature.Exchange) feature.Hook {
	if l, ok := listingOf(x); ok {
		return &listLearner{listing: l, learn: func(l listing, result []byte) { c.s.learn(l.key, result, l.first) }}
	}
	return nil
}
