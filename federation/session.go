package federation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/session"
)

// One session, many servers. The session id a client holds is a session
// token (package session's format and keys) whose upstream is
// "federation", whose params are the client's initialize params, and
// whose id is the servers' own session ids, by server name (sessionIDs).
// A server that could not be connected at initialize has none: the first
// call to it connects it, on the node that gets the call, and the node
// remembers the session it opened (remap), as it does one it reopened
// after the server lost it.

// tokenUpstream begins the upstream a federated session token names; the
// site's host name follows it (federation.audience), so that a session id of
// one federated site does not open at another that shares its keys (the
// default keys kept in one storage).
const tokenUpstream = "federation"

// sessionIDs are the servers' own session ids, by server name: "" for a
// server that needs none (stateless); a server missing is not connected.
type sessionIDs map[string]string

// sealed is what a token's id holds: the servers' session ids, and the
// replica of each that holds its session, when lb_policy mcp_session
// chose it (its dial address), so that every request of the session
// reaches that replica.
type sealed struct {
	IDs  sessionIDs        `json:"s"`
	Pins map[string]string `json:"p,omitempty"`
}

// keys reads the keys that seal session ids: from secrets, or kept in
// ctx's storage.
func (f *federation) keys(ctx caddy.Context, secrets []string) error {
	if len(secrets) > 0 {
		expanded := make([]string, 0, len(secrets))
		repl := caddy.NewReplacer()
		for _, s := range secrets {
			if v := repl.ReplaceKnown(s, ""); v != "" {
				expanded = append(expanded, v)
			}
		}
		ring, err := session.FromSecrets(expanded)
		if err != nil {
			return fmt.Errorf("secret: %w", err)
		}
		f.ring = func() *session.Keyring { return ring }
		return nil
	}
	keeper, err := session.NewKeeper(ctx, ctx.Storage(), f.logger)
	if err != nil {
		return err
	}
	f.ring = keeper.Ring
	return nil
}

// opened is a client's federated session, opened from its token.
type opened struct {
	token  string
	ref    [sha256.Size]byte // names the token in the remap
	params []byte
	ids    sessionIDs
	pins   map[string]string
	issued time.Time
}

// principal is what a session is bound to, when a feature verifies who
// requests speak for.
func (f *federation) principal(x *feature.Exchange) *session.Principal {
	if !f.bound || x.Principal == nil {
		return nil
	}
	p := session.PrincipalOf(x.Principal.Issuer + " " + x.Principal.Subject)
	return &p
}

// open opens the session x names, nil when it names none.
func (f *federation) open(x *feature.Exchange) (*opened, error) {
	values := x.Request.Header.Values("Mcp-Session-Id")
	switch {
	case len(values) > 1 || underscored(x.Request.Header):
		return nil, session.ErrMalformed
	case len(values) == 0 || values[0] == "":
		return nil, nil
	}
	s, err := f.ring().Open(values[0], x.Start, f.ttl, f.principal(x))
	if err != nil {
		return nil, err
	}
	var in sealed
	if s.Upstream != f.audience || json.Unmarshal([]byte(s.ID), &in) != nil || in.IDs == nil {
		return nil, session.ErrMalformed
	}
	o := &opened{token: values[0], ref: sha256.Sum256([]byte(values[0])), params: s.Params, ids: in.IDs, pins: in.Pins, issued: s.Issued}
	for name := range f.byName {
		if e, ok := f.remap.find(o.ref, name, x.Start); ok {
			o.ids[name] = e.id
			o.pin(name, e.replica)
		}
	}
	return o, nil
}

// underscored reports whether hdr holds the session header spelt with
// underscores (Mcp_Session_Id), which a CGI-style server reads as the
// same: a server's own id sent so would reach it past the token.
func underscored(hdr http.Header) bool {
	for name := range hdr {
		if strings.Contains(name, "_") && strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "Mcp-Session-Id") {
			return true
		}
	}
	return false
}

// seal is the session id a client holds for the servers' ids, opened by
// the initialize of x with params.
func (f *federation) seal(x *feature.Exchange, ids sessionIDs, pins map[string]string, params []byte) (string, error) {
	raw, err := json.Marshal(sealed{IDs: ids, Pins: pins})
	if err != nil {
		return "", err
	}
	s := session.Session{Upstream: f.audience, ID: string(raw), Issued: f.now(), Params: params}
	return f.ring().Seal(s, f.principal(x))
}

// notFound is the answer to a request whose session did not open: HTTP
// 404, which tells MCP clients to initialize a new session.
func notFound(x *feature.Exchange, err error) *feature.Refusal {
	id := json.RawMessage("null")
	if m := x.Single(); m != nil && m.Kind == jsonrpc.Request {
		id = m.ID
	}
	body := envelope.AppendPlainRPCError(nil, id, -32001, "Session not found: not a session of this gateway for these credentials; initialize a new session")
	return &feature.Refusal{Cause: err, Plain: &feature.Plain{
		Status:  http.StatusNotFound,
		Header:  http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		Body:    body,
		Outcome: "SESSION_NOT_FOUND",
	}}
}

// maxRemapped bounds the sessions a node remembers it opened or reopened
// for servers; past it, the oldest is forgotten (the server's calls then
// meet its 404 and reopen again).
const maxRemapped = 100_000

// remap is where the sessions a node opened for a client's token live:
// a server connected after initialize, or reopened after it lost its
// session.
type remap struct {
	mu      sync.Mutex
	max     int
	entries map[remapKey]remapped
	order   []remapKey
}

type remapKey struct {
	ref    [sha256.Size]byte
	server string
}

type remapped struct {
	id, replica string
	expires     time.Time
}

func newRemap(max int) *remap {
	return &remap{max: max, entries: map[remapKey]remapped{}}
}

func (m *remap) find(ref [sha256.Size]byte, server string, now time.Time) (remapped, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[remapKey{ref, server}]
	if !ok || now.After(e.expires) {
		return remapped{}, false
	}
	return e, true
}

func (m *remap) keep(ref [sha256.Size]byte, server, id, replica string, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := remapKey{ref, server}
	if _, ok := m.entries[k]; !ok {
		for len(m.order) >= m.max {
			delete(m.entries, m.order[0])
			m.order = m.order[1:]
		}
		m.order = append(m.order, k)
	}
	m.entries[k] = remapped{id: id, replica: replica, expires: expires}
}

func (m *remap) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// connect opens a session with server s for the client's session o, in
// the background, once for every caller: the calls to s meanwhile are
// answered HANDOFF_CONNECTING.
func (f *federation) connect(x *feature.Exchange, o *opened, s *server) {
	key := string(o.ref[:]) + s.name
	if _, busy := f.connecting.LoadOrStore(key, true); busy {
		return
	}
	// A copy: the request goes on, its header rewritten, while this runs.
	from := x.Request.Clone(context.WithoutCancel(x.Request.Context()))
	vars := own.Vars(x.Request)
	go func() {
		defer f.connecting.Delete(key)
		defer f.recover("federation connect")
		ctx, stop := context.WithTimeout(from.Context(), connectTimeout)
		defer stop()
		id, replica, err := f.initialize(ctx, from, vars, s, o.params)
		f.refused.record(key, err)
		if err != nil {
			f.logger.Warn("a server could not be connected for a session", zap.String("server", s.name), zap.Error(err))
			return
		}
		f.remap.keep(o.ref, s.name, id, replica, o.issued.Add(f.ttl))
		serversConnected.WithLabelValues(s.name).Inc()
	}()
}

// connectTimeout bounds a server's connection for a session.
const connectTimeout = 30 * time.Second

// errNotConnected: the session has no session with the server.
var errNotConnected = errors.New("the server is not connected in this session")

// pin records that server's session lives on replica ("" none).
func (o *opened) pin(server, replica string) {
	if replica == "" {
		return
	}
	if o.pins == nil {
		o.pins = map[string]string{}
	}
	o.pins[server] = replica
}

// varsFor are vars, for a request of the session o to server s: pinned to
// the replica that holds its session there, when one does.
func varsFor(vars map[string]any, o *opened, s *server) map[string]any {
	if o == nil || o.pins[s.name] == "" {
		return vars
	}
	replica := o.pins[s.name]
	out := maps.Clone(vars)
	if out == nil {
		out = map[string]any{}
	}
	out[session.PinVar] = &replica
	return out
}

// replicaOf is the replica lb_policy mcp_session chose for r, "" when it
// chose none.
func replicaOf(r *http.Request) string {
	if r == nil {
		return ""
	}
	if p, ok := caddyhttp.GetVar(r.Context(), session.SelectedVar).(*string); ok && p != nil {
		return *p
	}
	return ""
}

// reopenedFor records that server s was given the session id (on
// replica) for the client's session o, which it had lost: for the rest of
// this request (o), and for the session's next requests on this node.
func (f *federation) reopenedFor(o *opened, s *server, id, replica string) {
	o.ids[s.name] = id
	o.pin(s.name, replica)
	f.remap.keep(o.ref, s.name, id, replica, o.issued.Add(f.ttl))
	serversReopened.WithLabelValues(s.name).Inc()
}
