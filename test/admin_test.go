package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/internal/version"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/session"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// gatewayStatus is GET /mcp/status as a client reads it, with the
// sections of the features the tests read.
type gatewayStatus struct {
	handler.Status
	Handlers []handlerStatus `json:"handlers"`
}

// handlerStatus is one handler's status, with its features' sections.
type handlerStatus struct {
	handler.HandlerStatus
	Features struct {
		Concurrency *guard.Status         `json:"concurrency"`
		RateLimits  *limits.FeatureStatus `json:"rate_limits"`
		Sessions    *session.Status       `json:"sessions"`
		ToolCatalog *toolschema.Stats     `json:"tool_catalog"`
	} `json:"features"`
}

// toolCatalog is what the process's tool catalog holds, as the first
// handler that learns tools shows it; nil when none does.
func (s gatewayStatus) toolCatalog() *toolschema.Stats {
	for _, h := range s.Handlers {
		if h.Features.ToolCatalog != nil {
			return h.Features.ToolCatalog
		}
	}
	return nil
}

// getStatus reads GET /mcp/status from the admin API.
func getStatus(adminURL string) (raw []byte, status gatewayStatus, err error) {
	// The admin API is replaced on every reload: a request the old one
	// closed unanswered is sent again.
	resp, err := mcptest.ResendingClient().Get(adminURL + "/mcp/status")
	if err != nil {
		return nil, status, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, status, err
	}
	if resp.StatusCode != http.StatusOK {
		return raw, status, &statusError{resp.Status}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return raw, status, &statusError{"Content-Type " + ct}
	}
	err = json.Unmarshal(raw, &status)
	return raw, status, err
}

type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }

func TestAdminStatusShowsLimitsAndGuardsWhileCallsAreHeld(t *testing.T) {
	h := startUpstream(t, holdCallsOf("hold"))
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: `mcp {
	rate_limit admin_per_tool {
		key {http.mcp.tool}
		rate 100/1h
		burst 50
		tools hold echo*
	}
	concurrency admin_guard {
		max 1
		queue 2
		queue_timeout 1m
		key {http.mcp.tool}
	}
}
reverse_proxy ` + h.addr})
	endpoint := g.URL + "/mcp"

	// The first call holds the guard of "hold" and the second waits; once
	// the first is done, the second holds it (so the guard has a service
	// time) and a third waits.
	first := postAsync(t, endpoint, wire.ToolCall("1", "hold"))
	h.waitHeld(t, 1)
	second := postAsync(t, endpoint, wire.ToolCall("2", "hold"))
	waitStatus(t, g.AdminURL, func(s gatewayStatus) bool { return s.Handlers[0].Features.Concurrency.Queued == 1 })
	h.release(1)
	assert.Equal(t, "done", receive(t, first))
	h.waitHeld(t, 1)
	third := postAsync(t, endpoint, wire.ToolCall("3", "hold"))
	raw := waitStatus(t, g.AdminURL, func(s gatewayStatus) bool { return s.Handlers[0].Features.Concurrency.Queued == 1 })
	t.Logf("GET /mcp/status:\n%s", raw)

	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	key := got["handlers"].([]any)[0].(map[string]any)["features"].(map[string]any)["concurrency"].(map[string]any)["keys"].([]any)[0].(map[string]any)
	recent, err := time.ParseDuration(key["recent_service"].(string))
	require.NoError(t, err, "a Go duration, as every duration of the status")
	assert.Positive(t, recent, "the first call's time holding the place")
	key["recent_service"] = "(varies)"
	want := `{
  "version": "` + version.Release + `",
  "handlers": [
    {
      "features": {
      "rate_limits": {
        "limits": [
        {
          "name": "admin_per_tool",
          "key": "{http.mcp.tool}",
          "rate": "100/1h",
          "burst": 50,
          "methods": ["tools/call"],
          "tools": ["hold", "echo*"],
          "max_keys": 1000000,
          "buckets": 1,
          "overflowing": false
        }
        ]
      },
      "concurrency": {
        "name": "admin_guard",
        "key": "{http.mcp.tool}",
        "max": 1,
        "queue": 2,
        "queue_timeout": "1m",
        "cancel_grace": "5s",
        "methods": ["tools/call"],
        "active": 1,
        "queued": 1,
        "keys": [
          {"key": "sha256:e8b22d83b417e85b", "active": 1, "queued": 1, "recent_service": "(varies)"}
        ]
      }
      }
    }
  ]
}`
	normalized, err := json.Marshal(got)
	require.NoError(t, err)
	assert.JSONEq(t, want, string(normalized))

	resp, err := http.Post(g.AdminURL+"/mcp/status", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	h.release(2)
	assert.Equal(t, "done", receive(t, second))
	assert.Equal(t, "done", receive(t, third))
	_ = waitStatus(t, g.AdminURL, func(s gatewayStatus) bool {
		c := s.Handlers[0].Features.Concurrency
		return c.Active == 0 && c.Queued == 0 && len(c.Keys) == 0
	})
}

// waitStatus polls /mcp/status until it shows one handler and ok accepts it,
// and returns that response.
func waitStatus(t *testing.T, adminURL string, ok func(gatewayStatus) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, s, err := getStatus(adminURL)
		if err == nil && len(s.Handlers) == 1 && s.Handlers[0].Features.Concurrency != nil && ok(s) {
			return raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("/mcp/status never showed what the test waited for; last: %s (%v)", raw, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The process keeps its one tool catalog across configs, but /mcp/status
// shows it only in the handlers that learn tools: after a reload to a
// config without validate, contract, tools or results, no tool_catalog is
// listed.
func TestAdminStatusShowsTheToolCatalogWhileAHandlerLearnsTools(t *testing.T) {
	h := startUpstream(t, holdCallsOf("hold"))
	learning := "mcp {\n\tvalidate\n}\nreverse_proxy " + h.addr
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: learning})
	_, status, err := getStatus(g.AdminURL)
	require.NoError(t, err)
	require.NotNil(t, status.toolCatalog(), "a handler that validates learns tools")

	g.Reload(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\nreverse_proxy "+h.addr)
	raw := waitStatus(t, g.AdminURL, func(s gatewayStatus) bool { return s.toolCatalog() == nil })
	assert.NotContains(t, string(raw), "tool_catalog")
}
