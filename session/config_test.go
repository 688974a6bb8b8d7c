package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An old secret whose variable is unset (between rotations) is left out;
// the first, which seals, must be set.
func TestSecretsExpandWithTheOldOneUnset(t *testing.T) {
	const current = "the-current-session-secret-0123456789"
	t.Setenv("CADDY_MCP_TEST_SECRET", current)
	t.Setenv("CADDY_MCP_TEST_SECRET_OLD", "")

	got, err := expandSecrets([]string{"{env.CADDY_MCP_TEST_SECRET}", "{env.CADDY_MCP_TEST_SECRET_OLD}"})
	require.NoError(t, err)
	assert.Equal(t, []string{current}, got)

	t.Setenv("CADDY_MCP_TEST_SECRET_OLD", "the-previous-session-secret-012345")
	got, err = expandSecrets([]string{"{env.CADDY_MCP_TEST_SECRET}", "{env.CADDY_MCP_TEST_SECRET_OLD}"})
	require.NoError(t, err)
	assert.Equal(t, []string{current, "the-previous-session-secret-012345"}, got)

	_, err = expandSecrets([]string{"{env.CADDY_MCP_TEST_SECRET_OLD_UNSET}", "{env.CADDY_MCP_TEST_SECRET}"})
	assert.ErrorContains(t, err, "secret {env.CADDY_MCP_TEST_SECRET_OLD_UNSET} is empty: environment variable CADDY_MCP_TEST_SECRET_OLD_UNSET is not set; it is the first secret, which seals")
}
