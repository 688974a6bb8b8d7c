package handler

import (
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// The tool policy's configuration (Handler.Tools): which tools the clients
// may list and call, which are deprecated, and how long a call may run.
// The rules, and the check and hooks that apply them, live in toolpolicy.

// Tools is the tool policy of the tools block.
type Tools struct {
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
	Deprecate []toolpolicy.Deprecation `json:"deprecate,omitempty"`
	// Timeouts bound how long the calls of matching tools may take, from
	// when the gateway received them; the first that matches a tool is
	// its own. Default: none.
	Timeouts []ToolTimeout `json:"timeouts,omitempty"`
}

// ToolTimeout is a deadline for the calls of the tools matching a glob.
type ToolTimeout struct {
	Tools string         `json:"tools"`
	After caddy.Duration `json:"after"`
}

// Validate checks the policy.
func (t *Tools) Validate() error {
	_, err := t.rules()
	return err
}

func (t *Tools) rules() (*toolpolicy.Rules, error) {
	deadlines := make([]toolpolicy.Deadline, 0, len(t.Timeouts))
	for _, d := range t.Timeouts {
		deadlines = append(deadlines, toolpolicy.Deadline{Tools: d.Tools, After: time.Duration(d.After)})
	}
	return toolpolicy.New(t.Allow, t.Deny, t.Deprecate, deadlines)
}
