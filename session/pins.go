package session

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
)

// Pins is the handler's sessions at work: the keys, what a request's token
// opens to, and the session ids of the answers sealed. It is the admitter
// of the session phase (feature.Admitter); what it keeps of one request is
// the hook that seals its answer (opened).
type Pins struct {
	ttl time.Duration
	// bind is the principal's template; nil without Bind.
	bind   *keys.Template
	ring   func() *Keyring
	source string // "secrets" or "storage", for the status view
	now    func() time.Time
	// retryAfter is what a client is told to wait when the replica of its
	// session is not available (the handler's upstream_retry_after).
	retryAfter time.Duration
	logger     *zap.Logger
	// remap is where the sessions this node reopened live now.
	remap *remap
}

// New provisions the sessions cfg configures: their keys from its secrets,
// or kept in ctx's storage.
func New(ctx caddy.Context, cfg *Config, retryAfter time.Duration, logger *zap.Logger) (*Pins, error) {
	remap, err := takeRemap()
	if err != nil {
		return nil, err
	}
	p := &Pins{ttl: cmp.Or(time.Duration(cfg.TTL), DefaultTTL), now: time.Now, retryAfter: retryAfter, logger: logger, remap: remap}
	if err := p.setUp(ctx, cfg); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// Release gives back what New took (the node's remap); the handler calls
// it once, when its config is cleaned up.
func (p *Pins) Release() { releaseRemap() }

// setUp reads the bind and the keys of cfg.
func (p *Pins) setUp(ctx caddy.Context, cfg *Config) error {
	if cfg.Bind != "" {
		// Read as keys read it: the Authorization header as servers read
		// it, so that "bearer  alice" is the principal of "Bearer alice".
		bind, err := keys.Parse(cfg.Bind)
		if err != nil {
			return fmt.Errorf("bind %q: %w", feature.Clip(cfg.Bind), err)
		}
		p.bind = bind
	}
	if len(cfg.Secrets) > 0 {
		secrets, err := expandSecrets(cfg.Secrets)
		if err != nil {
			return err
		}
		if left := len(cfg.Secrets) - len(secrets); left > 0 {
			// Between rotations, as expected; a misspelt variable shows here.
			p.logger.Info("sessions: old secrets that came out empty are left out", zap.Int("left_out", left), zap.Int("secrets", len(secrets)))
		}
		ring, err := FromSecrets(secrets)
		if err != nil {
			return err
		}
		p.ring, p.source = func() *Keyring { return ring }, "secrets"
		return nil
	}
	keeper, err := NewKeeper(ctx, ctx.Storage(), p.logger)
	if err != nil {
		return err
	}
	p.ring, p.source = keeper.Ring, "storage"
	return nil
}

// errUpstreamRemoved: the session's upstream left the configuration.
var errUpstreamRemoved = errors.New("the server that held the session is no longer configured")

// errNoPrincipal: sessions are bound, and a request that would open one
// gives no principal (Bind came out empty).
var errNoPrincipal = errors.New("no principal to bind a session to")

// Admit opens the token a request names its session by, if any: the
// upstream's own id takes its place in the header, and the selection
// policy mcp_session learns where to send it. With Bind, it also keeps the
// request's principal for a session the answer may open.
//
// Every Mcp-Session-Id a client sends must be a token that opens, in either
// era: the upstream's own ids are never accepted, so nothing reaches a
// session past the pinning, Bind or the ttl. A value given twice, or under
// another spelling (Mcp_Session_Id, which a CGI-style server reads as the
// same), is no token either.
func (p *Pins) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	o := openings.Get().(*opened)
	o.p = p
	if err := o.open(x); err != nil {
		o.recycle()
		return nil, p.refusal(x, err)
	}
	return o, nil
}

// open opens x's token into o.
func (o *opened) open(x *feature.Exchange) error {
	p := o.p
	if p.bind != nil {
		var first jsonrpc.Message
		if len(x.Messages) > 0 {
			first = x.Messages[0]
		}
		value := p.bind.Value(x, &first)
		if value == "" {
			// No principal: no session opens for it, and it opens none.
			if x.Request.Header["Mcp-Session-Id"] != nil {
				return ErrPrincipal
			}
			if len(x.Messages) > 0 && string(x.Messages[0].Method) == "initialize" {
				return errNoPrincipal
			}
		}
		o.principalBuf = PrincipalOf(value)
		o.principal = &o.principalBuf
	}
	values, ok := x.Request.Header["Mcp-Session-Id"]
	if err := headerShape(x.Request.Header, values); err != nil {
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
	s, ref, err := p.ring().open(token, x.Start, p.ttl, o.principal)
	if err != nil {
		return err
	}
	tokensOpened.Inc()
	if upstream, id, ok := p.remap.find(ref, x.Start); ok {
		s.Upstream, s.ID = upstream, id // reopened on this node
	}
	o.session, o.token, o.ref, o.pinned = s, token, ref, true
	// The client's session, as it names it, for what keys on it across
	// the upstream's own ids (a result kept whole, read later).
	caddyhttp.SetVar(x.Request.Context(), feature.ClientSessionVar, token)
	values[0] = s.ID // the request's own slice: no other reads it
	x.Replica = s.Upstream
	caddyhttp.SetVar(x.Request.Context(), PinVar, &o.session.Upstream)
	return nil
}

// headerShape refuses a session header given twice, or spelled with
// underscores.
func headerShape(hdr http.Header, values []string) error {
	if len(values) > 1 {
		return ErrMalformed
	}
	for name := range hdr {
		if strings.Contains(name, "_") && strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "Mcp-Session-Id") {
			return ErrMalformed
		}
	}
	return nil
}
