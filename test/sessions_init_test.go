package test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/session"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A session's token carries the client's initialize as the Go client sent
// it through the gateway, so that the session can be opened anew on its
// replica once the replica lost it.
func TestASessionTokenCarriesTheClientsInitialize(t *testing.T) {
	a := startReplica(t, "a")
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{a.hostport}, mcpSessionLB))
	_, token, _, upstreamID := openSession(t, g.URL+"/mcp", "")

	keys, err := session.FromSecrets([]string{poolSecret})
	require.NoError(t, err)
	s, err := keys.Open(token, time.Now(), time.Hour, nil)
	require.NoError(t, err)
	assert.Equal(t, upstreamID, s.ID)
	assert.Equal(t, a.hostport, s.Upstream)
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	require.NoError(t, json.Unmarshal(s.Params, &params), "%s", s.Params)
	assert.Equal(t, "2025-11-25", params.ProtocolVersion)
	assert.Equal(t, "sessions-test", params.ClientInfo.Name)
}
