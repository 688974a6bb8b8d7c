package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/limits"
)

func TestAdminModuleServesMCPStatus(t *testing.T) {
	info := adminStatus{}.CaddyModule()
	assert.Equal(t, caddy.ModuleID("admin.api.mcp"), info.ID)
	assert.IsType(t, new(adminStatus), info.New())
	routes := adminStatus{}.Routes()
	require.Len(t, routes, 1)
	assert.Equal(t, "/mcp/status", routes[0].Pattern)
}

// viewedStatus is a handler's status as a client of /mcp/status reads
// the sections of its rate limits and guard.
type viewedStatus struct {
	Features struct {
		Concurrency *guard.Status         `json:"concurrency"`
		RateLimits  *limits.FeatureStatus `json:"rate_limits"`
	} `json:"features"`
}

// statusOf reads GET /mcp/status and returns the status of the handler
// whose guard has this name.
func statusOf(t *testing.T, guard string) viewedStatus {
	t.Helper()
	w := httptest.NewRecorder()
	require.NoError(t, serveStatus(w, httptest.NewRequest(http.MethodGet, "/mcp/status", nil)))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var s struct{ Handlers []viewedStatus }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &s), "%s", w.Body)
	for _, hs := range s.Handlers {
		if c := hs.Features.Concurrency; c != nil && c.Name == guard {
			return hs
		}
	}
	require.Failf(t, "not listed", "no handler with guard %s in %s", guard, w.Body)
	return viewedStatus{}
}

func TestStatusShowsLimitsAndGuardsWithKeysAsLogsShowThem(t *testing.T) {
	for _, logKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("log_key %v", logKey), func(t *testing.T) {
			guard := fmt.Sprintf("status_guard_%v", logKey)
			h := provision(t, &Handler{
				FeaturesRaw: features(t,
					"rate_limits", map[string]*RateLimit{"status_limit": {Rate: "100/1h", Burst: 50, Key: "{http.mcp.tool}", Tools: []string{"hold", "echo*"}}},
					"concurrency", &Concurrency{Name: guard, Max: 2, Queue: 2, Key: "{http.mcp.tool}"}),
				LogKey: logKey,
			})
			serve(t, h, post(toolsCall(`1`, "echo")), &upstream{})
			hold(t, h, "hold", 2)
			hold(t, h, "echo", 1)

			s := statusOf(t, guard)
			require.NotNil(t, s.Features.RateLimits)
			require.Len(t, s.Features.RateLimits.Limits, 1)
			assert.Nil(t, s.Features.RateLimits.Store, "each node keeps its own")
			assert.Equal(t, limits.Status{
				Name: "status_limit", Key: "{http.mcp.tool}", Rate: "100/1h", Burst: 50,
				Methods: []string{"tools/call"}, Tools: []string{"hold", "echo*"}, MaxKeys: 1000000, Buckets: 1,
			}, s.Features.RateLimits.Limits[0])
			c := s.Features.Concurrency
			require.NotNil(t, c)
			assert.Equal(t, "{http.mcp.tool}", c.Key)
			assert.Equal(t, 2, c.Max)
			assert.Equal(t, 2, c.Queue)
			assert.Equal(t, "10s", c.QueueTimeout)
			assert.Equal(t, []string{"tools/call"}, c.Methods)
			assert.Equal(t, 3, c.Active, "summed over keys")
			assert.Zero(t, c.Queued)
			require.Len(t, c.Keys, 2)
			want := []string{keys.Shown("hold"), keys.Shown("echo")}
			if logKey {
				want = []string{"hold", "echo"}
			}
			assert.Equal(t, want, []string{c.Keys[0].Key, c.Keys[1].Key}, "busiest first")
			assert.Equal(t, 2, c.Keys[0].Active)
		})
	}
}

func TestStatusOfAGuardWithoutKeyShowsTheEmptyKey(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "status_unkeyed", Max: 1})})
	hold(t, h, "", 1)
	c := statusOf(t, "status_unkeyed").Features.Concurrency
	require.Len(t, c.Keys, 1)
	assert.Equal(t, "", c.Keys[0].Key, "nothing secret to hide")
	assert.Empty(t, c.Key)
}

func TestStatusListsAtMostMaxStatusKeys(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "status_many", Max: 1, Key: "{http.mcp.tool}"})})
	for i := range guard.MaxStatusKeys + 5 {
		hold(t, h, fmt.Sprint("tool-", i), 1)
	}
	c := statusOf(t, "status_many").Features.Concurrency
	assert.Len(t, c.Keys, guard.MaxStatusKeys)
	assert.Equal(t, guard.MaxStatusKeys+5, c.Active, "the totals count every key")
}

func TestStatusWithoutLimitsOrGuard(t *testing.T) {
	h := provision(t, &Handler{})
	raw, err := json.Marshal(h.status())
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(raw))
}

func TestStatusShowsTheToolPolicy(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "tools", &Tools{Deny: []string{"admin_*"}, Timeouts: []ToolTimeout{{Tools: "slow_*", After: caddy.Duration(45 * time.Second)}}})})
	raw, err := json.Marshal(h.status())
	require.NoError(t, err)
	assert.JSONEq(t, `{"features":{"tools":{"deny":["admin_*"],"timeouts":[{"tools":"slow_*","after":"45s"}]},
		"tool_catalog":{"max_size":134217728,"bytes":0,"keys":0,"lists":0,"schemas":0,"evictions":0}}}`, string(raw))
}

func TestStatusAnswersOnlyGET(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		err := serveStatus(httptest.NewRecorder(), httptest.NewRequest(method, "/mcp/status", nil))
		var apiErr caddy.APIError
		require.True(t, errors.As(err, &apiErr), method)
		assert.Equal(t, http.StatusMethodNotAllowed, apiErr.HTTPStatus)
	}
}

func TestACleanedUpHandlerLeavesTheStatus(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "status_gone", Max: 1})})
	statusOf(t, "status_gone")
	unload(t, h)
	w := httptest.NewRecorder()
	require.NoError(t, serveStatus(w, httptest.NewRequest(http.MethodGet, "/mcp/status", nil)))
	assert.NotContains(t, w.Body.String(), "status_gone")
}
