package handler

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// uncheckedStore is a shared store that cannot decide, configured to refuse
// then (on_error deny): the module http.handlers.mcp.stores.test_unchecked,
// whose one instance is unchecked.
type uncheckedStore struct{ asked []string }

var unchecked = &uncheckedStore{}

func init() { caddy.RegisterModule(unchecked) }

func (*uncheckedStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.mcp.stores.test_unchecked", New: func() caddy.Module { return unchecked }}
}

func (s *uncheckedStore) Store(limit string, local ratelimit.Store) ratelimit.Store {
	s.asked = append(s.asked, limit)
	return s
}
func (s *uncheckedStore) Status() any { return "unchecked" }
func (s *uncheckedStore) Take(time.Time, string, int, ratelimit.Limit) ratelimit.Decision {
	return ratelimit.Decision{RetryAfter: 2 * time.Second, Unchecked: true}
}
func (s *uncheckedStore) Refund(time.Time, string, int, ratelimit.Limit) {}
func (s *uncheckedStore) Len() int                                       { return 0 }

// A limit whose shared store cannot decide refuses with SERVER_BUSY, not
// RATE_LIMITED: the client is not over its limit, and is told so.
func TestAStoreThatCannotDecideRefusesWithServerBusy(t *testing.T) {
	store := unchecked
	store.asked = nil // a run before this one in the process asked too
	h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]any{
		"limits": map[string]*RateLimit{perClient: {Rate: "10/1s"}},
		"store":  map[string]any{"backend": "test_unchecked"},
	})})
	require.Equal(t, []string{perClient}, store.asked, "each limit gets its buckets from the shared store")
	s, _ := statusOfFeature[limits.FeatureStatus](h.status(), "rate_limits")
	assert.Equal(t, "unchecked", s.Store)

	u := &upstream{}
	w := serve(t, h, post(toolsCall(`5`, "search")), u)
	assert.Equal(t, 0, u.calls)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "2", w.Header().Get("Retry-After"))
	env, isError := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.True(t, isError)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Contains(t, env.Message, "the rate limits cannot be checked right now")
	assert.Equal(t, 2.0, env.RetryAfter)
}
