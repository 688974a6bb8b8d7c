package handler

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// A refusal reaches a 2026-07-28 client with the era's code; a tools/call
// is still answered with a result in both eras, the only channel every
// client hands to the model.
func TestRefusalsCarryTheCodeOfTheRequestsEra(t *testing.T) {
	list := `{"jsonrpc":"2.0","id":"l-1","method":"tools/list"}`
	tests := []struct {
		name, version string
		code          int
	}{
		{"2025-11-25", "2025-11-25", -32000},
		{"no version", "", -32000},
		{"2026-07-28", "2026-07-28", 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{perClient: {Rate: "1/10s", Burst: 1, Methods: []string{"tools/list", "tools/call"}}})})
				u := &upstream{}
				mirrors := func(method, name string) []func(*http.Request) {
					if tt.version == "" {
						return nil
					}
					return []func(*http.Request){header("Mcp-Protocol-Version", tt.version), header("Mcp-Method", method), header("Mcp-Name", name)}
				}
				requireForwarded(t, u, 1, serve(t, h, post(list, mirrors("tools/list", "")...), u))

				w := serve(t, h, post(list, mirrors("tools/list", "")...), u)
				assert.Equal(t, http.StatusOK, w.Code)
				m := members(t, w.Body.Bytes())
				assert.Equal(t, `"l-1"`, string(m["id"]))
				e := decodeRPCError(t, m["error"])
				assert.Equal(t, tt.code, e.Code)
				assert.Equal(t, "RATE_LIMITED", e.Data.Code)

				w = serve(t, h, post(toolsCall(`2`, "search"), mirrors("tools/call", "search")...), u)
				assert.Equal(t, http.StatusOK, w.Code)
				m = members(t, w.Body.Bytes())
				assert.NotContains(t, m, "error")
				env, isError := toolError(t, m["result"])
				assert.True(t, isError)
				assert.Equal(t, envelope.RateLimited, env.Code)
				assert.Equal(t, 1, u.calls)
			})
		})
	}
}

// MCP 2026-07-28 has no sessions: a server of that era ignores
// Mcp-Session-Id, so a limit keyed by it would give every value a client
// invents a bucket of its own. Found by an attacker's review.
func TestSessionIDIsEmptyInTheStatelessEra(t *testing.T) {
	for version, want := range map[string]string{"2025-11-25": "s-1", "": "s-1", "2026-07-28": ""} {
		h := provision(t, &Handler{})
		u := &upstream{ask: []string{"{http.mcp.session_id}"}}
		r := post(toolsCall(`1`, "search"), header("Mcp-Session-Id", "s-1"), header("Mcp-Protocol-Version", version),
			header("Mcp-Method", "tools/call"), header("Mcp-Name", "search"))
		requireForwarded(t, u, 1, serve(t, h, r, u))
		assert.Equal(t, want, u.resolved["{http.mcp.session_id}"], version)
	}
}
