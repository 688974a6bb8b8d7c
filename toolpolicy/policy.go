// Package toolpolicy is what an operator decides about the tools of an MCP
// server the gateway fronts: which ones may be listed and called (allow,
// deny), which are deprecated and by what, and how long a call may run.
// It reads and edits the JSON of tools/list and tools/call answers by
// splicing bytes, so that everything it does not change stays as the
// server wrote it.
package toolpolicy

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Glob is a pattern where * matches any run of characters and every other
// character matches itself.
type Glob []string

// CompileGlob compiles p.
func CompileGlob(p string) Glob { return strings.Split(p, "*") }

// Match reports whether s matches g.
func (g Glob) Match(s string) bool {
	if len(g) == 1 {
		return s == g[0]
	}
	first, last := g[0], g[len(g)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, part := range g[1 : len(g)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// Deprecation retires a tool without breaking the agents that call it.
type Deprecation struct {
	// Tool is the tool's name, or a glob.
	Tool string `json:"tool"`
	// Message tells the model why, and what to do instead.
	Message string `json:"message"`
	// Replacements are the tools to call instead, if any.
	Replacements []string `json:"replacements,omitempty"`

	glob Glob
}

// Notice is what a deprecated tool's description starts with in tools/list.
func (d *Deprecation) Notice() string {
	return "DEPRECATED: " + sentence(d.Message) + " "
}

// sentence ends s with a full stop unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s[len(s)-1:], ".!?") {
		return s
	}
	return s + "."
}

// Deadline bounds how long the calls of the tools matching a glob may run.
type Deadline struct {
	Tools string
	After time.Duration

	glob Glob
}

// Rules are an operator's decisions about tools. The zero Rules allow
// everything and change nothing.
type Rules struct {
	allow, deny  []Glob
	deprecations []Deprecation
	deadlines    []Deadline
}

// New checks and compiles the rules: a tool is allowed when it matches an
// allow glob (every tool, when there is none) and no deny glob; the first
// deprecation and the first deadline whose glob matches a tool are its own.
// A deprecated tool, or a replacement, that the rules hide is refused: the
// model would be told to call a tool it cannot see.
func New(allow, deny []string, deprecations []Deprecation, deadlines []Deadline) (*Rules, error) {
	r := &Rules{}
	var errs []error
	for _, p := range allow {
		if p == "" {
			errs = append(errs, errors.New("allow: an empty pattern"))
		}
		r.allow = append(r.allow, CompileGlob(p))
	}
	for _, p := range deny {
		if p == "" {
			errs = append(errs, errors.New("deny: an empty pattern"))
		}
		r.deny = append(r.deny, CompileGlob(p))
	}
	for _, d := range deprecations {
		switch {
		case d.Tool == "":
			errs = append(errs, errors.New("deprecate: a tool is needed"))
			continue
		case strings.TrimSpace(d.Message) == "":
			errs = append(errs, fmt.Errorf("deprecate %s: a message is needed, telling the model what to do instead", d.Tool))
			continue
		case !strings.Contains(d.Tool, "*") && !r.Allowed(d.Tool):
			errs = append(errs, fmt.Errorf("deprecate %s: the tool is not allowed, so no call to it runs", d.Tool))
		}
		for _, rep := range d.Replacements {
			if !r.Allowed(rep) {
				errs = append(errs, fmt.Errorf("deprecate %s: its replacement %s is not allowed", d.Tool, rep))
			}
		}
		d.glob = CompileGlob(d.Tool)
		d.Replacements = append([]string(nil), d.Replacements...)
		r.deprecations = append(r.deprecations, d)
	}
	for _, d := range deadlines {
		if d.Tools == "" {
			errs = append(errs, errors.New("timeout: a tool pattern is needed"))
		}
		if d.After <= 0 {
			errs = append(errs, fmt.Errorf("timeout %s: %s is not a positive duration", d.Tools, d.After))
		}
		d.glob = CompileGlob(d.Tools)
		r.deadlines = append(r.deadlines, d)
	}
	return r, errors.Join(errs...)
}

// Hides reports whether the rules hide any tool.
func (r *Rules) Hides() bool { return len(r.allow) > 0 || len(r.deny) > 0 }

// EditsLists reports whether tools/list answers need editing.
func (r *Rules) EditsLists() bool { return r.Hides() || len(r.deprecations) > 0 }

// Allowed reports whether a tool may be listed and called. The decision
// reads the name only, never whether the tool exists, so that a refusal
// reveals nothing about the tools a server has.
func (r *Rules) Allowed(name string) bool {
	if len(r.allow) > 0 && !matchAny(r.allow, name) {
		return false
	}
	return !matchAny(r.deny, name)
}

// Deprecated is the tool's deprecation, nil when it has none.
func (r *Rules) Deprecated(name string) *Deprecation {
	for i := range r.deprecations {
		if r.deprecations[i].glob.Match(name) {
			return &r.deprecations[i]
		}
	}
	return nil
}

// Deadline is how long a call of the tool may run, 0 for no bound.
func (r *Rules) Deadline(name string) time.Duration {
	for _, d := range r.deadlines {
		if d.glob.Match(name) {
			return d.After
		}
	}
	return 0
}

func matchAny(globs []Glob, name string) bool {
	for _, g := range globs {
		if g.Match(name) {
			return true
		}
	}
	return false
}
