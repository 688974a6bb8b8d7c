package audit_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"

	_ "github.com/caddymcp/caddy-mcp/examples/feature-audit"
)

// The audit feature, loaded as a guest module into a real Caddy by its
// one import above, in front of the demo server, with authorization
// against a real authorization server and a rate limit of one call a
// minute: the first call is answered by the server, the second refused
// by the gateway, and each is logged once, with who made it.
func TestEachToolCallIsLoggedWithWhoMadeItAndHowItEnded(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	as := mcptest.NewAuthServer(t)
	logFile := filepath.Join(t.TempDir(), "audit.log")
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Admin: true,
		Log:   "output file " + logFile + "\nformat json\nlevel INFO\ninclude http.handlers.mcp.features.audit",
		Site: "mcp {\n\tauthorization {\n\t\tissuer " + as.Issuer + "\n\t}\n\trate_limit one {\n\t\trate 1/1m\n\t}\n\taudit\n}\n" +
			mcptest.ProxyTo(mcptest.StartDemoServer(t)),
	})
	agent := mcptest.AuthClient{ID: "agent", Secret: "agent-secret-agent-secret", Scope: "tools:call"}
	as.Start(t, mcptest.AuthServerConfig{
		Clients:         []mcptest.AuthClient{agent},
		Resources:       map[string]mcptest.AuthResource{gw.URL: {Scope: "tools:call"}},
		DefaultResource: gw.URL,
	}, "k1")
	token := as.Token(t, agent, gw.URL, "tools:call")

	client := &http.Client{Transport: bearer(token)}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "audited", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, HTTPClient: client, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer session.Close()
	for range 2 {
		_, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		require.NoError(t, err)
	}

	// A line is logged once the request is over for the gateway, which
	// may be after the client had its answer.
	require.Eventually(t, func() bool { return logged(t, gw.AdminURL) == 2 }, 10*time.Second, 10*time.Millisecond)
	lines := jsonLines(t, logFile)
	require.Len(t, lines, 2)
	// In either order: the first call's line is written once its request
	// is over, which may be after the second was refused.
	if lines[0]["outcome"] != "answered" {
		lines[0], lines[1] = lines[1], lines[0]
	}
	for i, outcome := range []string{"answered", "RATE_LIMITED"} {
		line := lines[i]
		assert.Equal(t, "tool call", line["msg"])
		assert.Equal(t, "http.handlers.mcp.features.audit", line["logger"])
		assert.Equal(t, "echo", line["tool"])
		assert.Equal(t, outcome, line["outcome"])
		assert.Equal(t, "agent", line["client_id"])
		assert.NotEmpty(t, line["subject"])
		assert.Equal(t, "127.0.0.1", line["client_ip"])
		assert.Equal(t, session.ID(), line["session_id"])
		assert.Greater(t, line["duration"], 0.0)
		assert.NotEmpty(t, line["id"])
	}
	assert.NotEqual(t, lines[0]["id"], lines[1]["id"])
}

// bearer sends every request with the token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// logged is the audit's count of lines in /mcp/status.
func logged(t *testing.T, adminURL string) float64 {
	resp, err := http.Get(adminURL + "/mcp/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var status struct {
		Handlers []struct {
			Features map[string]struct {
				Logged float64 `json:"logged"`
			} `json:"features"`
		} `json:"handlers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
	require.Len(t, status.Handlers, 1)
	return status.Handlers[0].Features["audit"].Logged
}

func jsonLines(t *testing.T, path string) []map[string]any {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var lines []map[string]any
	s := bufio.NewScanner(f)
	for s.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(s.Bytes(), &line), "%s", s.Text())
		lines = append(lines, line)
	}
	require.NoError(t, s.Err())
	return lines
}
