package handler

import (
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// Guest features of the tests: two of one kind under two names, and a
// module of the namespace that plugs nothing.
func init() {
	caddy.RegisterModule(&guest{id: feature.Namespace + ".test_first"})
	caddy.RegisterModule(&guest{id: feature.Namespace + ".test_second"})
	caddy.RegisterModule(notAPlugin{})
}

// ran records, in order, the guest features' steps of every test; tests
// that read it do not run in parallel.
var ran struct {
	sync.Mutex
	steps []string
}

func record(step string) {
	ran.Lock()
	ran.steps = append(ran.steps, step)
	ran.Unlock()
}

func guestSteps() []string {
	ran.Lock()
	defer ran.Unlock()
	steps := ran.steps
	ran.steps = nil
	return steps
}

// guest checks each request, refusing calls of the tool Refuse, and
// observes how each ended; it runs at Order.
type guest struct {
	id     string
	Order  int    `json:"order,omitempty"`
	Refuse string `json:"refuse,omitempty"`
}

func (g *guest) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(g.id), New: func() caddy.Module { return &guest{id: g.id} }}
}

func (g *guest) name() string { return caddy.ModuleID(g.id).Name() }

func (g *guest) Cleanup() error {
	record(g.name() + " cleaned up")
	return nil
}

func (g *guest) Parts() feature.Parts {
	return feature.Parts{Order: g.Order, Check: g, Observer: g, Status: func() any { return map[string]string{"refuses": g.Refuse} }}
}

func (g *guest) Check(x *feature.Exchange) *feature.Refusal {
	record(g.name() + " checked")
	if m := x.Single(); m != nil && g.Refuse != "" && string(m.Name) == g.Refuse {
		return &feature.Refusal{Envelope: envelope.New(envelope.Forbidden, "The tool "+g.Refuse+" is not for you.").Envelope()}
	}
	return nil
}

func (g *guest) Observe(x *feature.Exchange, o feature.Outcome) {
	record(g.name() + " observed " + o.Code)
}

type notAPlugin struct{}

func (notAPlugin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_nothing", New: func() caddy.Module { return notAPlugin{} }}
}

// guests is the features list of guest configs, as JSON.
func guests(t *testing.T, configs ...map[string]any) []json.RawMessage {
	var raws []json.RawMessage
	for _, c := range configs {
		raw, err := json.Marshal(c)
		require.NoError(t, err)
		raws = append(raws, raw)
	}
	return raws
}

func TestGuestFeaturesRunByTheirOrderAndAreToldHowEachRequestEnded(t *testing.T) {
	guestSteps()
	h := provision(t, &Handler{FeaturesRaw: guests(t,
		map[string]any{"feature": "test_first", "order": 2, "refuse": "secret"},
		map[string]any{"feature": "test_second", "order": 1},
	)})
	u := &upstream{}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`), u))
	assert.Equal(t, 1, u.calls)
	assert.Equal(t, []string{"test_second checked", "test_first checked", "test_second observed ", "test_first observed "}, guestSteps())

	w = httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret"}}`), u))
	assert.Equal(t, 1, u.calls, "refused: the upstream never saw it")
	assert.Contains(t, w.Body.String(), `<tool_error code=\"FORBIDDEN\"`)
	assert.Equal(t, []string{"test_second checked", "test_first checked", "test_second observed FORBIDDEN", "test_first observed FORBIDDEN"}, guestSteps())

	s := h.status()
	assert.Equal(t, map[string]any{"test_first": map[string]string{"refuses": "secret"}, "test_second": map[string]string{"refuses": ""}}, s.Features)
}

// Caddy cleans up a guest feature with the config that loaded it.
func TestAGuestFeatureIsCleanedUpWithItsConfig(t *testing.T) {
	guestSteps()
	ctx, cancel := newCaddyContext()
	h := &Handler{FeaturesRaw: guests(t, map[string]any{"feature": "test_first"})}
	require.NoError(t, h.Provision(ctx))
	require.NoError(t, h.Cleanup())
	cancel()
	assert.Equal(t, []string{"test_first cleaned up"}, guestSteps())
}

func TestAGuestFeatureThatCannotPlugIsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		features []map[string]any
		err      string
	}{
		"given twice":  {[]map[string]any{{"feature": "test_first"}, {"feature": "test_first"}}, `features: "test_first" given twice`},
		"no plugin":    {[]map[string]any{{"feature": "test_nothing"}}, `"test_nothing" is no feature of the mcp handler`},
		"unknown":      {[]map[string]any{{"feature": "test_none"}}, `http.handlers.mcp.features.test_none`},
		"its own word": {[]map[string]any{{"feature": "test_first", "order": "first"}}, `order`},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := newCaddyContext()
			defer cancel()
			h := &Handler{FeaturesRaw: guests(t, c.features...)}
			err := h.Provision(ctx)
			_ = h.Cleanup()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}
