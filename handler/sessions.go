package handler

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/session"
)

// Sessions pins the sessions of MCP's 2025 revisions to the upstream that
// holds them, so that several stateful replicas can sit behind one
// reverse_proxy (with lb_policy mcp_session) and several gateway nodes in
// front of them, sharing nothing but keys. The session id a client sees is
// a token the gateway sealed; it restores the upstream's own id on the way
// in. A token that does not open (tampered, expired, sealed with a key no
// longer held, or, with Bind, presented by other credentials) gets HTTP
// 404, the revisions' "session not found": the client must initialize a
// new session. Requests of the stateless 2026-07-28 revision have no
// sessions and are left alone.
type Sessions struct {
	// Secrets derive the keys that seal session tokens: the first seals,
	// every one opens, so a secret is rotated by putting a new one first
	// and keeping the old one for TTL. Placeholders ({env.*}) are expanded
	// when the config loads; each must be at least 16 bytes (32 random
	// bytes, e.g. from openssl rand -base64 32, are best), but an old one
	// (any but the first) that expands to nothing is left out, so that
	// {env.MCP_SESSION_SECRET_OLD} may stay unset between rotations. Default: keys
	// generated and kept in Caddy's storage and rotated every 12 hours, so
	// that every node sharing the storage shares them.
	Secrets []string `json:"secrets,omitempty"`

	// TTL is how long a session's token opens after the upstream issued
	// the session (at most 30 days). Default: 24h.
	TTL caddy.Duration `json:"ttl,omitempty"`

	// Bind is a placeholder template naming the principal that opens a
	// session, such as {http.request.header.Authorization}: the session
	// then works only for requests whose template gives the same value (a
	// digest of it is sealed in the token). It is read as rate-limit keys
	// are: the Authorization header as servers read it. Default: any
	// holder of the token.
	Bind string `json:"bind,omitempty"`
}

// DefaultSessionTTL is the default of Sessions.TTL.
const DefaultSessionTTL = 24 * time.Hour

// Validate checks the settings.
func (s *Sessions) Validate() error {
	if d := time.Duration(s.TTL); d < 0 || d > session.MaxTTL {
		return fmt.Errorf("ttl %s: want a positive duration of 30 days at most", d)
	}
	if s.Bind == "" {
		return nil
	}
	if !strings.Contains(s.Bind, "{") {
		return fmt.Errorf("bind %q holds no placeholder: every request would be the same principal", clip(s.Bind))
	}
	// A typo would leave every request without a principal.
	if err := keys.Check(s.Bind); err != nil {
		return fmt.Errorf("bind %q: %w", clip(s.Bind), err)
	}
	return nil
}

// expandSecrets replaces the placeholders of the secrets. An old secret
// (any but the first) that expands to nothing is left out: between
// rotations its variable is unset, and there is no older key to open
// with. The first seals, and must be there.
func expandSecrets(templates []string) ([]string, error) {
	repl := caddy.NewReplacer()
	secrets := make([]string, 0, len(templates))
	for i, t := range templates {
		s := repl.ReplaceAll(t, "")
		switch {
		case s == "" && i == 0:
			return nil, emptySealingSecret(t)
		case s == "":
			continue
		}
		secrets = append(secrets, s)
	}
	return secrets, nil
}

// CheckSealingSecret reports that the first secret, which seals, expands
// to nothing in this process's environment, naming its placeholder and the
// variables that are unset or empty: Provision would fail. The Caddyfile
// adapter warns with it, since a config may be adapted where it does not
// run.
func (s *Sessions) CheckSealingSecret() error {
	if len(s.Secrets) == 0 || caddy.NewReplacer().ReplaceAll(s.Secrets[0], "") != "" {
		return nil
	}
	return emptySealingSecret(s.Secrets[0])
}

// emptySealingSecret is the error for a first secret, template, that
// expands to nothing.
func emptySealingSecret(template string) error {
	var why []string
	for _, p := range keys.Placeholders(template) {
		name, ok := strings.CutPrefix(p, "env.")
		if !ok {
			continue
		}
		if _, set := os.LookupEnv(name); set {
			why = append(why, "environment variable "+clip(name)+" is empty")
		} else {
			why = append(why, "environment variable "+clip(name)+" is not set")
		}
	}
	if len(why) == 0 {
		why = append(why, "it expands to nothing")
	}
	return fmt.Errorf("secret %s is empty: %s; it is the first secret, which seals session tokens: set it to at least %d bytes (32 random bytes: openssl rand -base64 32)",
		clip(template), strings.Join(why, ", "), session.MinSecret)
}

// pins is the handler's sessions at work: the keys, and what to seal.
type pins struct {
	ttl time.Duration
	// bind is the principal's template; nil without Bind.
	bind   *keys.Template
	ring   func() *session.Keyring
	source string // "secrets" or "storage", for the status view
	now    func() time.Time
	logger *zap.Logger
}

func newPins(ctx caddy.Context, cfg *Sessions, logger *zap.Logger) (*pins, error) {
	p := &pins{ttl: cmp.Or(time.Duration(cfg.TTL), DefaultSessionTTL), now: time.Now, logger: logger}
	if cfg.Bind != "" {
		// Read as keys read it: the Authorization header as servers read
		// it, so that "bearer  alice" is the principal of "Bearer alice".
		bind, err := keys.Parse(cfg.Bind)
		if err != nil {
			return nil, fmt.Errorf("bind %q: %w", clip(cfg.Bind), err)
		}
		p.bind = bind
	}
	if len(cfg.Secrets) > 0 {
		secrets, err := expandSecrets(cfg.Secrets)
		if err != nil {
			return nil, err
		}
		if left := len(cfg.Secrets) - len(secrets); left > 0 {
			// Between rotations, as expected; a misspelt variable shows here.
			logger.Info("sessions: old secrets that came out empty are left out", zap.Int("left_out", left), zap.Int("secrets", len(secrets)))
		}
		ring, err := session.FromSecrets(secrets)
		if err != nil {
			return nil, err
		}
		p.ring, p.source = func() *session.Keyring { return ring }, "secrets"
		return p, nil
	}
	keeper, err := session.NewKeeper(ctx, ctx.Storage(), logger)
	if err != nil {
		return nil, err
	}
	p.ring, p.source = keeper.Ring, "storage"
	return p, nil
}

// openedSession is a session a request's token opened to.
type openedSession struct {
	session.Session
	// token is what the client sent, given back on the responses that
	// name the same session.
	token string
}

// errUpstreamRemoved: the session's upstream left the configuration.
var errUpstreamRemoved = errors.New("the server that held the session is no longer configured")

// errNoPrincipal: sessions are bound, and a request that would open one
// gives no principal (Bind came out empty).
var errNoPrincipal = errors.New("no principal to bind a session to")

// openSession opens the token a request names its session by, if any: the
// upstream's own id takes its place in the header, and the selection
// policy mcp_session learns where to send it. With Bind, it also keeps the
// request's principal for a session the response may open.
//
// Every Mcp-Session-Id a client sends must be a token that opens, in either
// era: the upstream's own ids are never accepted, so nothing reaches a
// session past the pinning, Bind or the ttl. A value given twice, or under
// another spelling (Mcp_Session_Id, which a CGI-style server reads as the
// same), is no token either.
func (h *Handler) openSession(x *exchange) error {
	p := h.pins
	if p == nil {
		return nil
	}
	if p.bind != nil {
		var first jsonrpc.Message
		if len(x.Messages) > 0 {
			first = x.Messages[0]
		}
		value := p.bind.Value(&x.Exchange, &first)
		if value == "" {
			// No principal: no session opens for it, and it opens none.
			if x.Request.Header["Mcp-Session-Id"] != nil {
				return session.ErrPrincipal
			}
			if len(x.Messages) > 0 && string(x.Messages[0].Method) == "initialize" {
				return errNoPrincipal
			}
		}
		principal := session.PrincipalOf(value)
		x.principal = &principal
	}
	values, ok := x.Request.Header["Mcp-Session-Id"]
	if err := sessionHeaderShape(x.Request.Header, values); err != nil {
		return err
	}
	if !ok {
		return nil
	}
	token := values[0]
	if token == "" {
		delete(x.Request.Header, "Mcp-Session-Id") // no session: the same as none
		return nil
	}
	s, err := p.ring().Open(token, x.Start, p.ttl, x.principal)
	if err != nil {
		return err
	}
	tokensOpened.Inc()
	x.sessionBuf = openedSession{Session: s, token: token}
	x.session = &x.sessionBuf
	values[0] = s.ID // the request's own slice: no other reads it
	caddyhttp.SetVar(x.Request.Context(), session.PinVar, &x.session.Upstream)
	return nil
}

// sessionHeaderShape refuses a session header given twice, or spelled
// with underscores.
func sessionHeaderShape(hdr http.Header, values []string) error {
	if len(values) > 1 {
		return session.ErrMalformed
	}
	for name := range hdr {
		if strings.Contains(name, "_") && strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "Mcp-Session-Id") {
			return session.ErrMalformed
		}
	}
	return nil
}

// seal replaces the session id an upstream answered with, before the
// client sees it: with the token the client sent when it names the same
// session, or a new token naming the upstream that answered.
func (p *pins) seal(hdr http.Header, x *exchange) {
	ids := hdr["Mcp-Session-Id"]
	if len(ids) == 0 {
		return
	}
	if x.session != nil && ids[0] == x.session.ID {
		ids[0] = x.session.token // the response's own slice
		hdr["Mcp-Session-Id"] = ids[:1]
		return
	}
	var upstream string
	if selected, ok := caddyhttp.GetVar(x.Request.Context(), session.SelectedVar).(*string); ok {
		upstream = *selected
	} else {
		// Another selection policy chose: the address it dialled.
		if repl, ok := x.Request.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			upstream = repl.ReplaceAll("{http.reverse_proxy.upstream.hostport}", "")
		}
	}
	token, err := p.ring().Seal(session.Session{Upstream: upstream, ID: ids[0], Issued: p.now()}, x.principal)
	if err != nil {
		// Never hand out the upstream's own id: the client could not use
		// it, and it would name the session to anyone who reads it.
		delete(hdr, "Mcp-Session-Id")
		p.logger.Error("sealing a session id failed: the client gets none", zap.Error(err))
		return
	}
	tokensIssued.Inc()
	hdr["Mcp-Session-Id"] = []string{token}
}

// pinnedMiss is why the selection policy found no upstream for a pinned
// request ("" when it did, or was not asked).
func pinnedMiss(x *exchange) string {
	miss, _ := caddyhttp.GetVar(x.Request.Context(), session.MissVar).(string)
	return miss
}

// sessionGoneCode is the JSON-RPC error code of a 404 for a session that
// is not found, the code the TypeScript SDK's server answers with.
const sessionGoneCode = -32001

// sessionGone answers a request whose session is not found: HTTP 404, which
// tells MCP clients to initialize a new session, with a JSON-RPC error for
// the request's id (null when the body holds none, or several).
func (h *Handler) sessionGone(w http.ResponseWriter, x *exchange, err error) error {
	if errors.Is(err, errNoPrincipal) {
		sessionTokens.WithLabelValues("no_principal").Inc()
		env := noPrincipal()
		return h.answer(w, x, &env, http.StatusForbidden)
	}
	outcome := "invalid"
	switch {
	case errors.Is(err, session.ErrExpired):
		outcome = "expired"
	case errors.Is(err, session.ErrPrincipal):
		outcome = "other_principal"
	case errors.Is(err, errUpstreamRemoved):
		outcome = "upstream_removed"
	}
	sessionTokens.WithLabelValues(outcome).Inc()
	x.errorCode = "SESSION_NOT_FOUND"
	if c := h.logger.Check(zap.DebugLevel, "session not found"); c != nil {
		c.Write(zap.String("reason", outcome), zap.Error(err))
	}
	id := json.RawMessage("null")
	requests := 0
	for i := range x.Messages {
		if x.Messages[i].Kind == jsonrpc.Request {
			requests++
			id = x.Messages[i].ID
		}
	}
	if requests != 1 || x.Batch {
		id = json.RawMessage("null")
	}
	message := "Session not found: " + err.Error() + "; initialize a new session"
	if errors.Is(err, session.ErrPrincipal) || errors.Is(err, session.ErrMalformed) {
		// The same words for both: which one would tell a thief that a
		// stolen token is valid.
		message = "Session not found: not a session of this gateway for these credentials; initialize a new session"
	}
	body := envelope.AppendPlainRPCError(make([]byte, 0, 160), id, sessionGoneCode, message)
	hdr := w.Header()
	hdr["Content-Type"] = contentTypeJSON
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusNotFound)
	_, werr := w.Write(body)
	return werr
}

// sessionTokens counts session tokens by outcome: issued, opened, why one
// did not open (expired, invalid, other_principal, upstream_removed), and
// initialize requests refused for giving no principal (no_principal).
var sessionTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "session_tokens_total",
	Help: "Session tokens the gateway issued, opened, or refused (expired, invalid, other_principal, upstream_removed), and sessions refused for want of a principal (no_principal).",
}, []string{"outcome"})

// The series counted on the paths every session takes, looked up once.
var (
	tokensOpened = sessionTokens.WithLabelValues("opened")
	tokensIssued = sessionTokens.WithLabelValues("issued")
)

// SessionsStatus is the sessions in the status view.
type SessionsStatus struct {
	// Keys is where the keys come from: "secrets" or "storage".
	Keys string `json:"keys"`
	// KeysHeld is how many keys open tokens.
	KeysHeld int `json:"keys_held"`
	// SealingKey is the id of the key that seals new tokens (hex, as in
	// every token it seals), not the key.
	SealingKey string `json:"sealing_key"`
	TTL        string `json:"ttl"`
	// Bound: a session works only for the principal that opened it.
	Bound bool `json:"bound"`
}

func (p *pins) status() *SessionsStatus {
	ring := p.ring()
	return &SessionsStatus{Keys: p.source, KeysHeld: ring.Len(), SealingKey: ring.SealingID(), TTL: formatWindow(p.ttl), Bound: p.bind != nil}
}
