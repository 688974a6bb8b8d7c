package validate

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

// Learning tools from the tools/list answers that pass: hooks that watch
// answers, never edit them.

// MaxList bounds the tools/list answer read to learn from; a longer one
// passes through unread (its calls are then not checked), and costs no
// more than MaxList to find out.
const MaxList = 8 << 20

// Listing is a request for one page of a listing of tools: where its tools
// go, and whether it begins a listing.
type Listing struct {
	Key   toolschema.ListKey
	First bool
}

// ListingOf is the listing a body holding one tools/list request asks for.
// The cursor is read as the servers read it (case-sensitive, a byte-order
// mark skipped); a request the gateway cannot read as surely as they do (a
// cursor under another letter case, any other parameter that may filter
// the list) teaches nothing.
func (f *Feature) ListingOf(x *feature.Exchange) (Listing, bool) {
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request || string(m.Method) != "tools/list" || x.Body == nil {
		return Listing{}, false
	}
	v, err := toolschema.Decode(x.Body)
	if err != nil {
		return Listing{}, false
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
			return Listing{}, false
		}
	}
	return Listing{Key: f.KeyOf(x), First: first}, true
}

// Open opens the hook on the answer to x: the answer to a tools/list is
// learned from, and any stream is watched for the server saying its tools
// changed.
func (f *Feature) Open(x *feature.Exchange) feature.Hook {
	if l, ok := f.ListingOf(x); ok {
		return &Learner{Listing: l, Learn: f.learn, changes: f}
	}
	return changes{f}
}

// changes forgets the tools learned for a request's list, and the list
// every caller shares, when a stream says they changed.
type changes struct{ f *Feature }

func (changes) Needs() feature.Needs { return feature.Needs{} }

func (c changes) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	if !bytes.Contains(msg, []byte("list_changed")) {
		return nil, nil
	}
	_, _ = jsonrpc.Each(msg, func(m jsonrpc.Message) error {
		if m.Kind == jsonrpc.Notification && string(m.Method) == "notifications/tools/list_changed" {
			key := c.f.KeyOf(x)
			c.f.catalog.Forget(key)
			c.f.catalog.Forget(toolschema.ListKey{Endpoint: key.Endpoint})
		}
		return nil
	})
	return nil, nil
}

func (changes) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (changes) End(*feature.Exchange, feature.Ending) {}

// Learner is a hook that learns from the answer to one tools/list: the
// response with its id, as the hooks before it let it through.
type Learner struct {
	Listing Listing
	Learn   func(l Listing, result []byte)
	// changes, when set, also forgets what a stream says changed.
	changes *Feature
	done    bool
}

func (l *Learner) Needs() feature.Needs { return feature.Needs{Max: MaxList} }

func (l *Learner) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	if !l.done {
		if result := resultFor(msg, x.Single().ID); result != nil {
			l.done = true
			l.Learn(l.Listing, result)
			return nil, nil
		}
	}
	if l.changes != nil {
		return changes{l.changes}.Message(x, msg)
	}
	return nil, nil
}

func (*Learner) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (*Learner) End(*feature.Exchange, feature.Ending) {}

// resultFor is the result of the response with id in msg, nil when it is
// not that response, is an error, or cannot be read with certainty.
func resultFor(msg []byte, id json.RawMessage) []byte {
	r, err := jsonrpc.Result(msg, id)
	if err != nil || r.Start == 0 {
		return nil
	}
	return msg[r.Start:r.End]
}

// learn keeps the tools of a tools/list answer in the catalog.
func (f *Feature) learn(l Listing, result []byte) {
	page, err := f.catalog.Learn(l.Key, result, l.First, time.Now())
	if err != nil {
		// Not a list, or one read two ways: its calls pass unchecked.
		f.logger.Debug("a tools/list answer is not learned: its calls pass unchecked",
			zap.String("endpoint", feature.Clip(l.Key.Endpoint)), zap.Error(err))
		return
	}
	toolsLearned.Add(float64(page.Tools - len(page.Bad)))
	for name, err := range page.Bad {
		badSchemas.Inc()
		f.logger.Warn("a tool's inputSchema does not compile: its calls pass unchecked",
			zap.String("tool", feature.Clip(name)), zap.Error(err))
	}
	if page.Dropped {
		f.logger.Warn("the tools listed take more memory than max_catalog_size: they are not kept, and their calls pass unchecked",
			zap.String("endpoint", feature.Clip(l.Key.Endpoint)), zap.Int("tools", page.Tools), zap.Int64("max_catalog_size", f.catalog.Stats().MaxBytes))
	}
}
