package session

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

func init() {
	caddy.RegisterModule(Policy{})
}

// The request variables the mcp handler and the policy talk through.
const (
	// PinVar is the upstream a request's session is pinned to (a
	// *string), set by the handler once it has opened the session's token.
	PinVar = "mcp.session.upstream"
	// SelectedVar is the upstream the policy chose (a *string, its dial
	// address), which the handler seals in the token of a new session.
	SelectedVar = "mcp.session.selected"
	// MissVar says why the policy chose none for a pinned request:
	// MissRemoved or MissUnavailable.
	MissVar = "mcp.session.miss"
)

// Why a pinned request found no upstream.
const (
	// MissRemoved: the upstream is not in the pool: the session is gone.
	MissRemoved = "removed"
	// MissUnavailable: it is in the pool and not available now (health
	// checks, fail_duration, max_requests): retry later.
	MissUnavailable = "unavailable"
)

// Policy is the selection policy mcp_session
// (http.reverse_proxy.selection_policies.mcp_session): a request of a
// session goes to the upstream that holds it, as the mcp handler's sessions
// found it in the session's token; any other request (initialize, the
// stateless 2026-07-28 revision) goes where the fallback policy sends it.
//
//	reverse_proxy 10.0.0.1:9000 10.0.0.2:9000 {
//		lb_policy mcp_session {
//			fallback least_conn
//		}
//	}
type Policy struct {
	// FallbackRaw balances the requests that belong to no session.
	// Default: least_conn.
	FallbackRaw json.RawMessage `json:"fallback,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`
	fallback    reverseproxy.Selector
}

// CaddyModule returns the Caddy module information.
func (Policy) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.mcp_session",
		New: func() caddy.Module { return new(Policy) },
	}
}

// Provision loads the fallback policy.
func (p *Policy) Provision(ctx caddy.Context) error {
	if p.FallbackRaw == nil {
		p.FallbackRaw = caddyconfig.JSONModuleObject(reverseproxy.LeastConnSelection{}, "policy", "least_conn", nil)
	}
	mod, err := ctx.LoadModule(p, "FallbackRaw")
	if err != nil {
		return fmt.Errorf("loading fallback selection policy: %w", err)
	}
	sel, ok := mod.(reverseproxy.Selector)
	if !ok {
		return fmt.Errorf("fallback: module %T is not a selection policy", mod)
	}
	p.fallback = sel
	return nil
}

// Select returns the session's upstream when it is in the pool and
// available, nil when it is not (saying why in MissVar), and otherwise the
// fallback's choice.
func (p *Policy) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	// Pointers in the variables: a string would be allocated on every
	// request to go in an interface.
	pinned, ok := caddyhttp.GetVar(r.Context(), PinVar).(*string)
	if !ok || *pinned == "" {
		u := p.fallback.Select(pool, r, w)
		if u != nil {
			caddyhttp.SetVar(r.Context(), SelectedVar, &u.Dial)
		}
		return u
	}
	for _, u := range pool {
		if u.Dial != *pinned {
			continue
		}
		if !u.Available() {
			caddyhttp.SetVar(r.Context(), MissVar, MissUnavailable)
			return nil
		}
		caddyhttp.SetVar(r.Context(), SelectedVar, &u.Dial)
		return u
	}
	caddyhttp.SetVar(r.Context(), MissVar, MissRemoved)
	return nil
}

// UnmarshalCaddyfile reads
//
//	lb_policy mcp_session {
//		fallback <policy>
//	}
func (p *Policy) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "fallback":
			if p.FallbackRaw != nil {
				return d.Err("fallback given twice")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			name := d.Val()
			if name == "mcp_session" {
				return d.Err("fallback: mcp_session cannot be its own fallback")
			}
			mod, err := caddyfile.UnmarshalModule(d, "http.reverse_proxy.selection_policies."+name)
			if err != nil {
				return err
			}
			if _, ok := mod.(reverseproxy.Selector); !ok {
				return d.Errf("fallback: %s is not a selection policy", name)
			}
			p.FallbackRaw = caddyconfig.JSONModuleObject(mod, "policy", name, nil)
		default:
			if spelling.Nearest(d.Val(), []string{"fallback"}) != "" {
				return d.Errf("unrecognized mcp_session option %q: did you mean \"fallback\"?", d.Val())
			}
			return d.Errf("unrecognized mcp_session option %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ reverseproxy.Selector = (*Policy)(nil)
	_ caddy.Provisioner     = (*Policy)(nil)
	_ caddyfile.Unmarshaler = (*Policy)(nil)
)
