package handler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// A sealing secret whose variable is unset fails Provision with an error
// that starts with the option and its placeholder, and says why it is
// empty; CheckSealingSecret, which the Caddyfile adapter warns with, says
// the same.
func TestAnUnsetSealingSecretIsNamedByProvision(t *testing.T) {
	t.Setenv("CADDY_MCP_TEST_EMPTY_SECRET", "")
	tests := []struct {
		secret, why string
	}{
		{"{env.CADDY_MCP_TEST_UNSET_SECRET}", "environment variable CADDY_MCP_TEST_UNSET_SECRET is not set"},
		{"{env.CADDY_MCP_TEST_EMPTY_SECRET}", "environment variable CADDY_MCP_TEST_EMPTY_SECRET is empty"},
		{"", "it expands to nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			cfg := &Sessions{Secrets: []string{tt.secret, "an-old-secret-that-still-opens-tokens"}}
			want := "sessions: secret " + tt.secret + " is empty: " + tt.why + "; it is the first secret, which seals session tokens"

			ctx, cancel := newCaddyContext()
			defer cancel()
			h := &Handler{FeaturesRaw: features(t, "sessions", cfg), logger: zap.NewNop()}
			err := h.Provision(ctx)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), want), "Provision: %v", err)
			assert.NoError(t, h.Cleanup())

			err = cfg.CheckSealingSecret()
			require.Error(t, err)
			assert.True(t, strings.HasPrefix("sessions: "+err.Error(), want), "CheckSealingSecret: %v", err)
		})
	}
	t.Setenv("CADDY_MCP_TEST_SET_SECRET", "the-current-session-secret-0123456789")
	assert.NoError(t, (&Sessions{Secrets: []string{"{env.CADDY_MCP_TEST_SET_SECRET}", "{env.CADDY_MCP_TEST_UNSET_SECRET}"}}).CheckSealingSecret(),
		"an old secret may be unset between rotations")
	assert.NoError(t, (&Sessions{}).CheckSealingSecret(), "without secrets, the keys are in storage")
}
