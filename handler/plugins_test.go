package handler

import (
	"encoding/json"
	"errors"
	"maps"
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

func (g *guest) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Order: g.Order, Check: g, Observer: g, Status: func() any { return map[string]string{"refuses": g.Refuse} }}, nil
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

// guests is the features map of guest configs, as JSON, each under its
// "feature" key.
func guests(t *testing.T, configs ...map[string]any) caddy.ModuleMap {
	m := make(caddy.ModuleMap)
	for _, c := range configs {
		c = maps.Clone(c)
		name := c["feature"].(string)
		delete(c, "feature")
		raw, err := json.Marshal(c)
		require.NoError(t, err)
		m[name] = raw
	}
	return m
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
	unload(t, h)
	cancel()
	assert.Equal(t, []string{"test_first cleaned up"}, guestSteps())
}

func TestAGuestFeatureThatCannotPlugIsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		features []map[string]any
		err      string
	}{
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

// namedResponder is a responder known by its name.
type namedResponder string

func (namedResponder) Open(*feature.Exchange) feature.Hook { return nil }

// Parts run by Order on the way in, and their responders by AnswerOrder
// (Order when none is given), equal orders by name.
func TestPartsRunByOrderAndAnswersByAnswerOrder(t *testing.T) {
	check := func(name string) feature.Check { return &guest{id: name} }
	h := &Handler{}
	h.plugAll([]plugged{
		{"c", feature.Parts{Order: 1, Check: check("c"), Responder: namedResponder("c")}},
		{"a", feature.Parts{Order: 2, AnswerOrder: -5, Check: check("a"), Responder: namedResponder("a")}},
		{"b", feature.Parts{Order: 1, AnswerOrder: 3, Check: check("b"), Responder: namedResponder("b")}},
	})
	var checks, responders []string
	for _, c := range h.checks {
		checks = append(checks, c.(*guest).id)
	}
	for _, r := range h.responders {
		responders = append(responders, string(r.(namedResponder)))
	}
	assert.Equal(t, []string{"b", "c", "a"}, checks, "by Order, then name")
	assert.Equal(t, []string{"a", "c", "b"}, responders, "by AnswerOrder, or Order")
}

// sharedPart is what two test features share through their host: its
// check is plugged once, however many ask for it, and it is closed with
// the handler.
type sharedPart struct{}

func (*sharedPart) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Check: &guest{id: feature.Namespace + ".shared"}}, nil
}

func (*sharedPart) Close() error {
	record("shared closed")
	return nil
}

// sharer asks its host for the value it shares with the other sharers.
type sharer struct{ id string }

func (s *sharer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(s.id), New: func() caddy.Module { return &sharer{id: s.id} }}
}

func (s *sharer) Parts(h feature.Host) (feature.Parts, error) {
	v, err := h.Share("test_shared", func() (any, error) {
		record("shared made")
		return &sharedPart{}, nil
	})
	if err != nil {
		return feature.Parts{}, err
	}
	if _, ok := v.(*sharedPart); !ok {
		return feature.Parts{}, errors.New("not the shared value")
	}
	return feature.Parts{}, nil
}

func init() {
	caddy.RegisterModule(&sharer{id: feature.Namespace + ".test_sharer_a"})
	caddy.RegisterModule(&sharer{id: feature.Namespace + ".test_sharer_b"})
}

func TestWhatFeaturesShareIsMadeOncePluggedOnceAndClosedWithTheHandler(t *testing.T) {
	guestSteps()
	h := provision(t, &Handler{FeaturesRaw: guests(t, map[string]any{"feature": "test_sharer_a"}, map[string]any{"feature": "test_sharer_b"})})
	serve(t, h, post(toolsCall(`1`, "echo")), &upstream{})
	assert.Equal(t, []string{"shared made", "shared checked"}, guestSteps())
	unload(t, h)
	assert.Equal(t, []string{"shared closed"}, guestSteps())
}

// configShared counts the values made for a config, and closes them.
type configShared struct{}

func (configShared) Close() error {
	record("config value closed")
	return nil
}

func TestWhatAConfigsHandlersShareGoesWithItsLastHandler(t *testing.T) {
	guestSteps()
	ctx, cancel := newCaddyContext()
	defer cancel()
	a, b := inConfig(t, ctx, &Handler{}), inConfig(t, ctx, &Handler{})
	made := func() (any, error) { record("config value made"); return configShared{}, nil }
	va, err := (&host{h: a}).ShareInConfig("k", made)
	require.NoError(t, err)
	vb, err := (&host{h: b}).ShareInConfig("k", made)
	require.NoError(t, err)
	assert.Equal(t, va, vb)
	require.NoError(t, a.Cleanup())
	assert.Equal(t, []string{"config value made"}, guestSteps(), "b still uses it")
	require.NoError(t, b.Cleanup())
	assert.Equal(t, []string{"config value closed"}, guestSteps())
}
