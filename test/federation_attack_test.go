package test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A limit and a policy hold to the names clients see, and a name that
// reads like one of them (letter case, a Unicode look-alike, a server's
// prefix put on another's name) reaches no tool past them: each is
// refused, never passed to the server under a name no glob matches.
func TestFederationNameGamesDodgeNeitherTheLimitsNorThePolicy(t *testing.T) {
	first, second := startStatefulDemo(t), startStatefulDemo(t)
	extra := "\trate_limit second_adds {\n\t\trate 1/1h\n\t\ttools second__add\n\t}\n" +
		"\ttools {\n\t\tdeny second__count count\n\t}\n"
	gw := mcptest.StartGateway(t, federatedSite([]string{"first", "second"}, []string{first, second}, extra))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	add := map[string]any{"a": 1, "b": 2}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "second__add", Arguments: add})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s", mcptest.TextOf(t, res))
	require.Equal(t, envelope.RateLimited, callEnvelope(t, cs, "second__add", add).Code)

	for _, name := range []string{
		"Second__add", "second__ADD", "ｓecond__add", "second__ａdd", "second__add\u200b",
		"SECOND__count", "second__Count", "Count", "ｃount", "first__count", "first__add",
	} {
		code := callEnvelope(t, cs, name, add).Code
		assert.Contains(t, []envelope.Code{envelope.HandoffNamespaceMismatch, envelope.UnknownAction, envelope.RateLimited}, code, name)
	}
}
