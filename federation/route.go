package federation

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/session"
)

// Where each request goes. The session phase (Admit) opens the client's
// session and decides: a request every server is asked (initialize, a
// list, a notification) is answered by the federation (answer.go); a
// call, a prompt, a resource or a completion goes to the one server that
// has it, under that server's own session id, its name rewritten to the
// server's own when it is advertised under another. What no server can
// take is refused by the check, after the rate limits: a refused call
// still costs its tokens.

// varKey is the request variable that holds the federation's decision.
const varKey = "mcp.federation"

// decision is what the federation decided for one request.
type decision struct {
	f *federation
	o *opened
	// fanOut: every server is asked, and the federation answers.
	fanOut bool
	// server is the server the request goes to, own the name it knows
	// the request's tool, prompt or reference by ("" when the request
	// names none, or names it as the server does).
	server *server
	own    string
	// responseID is the server's own id of the request a client's
	// response answers.
	responseID json.RawMessage
	// refusal is the check's answer, when no server can take it.
	refusal *feature.Refusal
}

// Undo ends the decision.
func (*decision) Undo(time.Time, bool) {}

func decisionOf(x *feature.Exchange) *decision {
	d, _ := caddyhttp.GetVar(x.Request.Context(), varKey).(*decision)
	return d
}

// Admit opens the session x names and decides where x goes.
func (f *federation) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	o, err := f.open(x)
	if err != nil {
		return nil, notFound(x, err)
	}
	d := &decision{f: f, o: o}
	caddyhttp.SetVar(x.Request.Context(), varKey, d)
	f.decide(x, d)
	if d.server != nil && !d.fanOut {
		x.Server = d.server.name
	}
	if d.server != nil && o != nil {
		sid, connected := o.ids[d.server.name]
		if !connected && d.refusal == nil {
			// Not connected at initialize: connected now, in the
			// background, and the model told to come back.
			f.connect(x, o, d.server)
			d.refusal = f.refused.last(string(o.ref[:]) + d.server.name)
			if d.refusal == nil {
				d.refusal = &feature.Refusal{Envelope: connecting(d.server.name, f.retryAfter), Status: http.StatusServiceUnavailable}
			}
		}
		if client := x.Request.Header.Get("Mcp-Session-Id"); client != "" {
			caddyhttp.SetVar(x.Request.Context(), feature.ClientSessionVar, client)
		}
		x.Request.Header.Del("Mcp-Session-Id")
		if sid != "" {
			x.Request.Header["Mcp-Session-Id"] = []string{sid}
		}
		if replica := o.pins[d.server.name]; replica != "" {
			// lb_policy mcp_session sends it to the replica that holds
			// the session.
			caddyhttp.SetVar(x.Request.Context(), session.PinVar, &replica)
		}
	}
	return d, nil
}

// decide finds where x goes.
func (f *federation) decide(x *feature.Exchange, d *decision) {
	switch x.Request.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		d.fanOut = true // a GET's stream, a DELETE of the session
		return
	default:
		// HEAD, OPTIONS (a CORS preflight): carry no message, go to the
		// first server, which answers them in its own words.
		d.server = f.servers[0]
		return
	}
	if x.Batch {
		d.refusal = &feature.Refusal{Envelope: batchRefused(), Status: http.StatusBadRequest}
		return
	}
	m := x.Single()
	if m != nil && m.Kind == jsonrpc.Response {
		if s, id, ok := f.serverID(m.ID); ok {
			// The client's answer to a server's request: to that server,
			// under the id it gave.
			d.server, d.responseID = s, id
			return
		}
	}
	if m == nil || m.Kind != jsonrpc.Request {
		d.fanOut = true // notifications, and responses to no server's id, go to every server
		return
	}
	switch method := string(m.Method); method {
	case "tools/call":
		f.routeByName(x, d, string(m.Name), toolsOf, "tool")
	case "prompts/get":
		f.routeByName(x, d, string(m.Name), promptsOf, "prompt")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if strings.HasPrefix(string(m.URI), feature.GatewayScheme) {
			// The gateway's own (a result kept whole): a feature answers
			// it before any router runs; else the first server, in its
			// own words, as an unknown method. No server lists it: it is
			// neither refused nor worth asking every server for.
			d.server = f.servers[0]
			return
		}
		f.routeByURI(x, d, string(m.URI))
	case "completion/complete":
		f.routeByReference(x, d, m)
	default:
		if _, ok := lists[method]; ok || fannedOut[method] {
			d.fanOut = true
			return
		}
		// A method the federation does not know goes to the first
		// server, which answers it in its own words.
		d.server = f.servers[0]
	}
}

// fannedOut are the requests every server is asked, and the federation
// answers.
var fannedOut = map[string]bool{"initialize": true, "server/discover": true, "ping": true, "logging/setLevel": true}

// routeByName routes a request that names a tool or a prompt.
func (f *federation) routeByName(x *feature.Exchange, d *decision, name string, of func(*catalog) *names, what string) {
	c := f.catalog(x, d.o, false)
	e, candidates, namespace := of(c).lookup(f, name)
	if e == nil && f.now().Sub(c.made) > minRelist {
		// A name the last lists did not give: the servers are asked
		// again, at most once every minRelist.
		c = f.catalog(x, d.o, true)
		e, candidates, namespace = of(c).lookup(f, name)
	}
	if e != nil {
		d.server = e.server
		if e.own != name {
			d.own = e.own
		}
		return
	}
	if namespace {
		d.refusal = &feature.Refusal{Envelope: namespaceMismatch(what, name, candidates)}
	} else {
		d.refusal = &feature.Refusal{Envelope: unknownName(what, name, candidates)}
	}
}

// routeByURI routes a request that names a resource: to the server that
// lists it, or whose template it matches (the longest literal head), or,
// when one server alone has resources, to it.
func (f *federation) routeByURI(x *feature.Exchange, d *decision, uri string) {
	r := f.located(x, d.o, false)
	d.server = r.serverOf(uri)
	if d.server == nil && f.now().Sub(r.made) > minRelist {
		d.server = f.located(x, d.o, true).serverOf(uri)
	}
	if d.server == nil && len(f.servers) == 1 {
		d.server = f.servers[0]
	}
	if d.server == nil {
		d.refusal = &feature.Refusal{Envelope: unknownResource(uri)}
	}
}

// serverOf is the server that lists uri, or whose template it matches
// with the longest literal head; nil when none.
func (l *located) serverOf(uri string) *server {
	if s, ok := l.byURI[uri]; ok {
		return s
	}
	var s *server
	best := -1
	for _, t := range l.templates {
		if strings.HasPrefix(uri, t.head) && len(t.head) > best {
			s, best = t.server, len(t.head)
		}
	}
	return s
}

// routeByReference routes completion/complete by what it completes: a
// prompt's argument by the prompt's name, a resource template's by its
// URI.
func (f *federation) routeByReference(x *feature.Exchange, d *decision, m *jsonrpc.Message) {
	var body struct {
		Params struct {
			Ref struct {
				Type string `json:"type"`
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"ref"`
		} `json:"params"`
	}
	_ = json.Unmarshal(x.Body, &body)
	ref := body.Params.Ref
	switch ref.Type {
	case "ref/prompt":
		f.routeByName(x, d, ref.Name, promptsOf, "prompt")
	case "ref/resource":
		f.routeByURI(x, d, ref.URI)
	default:
		d.server = f.servers[0]
	}
}

// Check refuses what no server can take.
func (f *federation) Check(x *feature.Exchange) *feature.Refusal {
	if d := decisionOf(x); d != nil {
		return d.refusal
	}
	return nil
}

// Governs: a body the core cannot read could go to any server.
func (f *federation) Governs() bool { return true }

// Route is the server x goes to.
func (f *federation) Route(x *feature.Exchange) string {
	if d := decisionOf(x); d != nil && d.server != nil && !d.fanOut {
		return d.server.name
	}
	return ""
}

// Rewrite gives the server the name it knows a tool or prompt by.
func (f *federation) Rewrite(x *feature.Exchange, body []byte) []byte {
	d := decisionOf(x)
	if d != nil && d.responseID != nil {
		return withID(body, d.responseID)
	}
	if d == nil || d.own == "" {
		return nil
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return nil
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return nil
	}
	own, _ := json.Marshal(d.own)
	if ref, ok := params["ref"]; ok && params["name"] == nil {
		var r map[string]json.RawMessage
		if json.Unmarshal(ref, &r) != nil {
			return nil
		}
		r["name"] = own
		params["ref"], _ = json.Marshal(r)
	} else {
		params["name"] = own
	}
	msg["params"], _ = json.Marshal(params)
	out, err := json.Marshal(msg)
	if err != nil {
		return nil
	}
	return out
}
