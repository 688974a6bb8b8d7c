package audit_test

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/caddymcp/caddy-mcp"
)

// adapt adapts a Caddyfile site whose mcp block holds mcp.
func adapt(mcp string) (string, error) {
	body := ":8080 {\n\tmcp {\n" + mcp + "\t}\n\treverse_proxy 127.0.0.1:9000\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(body), map[string]any{"filename": "Caddyfile"})
	return string(out), err
}

// A guest feature is a subdirective of mcp under its own name, read by
// the feature itself, with errors at their line.
func TestTheAuditIsASubdirectiveOfMCP(t *testing.T) {
	out, err := adapt("\t\taudit\n")
	require.NoError(t, err)
	assert.Contains(t, out, `"features":{"audit":{}}`)

	for mcp, want := range map[string]string{
		"\t\taudit now\n":               "Caddyfile:3",
		"\t\taudit {\n\t\t\tx\n\t\t}\n": `audit takes no block, found "x", at Caddyfile:4`,
		"\t\tauditt\n":                  `unrecognized subdirective "auditt": did you mean "audit"?`,
	} {
		_, err := adapt(mcp)
		require.Error(t, err, mcp)
		assert.Contains(t, err.Error(), want, mcp)
	}
}
