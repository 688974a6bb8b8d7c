package oauth

import (
	"net/http"
	"strings"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// Scopes per tool, prompt and resource: a request that calls a tool (or
// gets a prompt, or reads a resource) whose rule names a scope the token
// lacks is refused before it runs.
//
// How it is refused depends on what the client can do about it. From MCP
// 2025-11-25 on, a client re-authorizes on 403 insufficient_scope asking
// for the scope the challenge names (step-up): a single request of such a
// client is answered so, and the model never sees the refusal unless the
// user declines. A request of an earlier version, or in a batch, or of a
// principal challenged for the same name already (a client that could not
// step up: stepup.go), is answered 200 with a FORBIDDEN envelope in the
// request's answer, the form a client hands the model: it reads which
// scope to ask the user for.

// stepUpSince is the first protocol version whose clients re-authorize on
// 403 insufficient_scope.
const stepUpSince = "2025-11-25"

// ScopeRule gives the scopes a tool, prompt or resource needs: the first
// rule whose glob matches its name (a resource's URI) is its own.
type ScopeRule struct {
	// Match is a glob: * matches any run of characters.
	Match  string   `json:"match"`
	Scopes []string `json:"scopes"`
}

// nameRules are compiled rules of one kind.
type nameRules []struct {
	glob   toolpolicy.Glob
	scopes []string
}

func compileRules(rules []ScopeRule) nameRules {
	out := make(nameRules, len(rules))
	for i, r := range rules {
		out[i].glob, out[i].scopes = toolpolicy.CompileGlob(r.Match), r.Scopes
	}
	return out
}

// of is the scopes name needs, nil when no rule matches it.
func (rs nameRules) of(name string) []string {
	for _, r := range rs {
		if r.glob.Match(name) {
			return r.scopes
		}
	}
	return nil
}

// Order is where the scopes' check runs among the features
// (feature.Parts): first, before the tool policy's, so that a call the
// token may not make is refused for its scope.
const Order = -50

// AnswerOrder is where the scopes' hook reads an answer: after the tool
// policy filtered a list, before validate learns what the client is
// given.
const AnswerOrder = -36

// Governs: the scopes decide which calls run by their names
// (feature.Governing), when any rule is configured.
func (g *Gate) Governs() bool { return g.perName }

// Check refuses a request that needs a scope its token lacks.
func (g *Gate) Check(x *feature.Exchange) *feature.Refusal {
	if !g.perName || x.Principal == nil {
		return nil
	}
	for i := range x.Messages {
		m := &x.Messages[i]
		if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
			continue
		}
		if k := kindOf(m); x.Batch && k != nil && len(k.rules(g)) > 0 {
			// Its answer is edited for the caller only when it is sent
			// alone (lists.go): in a batch it would list what the token
			// may not call.
			return &feature.Refusal{Envelope: listInBatch(string(m.Method)), Status: http.StatusOK, By: feature.Rule{Kind: "authorization"}}
		}
		what, name, need := g.needs(m)
		missing := absent(x.Principal.Scopes, need)
		if len(missing) == 0 {
			continue
		}
		outcomes.WithLabelValues("insufficient_scope").Inc()
		env := scopeLacking(what, name, missing)
		p := x.Principal
		if x.Batch || !steppingUp(x.Request) || g.stepUps.challenged(stepUpKey(p.Issuer, p.ClientID, p.Subject, what, name), g.now()) {
			return &feature.Refusal{Envelope: env, Status: http.StatusForbidden, By: feature.Rule{Kind: "authorization"}}
		}
		// All the scopes the request needs: a client asks for them, with
		// those it holds (SEP-2350).
		want := append(append([]string(nil), g.cfg.Scopes...), need...)
		ref := g.challenge(&refused{code: "insufficient_scope", status: http.StatusForbidden, description: "the token lacks a scope this request needs", scopes: want}, env)
		ref.Plain = &feature.Plain{Status: http.StatusForbidden, Header: ref.Header, Body: env.AppendRPCError(nil, m.ID, x.Era.RPCCode(&env)), Outcome: string(env.Code)}
		return ref
	}
	return nil
}

// needs is what m acts on ("tool", "prompt", "resource"), its name, and
// the scopes it needs.
func (g *Gate) needs(m *jsonrpc.Message) (what, name string, scopes []string) {
	switch string(m.Method) {
	case "tools/call":
		return "tool", string(m.Name), g.tools.of(string(m.Name))
	case "prompts/get":
		return "prompt", string(m.Name), g.prompts.of(string(m.Name))
	case "resources/read", "resources/subscribe":
		return "resource", string(m.URI), g.uris.of(string(m.URI))
	}
	return "", "", nil
}

// steppingUp reports whether r's client re-authorizes on 403
// insufficient_scope (its protocol version is stepUpSince or later).
func steppingUp(r *http.Request) bool {
	v := strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version"))
	return len(v) == len(stepUpSince) && v >= stepUpSince
}

// scopeLacking: the token lacks the scopes what (a tool, prompt or
// resource) needs.
func scopeLacking(what, name string, missing []string) envelope.Envelope {
	return envelope.New(envelope.Forbidden, "Forbidden: the "+what+" "+feature.Clip(name)+" needs the scope "+strings.Join(missing, " ")+", which the access token does not grant").
		Suggest("Ask the user to grant the scope "+strings.Join(missing, " ")+" (the client authorizes again, asking for it), then retry the same call. Until then, do the task without this "+what+"; retrying with the same token fails the same way.").
		Details(envelope.Detail{Key: what, Value: feature.Clip(name)}, envelope.Detail{Key: "required_scopes", Value: strings.Join(missing, " ")}).
		Envelope()
}
