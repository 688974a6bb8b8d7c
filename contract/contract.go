// Package contract holds the tool contract an operator approved (a lockfile
// of an MCP server's tools/list, written by `caddy mcp-lock`), compares a
// live list with it, and words the changes for a model: BREAKING changes
// break calls written against the approved contract, RISKY ones may change
// what a call does, SAFE ones break nothing.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Version is the lockfile format this package writes and reads.
const Version = 1

// ServerMeta is the member of a tool's (or prompt's) _meta, in a list a
// federated endpoint merged, naming the server behind the endpoint the
// entry comes from.
const ServerMeta = "caddymcp.dev/server"

// Lockfile is the approved contract: the tools as the server listed them.
type Lockfile struct {
	// Version is the format's version (1).
	Version int `json:"caddy_mcp_lock"`
	// Server is where the tools were listed from.
	Server string `json:"server,omitempty"`
	// LockedAt is when.
	LockedAt time.Time `json:"locked_at"`
	// Tools, sorted by name.
	Tools []Tool `json:"tools"`
}

// Tool is one tool of a contract: what a model relies on.
type Tool struct {
	Name string `json:"name"`
	// Server is, for a federated endpoint, the server behind it whose tool
	// the name is advertised for (the entry's _meta member ServerMeta): a
	// federation's pins keep the name with that server.
	Server      string          `json:"server,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Load reads a lockfile.
func Load(path string) (*Lockfile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l Lockfile
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: not a lockfile: %w", path, err)
	}
	if l.Version != Version {
		return nil, fmt.Errorf("%s: lockfile version %d, want %d (write it with caddy mcp-lock)", path, l.Version, Version)
	}
	return &l, nil
}

// Marshal writes the lockfile, tools sorted by name, indented, so that a
// diff of two lockfiles reads as the change.
func (l *Lockfile) Marshal() ([]byte, error) {
	slices.SortFunc(l.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	for i := range l.Tools {
		var c bytes.Buffer
		if len(l.Tools[i].InputSchema) > 0 && json.Compact(&c, l.Tools[i].InputSchema) == nil {
			l.Tools[i].InputSchema = c.Bytes()
		}
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Severity is how much a change matters to a call written against the
// approved contract.
type Severity string

const (
	Breaking Severity = "BREAKING"
	Risky    Severity = "RISKY"
	Safe     Severity = "SAFE"
)

// Delta is one change of one tool.
type Delta struct {
	Tool     string
	Severity Severity
	// What says it, as a sentence: "Field 'to': the maximum is now 50 (was 100)."
	What string
}

// Diff compares a live list with the locked one, per tool, in a stable
// order: removed and changed tools by name, then new ones.
func Diff(locked, live []Tool) []Delta {
	liveBy := make(map[string]Tool, len(live))
	for _, t := range live {
		liveBy[t.Name] = t
	}
	lockedBy := make(map[string]bool, len(locked))
	var out []Delta
	for _, old := range sortedTools(locked) {
		lockedBy[old.Name] = true
		now, ok := liveBy[old.Name]
		if !ok {
			out = append(out, Delta{old.Name, Breaking, "The tool was removed."})
			continue
		}
		if old.Description != now.Description {
			out = append(out, Delta{old.Name, Risky, "Its description changed: " + quoteCut(now.Description)})
		}
		out = append(out, diffSchemas(old.Name, old.InputSchema, now.InputSchema)...)
	}
	for _, t := range sortedTools(live) {
		if !lockedBy[t.Name] {
			out = append(out, Delta{t.Name, Safe, "A new tool."})
		}
	}
	return out
}

func sortedTools(ts []Tool) []Tool {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func quoteCut(s string) string {
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return "'" + s + "'"
}

// Worst is the most severe of deltas ("" for none).
func Worst(deltas []Delta) Severity {
	worst := Severity("")
	for _, d := range deltas {
		switch {
		case d.Severity == Breaking:
			return Breaking
		case d.Severity == Risky:
			worst = Risky
		case worst == "":
			worst = Safe
		}
	}
	return worst
}

// MaxAwareness is how many changes a <contract_awareness> section lists.
const MaxAwareness = 5

// Awareness renders the BREAKING and RISKY deltas of one tool as a
// <contract_awareness> section, at most MaxAwareness of them, BREAKING
// first; "" when there are none.
//
//	<contract_awareness action="count">
//	<change severity="BREAKING">Field 'to': the maximum is now 50 (was 100).</change>
//	<recovery>The tool changed since the contract you may know: call it as it is now.</recovery>
//	</contract_awareness>
func Awareness(tool string, deltas []Delta) string {
	var shown []Delta
	for _, sev := range []Severity{Breaking, Risky} {
		for _, d := range deltas {
			if d.Tool == tool && d.Severity == sev && len(shown) < MaxAwareness {
				shown = append(shown, d)
			}
		}
	}
	if len(shown) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<contract_awareness action="` + string(envelope.AppendAttr(nil, tool)) + "\">\n")
	for _, d := range shown {
		b.WriteString(`<change severity="` + string(d.Severity) + `">` + string(envelope.AppendText(nil, d.What)) + "</change>\n")
	}
	b.WriteString("<recovery>The tool changed since the contract you may know: list the tools again and call it as it is now.</recovery>\n</contract_awareness>")
	return b.String()
}
