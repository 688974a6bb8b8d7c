package toolpolicy

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnmarshalReadsTheToolsBlock(t *testing.T) {
	input := `mcp {
	tools {
		allow   search_* get_* old_search
		deny    admin_* *delete*
		deny    internal_*
		deprecate old_search "Use search_v2 instead" search_v2
		deprecate get_legacy "Going away"
		timeout slow_* 45s
		timeout * 2m
	}
}`
	var got Feature
	d := caddyfile.NewTestDispenser(input)
	d.Next() // mcp
	d.NextBlock(0)
	require.NoError(t, got.UnmarshalCaddyfile(d.NewFromNextSegment()))
	assert.Equal(t, Feature{
		Allow: []string{"search_*", "get_*", "old_search"},
		Deny:  []string{"admin_*", "*delete*", "internal_*"},
		Deprecate: []Deprecation{
			{Tool: "old_search", Message: "Use search_v2 instead", Replacements: []string{"search_v2"}},
			{Tool: "get_legacy", Message: "Going away"},
		},
		Timeouts: []Timeout{
			{Tools: "slow_*", After: caddy.Duration(45 * time.Second)},
			{Tools: "*", After: caddy.Duration(2 * time.Minute)},
		},
	}, got)

	for in, want := range map[string]string{
		"tools {\n\t\tallow\n\t}":                             "allow needs at least one tool name or glob",
		"tools {\n\t\tdeprecate x\n\t}":                       `deprecate <tool> "<message>"`,
		"tools {\n\t\ttimeout x\n\t}":                         "timeout <tool glob> <duration>",
		"tools {\n\t\ttimeout x soon\n\t}":                    `timeout x: "soon" is not a positive duration`,
		"tools {\n\t\ttimeout x 0s\n\t}":                      `timeout x: "0s" is not a positive duration`,
		"tools {\n\t\thide x\n\t}":                            `unrecognized tools subdirective "hide"`,
		"tools {\n\t\tdenny x\n\t}":                           `unrecognized tools subdirective "denny": did you mean "deny"?`,
		"tools x":                                             "wrong argument count",
		"tools {\n\t\tdeny a*\n\t\tdeprecate ab \"m\"\n\t}":   "deprecate ab: the tool is not allowed",
		"tools {\n\t\tdeny a*\n\t\tdeprecate b \"m\" a1\n\t}": "deprecate b: its replacement a1 is not allowed",
	} {
		var f Feature
		err := f.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}
