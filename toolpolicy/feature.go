package toolpolicy

import (
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/validate"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Order is where the tool policy's check runs among the features
// (feature.Parts): after authorization's scopes, before the result
// budgets', the contract's and validate's, so that a hidden tool is
// refused as one that does not exist.
const Order = -48

// AnswerOrder is where its hooks read an answer: after the budgets' and
// the contract's (which read a list as the upstream wrote it), before
// authorization's scopes and validate (which learns what the client is
// given).
const AnswerOrder = -38

// Feature is the tool policy as a feature of the mcp handler: the module
// http.handlers.mcp.features.tools. It says which tools may be listed and
// called, which are deprecated, and how long their calls may run.
// Default (without it): every tool, as the upstream lists it, without a
// deadline.
//
//	tools {
//		allow     <glob...>
//		deny      <glob...>
//		deprecate <tool> "<message>" [<replacement>...]
//		timeout   <glob> <duration>
//	}
type Feature struct {
	// Allow lists the tools that may be listed and called, as globs (*
	// matches any run of characters). Default: every tool.
	Allow []string `json:"allow,omitempty"`
	// Deny hides the tools matching these globs, even when allowed. A
	// hidden tool is removed from every tools/list answer, and a call to it
	// is answered UNKNOWN_ACTION, as for a tool that does not exist.
	Deny []string `json:"deny,omitempty"`
	// Deprecate marks tools as deprecated: their calls still run, a
	// successful result gets a DEPRECATED warning block (isError stays
	// false), and their description in tools/list starts with a notice.
	Deprecate []Deprecation `json:"deprecate,omitempty"`
	// Timeouts bound how long the calls of matching tools may take, from
	// when the gateway received them; the first that matches a tool is
	// its own. Default: none.
	Timeouts []Timeout `json:"timeouts,omitempty"`

	rules *Rules
}

// Timeout is a deadline for the calls of the tools matching a glob.
type Timeout struct {
	Tools string         `json:"tools"`
	After caddy.Duration `json:"after"`
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".tools",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers the policy's metrics, and the learned tools', with
// the config's registry, and compiles the rules.
func (f *Feature) Provision(ctx caddy.Context) error {
	if err := promreg.Register(ctx, append(Collectors(), validate.Collectors()...)...); err != nil {
		return err
	}
	var err error
	f.rules, err = f.compile()
	return err
}

// Validate checks the policy.
func (f *Feature) Validate() error {
	_, err := f.compile()
	return err
}

func (f *Feature) compile() (*Rules, error) {
	deadlines := make([]Deadline, 0, len(f.Timeouts))
	for _, d := range f.Timeouts {
		deadlines = append(deadlines, Deadline{Tools: d.Tools, After: time.Duration(d.After)})
	}
	return New(f.Allow, f.Deny, f.Deprecate, deadlines)
}

// Parts plugs the policy's check (hidden tools, deadlines) and hooks
// (lists filtered, calls counted), on the tools learned from the lists: a
// policy that hides tools refuses a call to one a complete list lacks as
// it refuses a hidden one.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	tools, err := validate.Shared(h)
	if err != nil {
		return feature.Parts{}, err
	}
	if f.rules.Hides() {
		tools.RefuseAbsent(f.rules.Allowed)
	}
	return feature.Parts{
		Order: Order, AnswerOrder: AnswerOrder,
		Check:     &Calls{Rules: f.rules, Tools: tools},
		Responder: &Answers{Rules: f.rules, Logger: h.Logger()},
		Status:    f.status,
	}, nil
}

// Status is the policy as configured in /mcp/status, its timeouts written
// as the status writes every duration.
type Status struct {
	Allow     []string        `json:"allow,omitempty"`
	Deny      []string        `json:"deny,omitempty"`
	Deprecate []Deprecation   `json:"deprecate,omitempty"`
	Timeouts  []TimeoutStatus `json:"timeouts,omitempty"`
}

// TimeoutStatus is a deadline for the calls of the tools matching a glob.
type TimeoutStatus struct {
	Tools string `json:"tools"`
	After string `json:"after"`
}

func (f *Feature) status() any {
	s := Status{Allow: f.Allow, Deny: f.Deny, Deprecate: f.Deprecate}
	for _, t := range f.Timeouts {
		s.Timeouts = append(s.Timeouts, TimeoutStatus{Tools: t.Tools, After: feature.Window(time.Duration(t.After))})
	}
	return s
}

// Interface guards.
var (
	_ caddy.Provisioner = (*Feature)(nil)
	_ caddy.Validator   = (*Feature)(nil)
	_ feature.Plugin    = (*Feature)(nil)
)
