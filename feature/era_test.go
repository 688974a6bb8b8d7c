package feature

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

func TestTheEraIsTheDeclaredVersionWrittenAsADate(t *testing.T) {
	for version, want := range map[string]Era{
		"": SessionEra, "2024-11-05": SessionEra, "2025-03-26": SessionEra, "2025-06-18": SessionEra, "2025-11-25": SessionEra,
		"2026-07-28": StatelessEra, "2026-12-01": StatelessEra,
		// Not versions: a client cannot be read under the stateless era's
		// rules (places freed when it leaves) by sending something that
		// sorts after 2026-07-28.
		"zzz": SessionEra, "2026-07-28x": SessionEra, "2026-7-280": SessionEra, "2026/07/28": SessionEra, "9": SessionEra,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Mcp-Protocol-Version", version)
		e := EraOf(r)
		assert.Equal(t, want, e, version)
		assert.Equal(t, want == StatelessEra, e.ClosingCancels(), version)
		assert.Equal(t, want == SessionEra, e.Resumes(), version)
	}
}

func TestErrorCodesPerEra(t *testing.T) {
	for _, code := range []envelope.Code{envelope.RateLimited, envelope.ServerBusy, envelope.Timeout, envelope.InternalError, envelope.Forbidden} {
		env := envelope.New(code, "x").Envelope()
		assert.Equal(t, -32000, SessionEra.RPCCode(&env), "%s: the session era's clients know -32000", code)
	}
	seen := map[int]envelope.Code{}
	for code, want := range map[envelope.Code]int{
		envelope.ValidationError: 400, envelope.Forbidden: 403, envelope.RateLimited: 429, envelope.InternalError: 500,
		envelope.HandoffUpstreamUnavailable: 502, envelope.ServerBusy: 503, envelope.Timeout: 504,
		envelope.Conflict: 500, // a code the gateway does not answer with
	} {
		env := envelope.New(code, "x").Envelope()
		got := StatelessEra.RPCCode(&env)
		assert.Equal(t, want, got, code)
		assert.False(t, got >= -32768 && got <= -32000, "%s: %d is in JSON-RPC's and MCP's reserved range", code, got)
		if other, dup := seen[got]; dup && code != envelope.Conflict && other != envelope.Conflict {
			t.Errorf("%s and %s share code %d", code, other, got)
		}
		seen[got] = code
	}
	for code := range statelessCodes {
		require.True(t, code.Canonical(), code)
	}
}

func TestCallersAreComparedByTheirAuthorizationAsServersReadIt(t *testing.T) {
	assert.Equal(t, "", NormalizedAuthorization(" \t "))
	assert.Equal(t, "bearer a b", NormalizedAuthorization("  Bearer\ta   b "))
}
