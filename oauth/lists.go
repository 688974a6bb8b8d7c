package oauth

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// Lists per caller: what a token lacks the scope for is left out of the
// tools/list, prompts/list and resources/list answers it is given, so that
// the model is not offered a tool it would be refused. The refusal of the
// call itself (Check) is what enforces the scopes; the lists follow it. A
// list edited so is the caller's own: a cacheScope "public" in it becomes
// "private".
//
// A list that cannot be read with certainty (a name given twice, under
// another letter case) passes as the server wrote it, as does an entry
// whose name cannot be read: nothing in it can be called by that name
// without the check. Resource templates are not filtered: a template names
// many URIs, and the rules match the URI a read names.

// listKind is one kind of list the scopes edit.
type listKind struct {
	list, key string // the result's array, and the member naming an entry
	rules     func(*Gate) nameRules
}

var (
	toolList     = &listKind{"tools", "name", func(g *Gate) nameRules { return g.tools }}
	promptList   = &listKind{"prompts", "name", func(g *Gate) nameRules { return g.prompts }}
	resourceList = &listKind{"resources", "uri", func(g *Gate) nameRules { return g.uris }}
)

// kindOf is the list m asks for, nil when it asks for none the scopes
// edit.
func kindOf(m *jsonrpc.Message) *listKind {
	switch string(m.Method) {
	case "tools/list":
		return toolList
	case "prompts/list":
		return promptList
	case "resources/list":
		return resourceList
	}
	return nil
}

// Open opens the hook that edits the answer to a list request of a
// verified caller (a feature.Responder), nil for any other.
func (g *Gate) Open(x *feature.Exchange) feature.Hook {
	if !g.perName || x.Principal == nil {
		return nil
	}
	if x.Request.Method == http.MethodGet {
		// A resumed stream replays answers whose requests are not known
		// here: each list is edited wherever it is found.
		return listHook{g: g}
	}
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request {
		return nil
	}
	if k := kindOf(m); k != nil && len(k.rules(g)) > 0 {
		return listHook{g: g, kind: k}
	}
	return nil
}

// listHook edits the list answers of one exchange: of kind, or, on a GET's
// stream, every kind.
type listHook struct {
	g    *Gate
	kind *listKind
}

// MaxList bounds a list answer read to edit it; a larger one passes as it
// is.
const MaxList = toolpolicy.MaxList

func (listHook) Needs() feature.Needs { return feature.Needs{Edit: true, Max: MaxList} }

func (h listHook) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	var id []byte
	if h.kind != nil {
		id = x.Single().ID
	}
	result, err := jsonrpc.Result(msg, id)
	if err != nil || result.Start == 0 || msg[result.Start] != '{' {
		return nil, nil // not the answer owed, or an error: as it is
	}
	original := msg[result.Start:result.End]
	edited := original
	for _, k := range []*listKind{toolList, promptList, resourceList} {
		if (h.kind != nil && k != h.kind) || len(k.rules(h.g)) == 0 {
			continue
		}
		if edited, err = h.g.edit(edited, k, x.Principal.Scopes); err != nil {
			return nil, nil // unreadable: as the server wrote it
		}
	}
	if &edited[0] == &original[0] && len(edited) == len(original) {
		return nil, nil
	}
	return jsonrpc.Splice(msg, result, edited), nil
}

func (listHook) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (listHook) End(*feature.Exchange, feature.Ending) {}

// edit is result, a list of kind k, without the entries whose scopes
// granted lacks, and private when a rule names a scope for any entry (the
// list another caller's token is given may differ). A result without k's
// list is returned as it is.
func (g *Gate) edit(result []byte, k *listKind, granted []string) ([]byte, error) {
	rules := k.rules(g)
	governed := false
	out, removed, err := toolpolicy.FilterEntries(result, k.list, k.key, func(entry []byte, name string, ok bool) ([]byte, bool) {
		if !ok {
			return entry, true
		}
		need := rules.of(name)
		governed = governed || len(need) > 0
		return entry, len(absent(granted, need)) == 0
	})
	if err != nil || !governed {
		return result, err
	}
	hidden.WithLabelValues(k.list).Add(float64(removed))
	if private, err := toolpolicy.Private(out); err == nil {
		return private, nil
	}
	// A cacheScope given twice, or in another letter case: the list is
	// still the caller's own, left without the entries it may not see.
	return out, nil
}

// hidden counts the entries left out of list answers for the caller's
// scopes, by list.
var hidden = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "authorization_hidden_total",
	Help: "Tools, prompts and resources left out of list answers because the caller's access token lacks their scope, by list.",
}, []string{"list"})
