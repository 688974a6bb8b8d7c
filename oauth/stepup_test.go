package oauth

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// stepUpCall is a call of tool by a client of 2025-11-25 (which steps up
// on 403 insufficient_scope) for principal sub of client, granted scopes.
func stepUpCall(t *testing.T, tool, client, sub string, scopes ...string) *feature.Exchange {
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`"}}`)
	x.Request.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	x.Principal = &feature.Principal{Issuer: "https://issuer.example.com", ClientID: client, Subject: sub, Scopes: scopes}
	return x
}

// A principal challenged for a tool's scope that comes back without it,
// within StepUpWindow, could not step up (its authorization server did not
// grant the scope): it is answered with the FORBIDDEN envelope as the
// call's result, which the model reads, rather than challenged again,
// which its client would throw as a transport error.
func TestAStepUpAClientCouldNotTakeIsAnsweredWithWordsTheModelReads(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cfg := &Config{Issuers: []IssuerConfig{{URL: "https://issuer.example.com"}}, ToolScopes: []ScopeRule{{Match: "admin_*", Scopes: []string{"admin"}}}}
	require.NoError(t, cfg.Validate())
	g := New(cfg, resource, zap.NewNop(), func() time.Time { return now })

	challenged := func(ref *feature.Refusal) bool {
		require.NotNil(t, ref)
		return ref.Plain != nil && ref.Plain.Status == http.StatusForbidden
	}
	assert.True(t, challenged(g.Check(stepUpCall(t, "admin_reset", "agent", "agent", "tools"))), "first: the step-up challenge")
	second := g.Check(stepUpCall(t, "admin_reset", "agent", "agent", "tools"))
	assert.False(t, challenged(second), "back without the scope: no second challenge")
	assert.Equal(t, envelope.Forbidden, second.Envelope.Code)
	assert.Contains(t, second.Envelope.Message, "admin_reset needs the scope admin")

	assert.True(t, challenged(g.Check(stepUpCall(t, "admin_other", "agent", "agent", "tools"))), "another tool: its own challenge")
	assert.True(t, challenged(g.Check(stepUpCall(t, "admin_reset", "other", "other", "tools"))), "another client: its own challenge")
	assert.Nil(t, g.Check(stepUpCall(t, "admin_reset", "agent", "agent", "tools", "admin")), "granted the scope: it runs")

	now = now.Add(StepUpWindow)
	assert.True(t, challenged(g.Check(stepUpCall(t, "admin_reset", "agent", "agent", "tools"))), "past the window: challenged again")
}

// The challenges remembered are bounded, whoever asks.
func TestTheStepUpsRememberedAreBounded(t *testing.T) {
	var s stepUps
	now := time.Unix(1_800_000_000, 0)
	for i := range 3 * MaxStepUps {
		s.challenged(stepUpKey("i", "c", fmt.Sprint(i), "tool", "t"), now)
	}
	assert.LessOrEqual(t, len(s.m), MaxStepUps)
}
