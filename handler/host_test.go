package handler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A feature is given the origin of the site its handler serves
// (internal/origin reads it from the configuration): authorization takes
// it for its resource, and a configuration that names no single origin is
// refused unless it gives resource.
func TestAFeatureIsGivenTheSitesOrigin(t *testing.T) {
	const mcp = `{"handler":"mcp","features":{"authorization":{"issuers":[{"url":"http://127.0.0.1:1"}]}}}`
	for _, c := range []struct {
		name, match string
		origins     []string
		refused     string
	}{
		{"one host", `"match":[{"host":["mcp.test"]}],`, []string{"http://mcp.test:8080"}, ""},
		{"any host", "", nil, "the site answers for any host"},
	} {
		logs := filepath.Join(t.TempDir(), "log")
		cfg := fmt.Sprintf(`{"admin":{"disabled":true},"storage":{"module":"file_system","root":%q},
			"logging":{"logs":{"default":{"level":"ERROR"},"mcp":{"level":"INFO","include":["http.handlers.mcp"],"writer":{"output":"file","filename":%q}}}},
			"apps":{"http":{"servers":{"s":{"listen":[":8080"],"automatic_https":{"disable":true},"routes":[{%s"handle":[%s]}]}}}}}`,
			t.TempDir(), logs, c.match, mcp)
		err := caddy.Validate(mustConfig(t, cfg))
		if c.refused != "" {
			if assert.Error(t, err, c.name) {
				assert.Contains(t, err.Error(), "authorization: resource is required", c.name)
				assert.Contains(t, err.Error(), c.refused, c.name)
			}
			continue
		}
		assert.NoError(t, err, c.name)
		assert.Equal(t, c.origins, resourcesLogged(t, logs), c.name)
	}
}

// resourcesLogged are the canonical URLs the handlers logged at start.
func resourcesLogged(t *testing.T, file string) []string {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	for line := range strings.Lines(string(text)) {
		var entry struct{ Msg, Resource string }
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if strings.Contains(entry.Msg, "must be issued for") {
			out = append(out, entry.Resource)
		}
	}
	return out
}

// mustConfig is raw, a JSON config, as Caddy reads it.
func mustConfig(t *testing.T, raw string) *caddy.Config {
	t.Helper()
	var cfg caddy.Config
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg), raw)
	return &cfg
}
