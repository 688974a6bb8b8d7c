package test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The official TypeScript SDK's client, sending a user's token: each
// server sees a token for its own audience, on the user's behalf, and a
// user the issuer refuses crm to reads, as the Go client does, a
// FORBIDDEN that names crm, while tickets serves.
func TestCredentialTheTypeScriptClientSeesEachServersOwnTokenAndRefusals(t *testing.T) {
	r := startCredRig(t, mcptest.AuthExchange{Deny: map[string][]string{"mallory": {crmAudience}}}, false, crmServer, ticketsServer)
	alice, mallory := r.userToken(t, "alice"), r.userToken(t, "mallory")
	call := func(server string) mcptest.TSStep { return mcptest.CallToolStep(r.tool(server), map[string]any{}) }

	out := runTSAs(t, r.endpoint, alice, call("crm"), call("tickets"))
	crm := tsIdentity(t, out.Results[0])
	assert.Equal(t, []string{crmAudience}, crm.Aud)
	assert.Equal(t, "alice", crm.Sub)
	assert.Equal(t, gwBasic.ID, crm.ActSub())
	tickets := tsIdentity(t, out.Results[1])
	assert.Equal(t, []string{ticketsResource}, tickets.Aud)
	assert.Equal(t, "alice", tickets.Sub)
	assert.Equal(t, gwJWTID, tickets.ActSub())
	sessions := []string{out.Session.SessionID}

	// crm could not be connected for the session, for want of its
	// credential: every call to it is refused, the first included;
	// tickets' call goes between.
	out = runTSAs(t, r.endpoint, mallory, call("crm"), call("tickets"), call("crm"), call("crm"))
	sessions = append(sessions, out.Session.SessionID)
	first := tsEnvelope(t, out.Results[0])
	assert.Equal(t, envelope.Forbidden, first.Code, "%s", first.Raw)
	tickets = tsIdentity(t, out.Results[1])
	assert.Equal(t, []string{ticketsResource}, tickets.Aud)
	assert.Equal(t, "mallory", tickets.Sub)
	for _, res := range out.Results[2:] {
		p := tsEnvelope(t, res)
		assert.Equal(t, envelope.Forbidden, p.Code, "%s", p.Raw)
		assert.Equal(t, "crm", detailOf(p.Envelope, "server"))
		assert.Contains(t, p.Message, `"crm"`)
	}

	for name, srv := range r.servers {
		assertNeverSawTheClients(t, name, srv, []string{alice, mallory}, sessions)
	}
	for _, c := range r.servers["crm"].Requests() {
		assert.Equal(t, "alice", bearerClaims(t, c.Authorization).Sub, "crm got a request of mallory's")
	}
	assert.Equal(t, map[string]int{"alice": 2, "mallory": 1}, r.as.Stats(t).BySubject)
}

// runTSAs runs the TypeScript client with the user's token and a cookie
// of its own on every request, through steps.
func runTSAs(t *testing.T, endpoint, token string, steps ...mcptest.TSStep) mcptest.TSOutput {
	t.Helper()
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL:     endpoint,
		Headers: map[string]string{"Authorization": "Bearer " + token, "Cookie": clientCookie},
		Steps:   steps,
	})
	require.Len(t, out.Results, len(steps))
	require.NotEmpty(t, out.Session.SessionID)
	return out
}

func tsIdentity(t *testing.T, r mcptest.TSResult) mcptest.Identity {
	t.Helper()
	require.True(t, r.OK, "%v", r.Error)
	require.False(t, r.CallToolResult(t).IsError, "%s", r.Text())
	return identityOf(t, r.Text())
}

func tsEnvelope(t *testing.T, r mcptest.TSResult) envelope.Parsed {
	t.Helper()
	require.True(t, r.OK, "a refusal is a result: %v", r.Error)
	require.True(t, r.CallToolResult(t).IsError, "%s", r.Text())
	p, err := envelope.Parse(r.Text())
	require.NoError(t, err, "%s", r.Text())
	return p
}
