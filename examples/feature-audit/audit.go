// Package audit is a feature of the mcp handler written outside its core:
// one structured log line per tool call, saying who called which tool,
// how it ended and how long it took.
//
// It is a Caddy guest module of the namespace http.handlers.mcp.features
// (feature.Namespace) that plugs one part into the core, an observer
// (feature.Observer), and a section of the admin API's /mcp/status. It
// imports nothing of caddy-mcp but the feature contract. A build takes it
// with one import line (see cmd/caddy):
//
//	import _ "github.com/caddymcp/caddy-mcp/examples/feature-audit"
//
// and a Caddyfile turns it on in the mcp block:
//
//	mcp {
//		audit
//	}
//
// Each line is logged at info, by the logger
// http.handlers.mcp.features.audit:
//
//	{"level":"info","logger":"http.handlers.mcp.features.audit","msg":"tool call",
//	 "tool":"echo","id":"3","outcome":"answered","duration":0.0021,
//	 "subject":"alice","client_id":"app","client_ip":"10.0.0.7","session_id":"…"}
//
// outcome is "answered" when the server's answer passed (its own errors,
// a tool's isError result, are the server's to tell), the envelope code
// when the gateway answered in its place (RATE_LIMITED, SERVER_BUSY,
// HANDOFF_UPSTREAM_UNAVAILABLE…), or "client_gone". subject and client_id
// are the verified principal's, with authorization; otherwise empty.
package audit

import (
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
)

func init() {
	caddy.RegisterModule(new(Audit))
}

// Audit logs each tool call.
type Audit struct {
	logger *zap.Logger
	logged atomic.Int64
}

// CaddyModule returns the Caddy module information.
func (*Audit) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".audit",
		New: func() caddy.Module { return new(Audit) },
	}
}

// Provision takes the module's logger.
func (a *Audit) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	return nil
}

// UnmarshalCaddyfile reads `audit`, which takes no argument and no block.
func (a *Audit) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // audit
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(d.Nesting()) {
		return d.Errf("audit takes no block, found %q", d.Val())
	}
	return nil
}

// Parts plugs the observer into the core, and the count of lines logged
// into /mcp/status.
func (a *Audit) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Observer: a, Status: a.status}, nil
}

// Status is the audit's section of /mcp/status.
type Status struct {
	// Logged is the number of tool calls logged since the config loaded.
	Logged int64 `json:"logged"`
}

func (a *Audit) status() any { return Status{Logged: a.logged.Load()} }

// Observe logs each tool call of the request, once it ended.
func (a *Audit) Observe(x *feature.Exchange, o feature.Outcome) {
	outcome := "answered"
	switch {
	case o.Code != "":
		outcome = o.Code
	case o.ClientGone:
		outcome = "client_gone"
	}
	var subject, clientID string
	if p := x.Principal; p != nil {
		subject, clientID = p.Subject, p.ClientID
	}
	for i := range x.Messages {
		m := &x.Messages[i]
		if !feature.IsCall(m) {
			continue
		}
		tool, _ := x.Value("tool", m)
		id, _ := x.Value("id", m)
		session, _ := x.Value("session_id", m)
		a.logger.Info("tool call",
			zap.String("tool", tool),
			zap.String("id", id),
			zap.String("outcome", outcome),
			zap.Duration("duration", o.Duration(x)),
			zap.String("subject", subject),
			zap.String("client_id", clientID),
			zap.String("client_ip", x.Replacer.ReplaceAll("{http.vars.client_ip}", "")),
			zap.String("session_id", session),
		)
		a.logged.Add(1)
	}
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Audit)(nil)
	_ caddyfile.Unmarshaler = (*Audit)(nil)
	_ feature.Plugin        = (*Audit)(nil)
	_ feature.Observer      = (*Audit)(nil)
)
