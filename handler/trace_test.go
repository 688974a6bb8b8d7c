package handler

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	_ "github.com/caddymcp/caddy-mcp/tracing" // on by default, as in a build
)

// Tracers of the tests: two of one kind under two names, beside tracing,
// on by default as in a build; and a test feature on by default while
// defaultOn is (a test that turns it on turns it off again: every handler
// of the tests would load it).
func init() {
	caddy.RegisterModule(&testTracer{id: feature.Namespace + ".test_tracer"})
	caddy.RegisterModule(&testTracer{id: feature.Namespace + ".test_tracer_b"})
	caddy.RegisterModule(&testDefault{})
}

var (
	defaultOn atomic.Bool
	// quietStarts counts the starts of quiet tracers.
	quietStarts atomic.Int64
)

// testDefault checks each request, when it is on by default.
type testDefault struct {
	Word string `json:"word,omitempty"`
}

func (*testDefault) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_default", New: func() caddy.Module { return new(testDefault) }}
}

func (*testDefault) ByDefault() bool { return defaultOn.Load() }

func (d *testDefault) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Check: d}, nil
}

func (d *testDefault) Check(*feature.Exchange) *feature.Refusal {
	record("default checked " + d.Word)
	return nil
}

// testTracer traces every request when Traced, recording each step its
// trace is told of; a Quiet one that does not trace counts its starts
// rather than record them, allocating nothing.
type testTracer struct {
	id     string
	Traced bool `json:"traced,omitempty"`
	Quiet  bool `json:"quiet,omitempty"`
}

func (t *testTracer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(t.id), New: func() caddy.Module { return &testTracer{id: t.id} }}
}

func (t *testTracer) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Tracer: t}, nil
}

func (t *testTracer) Start(x *feature.Exchange) feature.Trace {
	if t.Quiet {
		quietStarts.Add(1)
		return nil
	}
	record(fmt.Sprintf("trace start %d", len(x.Messages)))
	if !t.Traced {
		return nil
	}
	return testTrace{}
}

// testTrace records each step, and reads the answer as its hook.
type testTrace struct{}

var phaseNames = map[feature.Phase]string{
	feature.PhaseSession: "session", feature.PhaseAdmission: "admission",
	feature.PhaseChecks: "checks", feature.PhaseEntry: "entry",
}

func (testTrace) Phase(p feature.Phase, _ time.Duration) { record("phase " + phaseNames[p]) }
func (testTrace) Upstream(status int)                    { record(fmt.Sprintf("upstream %d", status)) }
func (testTrace) Answered(env *envelope.Envelope, by feature.Rule) {
	record("answered " + string(env.Code) + " " + by.Kind)
}

func (t testTrace) Answer() feature.Hook {
	record("answer opened")
	return t
}

// AppendBody gives the upstream the body with a mark in its params.
func (testTrace) AppendBody(dst, body []byte) ([]byte, bool) {
	record("body")
	return append(dst, bytes.Replace(body, []byte(`"params":{`), []byte(`"params":{"_meta":{"traced":true},`), 1)...), true
}

func (testTrace) Finish(time.Time) { record("finish") }

func (testTrace) Needs() feature.Needs { return feature.Needs{Max: 1 << 10} }
func (testTrace) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	record("response")
	return nil, nil
}
func (testTrace) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }
func (testTrace) End(_ *feature.Exchange, e feature.Ending)             { record("end " + e.String()) }

// tracedHandler is a handler with a tracer (traced or not), a rate limit,
// a check that refuses the tool secret, and a guard: a phase of each kind
// but the session's.
func tracedHandler(t *testing.T, traced bool) *Handler {
	fs := features(t,
		"test_tracer", map[string]any{"traced": traced},
		"rate_limits", map[string]*RateLimit{perClient: {Rate: "100/s"}},
		"concurrency", map[string]any{"max": 10},
		"test_first", map[string]any{"refuse": "secret"},
	)
	return provision(t, &Handler{FeaturesRaw: fs})
}

// The core tells a request's trace of each step, in order: its start once
// the body is read, each phase of admission, the hook on the answer, the
// body for the upstream (which the upstream gets), the upstream's header,
// its response, how it ended, and its finish, before the observers.
func TestATraceIsToldOfEachStepInOrder(t *testing.T) {
	guestSteps()
	h := tracedHandler(t, true)
	u := &upstream{}
	serve(t, h, post(toolsCall(`1`, "echo")), u)
	assert.Equal(t, []string{
		"trace start 1", "phase admission", "test_first checked", "phase checks", "phase entry",
		"answer opened", "body", "upstream 200", "response", "end complete", "finish", "test_first observed ",
	}, guestSteps())
	assert.Contains(t, string(u.body), `"params":{"_meta":{"traced":true},"name":"echo"`)
	assert.Equal(t, int64(len(u.body)), u.contentLength)
}

// A refused request's trace is told of the envelope, and which rule
// refused it, and then finished; nothing goes upstream.
func TestATraceIsToldOfTheGatewaysAnswer(t *testing.T) {
	guestSteps()
	h := tracedHandler(t, true)
	u := &upstream{}
	serve(t, h, post(toolsCall(`1`, "secret")), u)
	assert.Zero(t, u.calls)
	assert.Equal(t, []string{
		"trace start 1", "phase admission", "test_first checked", "phase checks",
		"answered FORBIDDEN ", "finish", "test_first observed FORBIDDEN",
	}, guestSteps())
}

// A request the tracer does not trace is asked nothing more than its
// start, goes upstream as the client sent it, and allocates no more than
// with no tracer at all: tracing's own tracer, where Caddy does not trace
// the request, as any other.
func TestARequestNotTracedCostsNothing(t *testing.T) {
	guestSteps()
	h := tracedHandler(t, false)
	u := &upstream{}
	body := toolsCall(`1`, "echo")
	serve(t, h, post(body), u)
	assert.Equal(t, []string{"trace start 1", "test_first checked", "test_first observed "}, guestSteps())
	assert.Equal(t, body, string(u.body))

	limitsAndGuard := func() *Handler {
		return provision(t, &Handler{FeaturesRaw: features(t,
			"rate_limits", map[string]*RateLimit{perClient: {Rate: "1000000/s"}},
			"concurrency", map[string]any{"max": 10},
		)})
	}
	none, byCaddy := limitsAndGuard(), limitsAndGuard()
	none.tracer = nil
	require.NotNil(t, byCaddy.tracer, "tracing, on by default")
	notTracing := provision(t, &Handler{FeaturesRaw: features(t,
		"test_tracer", map[string]any{"quiet": true},
		"rate_limits", map[string]*RateLimit{perClient: {Rate: "1000000/s"}},
		"concurrency", map[string]any{"max": 10},
	)})
	allocs := func(h *Handler) float64 {
		return testing.AllocsPerRun(200, func() {
			_ = h.ServeHTTP(httptest.NewRecorder(), post(body), &upstream{})
		})
	}
	quietStarts.Store(0)
	without, with, tracing := allocs(none), allocs(notTracing), allocs(byCaddy)
	assert.Equal(t, int64(201), quietStarts.Load(), "started for each request")
	assert.LessOrEqual(t, with, without+0.5, "a tracer that does not trace allocates nothing")
	assert.LessOrEqual(t, tracing, without+0.5, "nor does tracing")
	t.Logf("allocations per request: %.1f without a tracer, %.1f with one that does not trace, %.1f with tracing", without, with, tracing)
}

// A feature that is on by default is loaded by every handler whose
// features do not name it, and as they configure it when they do.
func TestAFeatureOnByDefaultIsLoadedUnlessNamed(t *testing.T) {
	defaultOn.Store(true)
	defer defaultOn.Store(false)
	guestSteps()
	h := provision(t, &Handler{})
	serve(t, h, post(toolsCall(`1`, "echo")), &upstream{})
	assert.Equal(t, []string{"default checked "}, guestSteps(), "loaded, with its zero configuration")

	h = provision(t, &Handler{FeaturesRaw: features(t, "test_default", map[string]any{"word": "named"})})
	serve(t, h, post(toolsCall(`1`, "echo")), &upstream{})
	assert.Equal(t, []string{"default checked named"}, guestSteps(), "loaded once, as the features configure it")
}

// Tracing is on by default; a tracer the features name takes its place,
// and two they name are refused.
func TestAHandlerHasOneTracer(t *testing.T) {
	h := provision(t, &Handler{})
	assert.Equal(t, "tracing.tracer", fmt.Sprintf("%T", h.tracer), "on by default")

	h = provision(t, &Handler{FeaturesRaw: features(t, "test_tracer", map[string]any{})})
	assert.IsType(t, &testTracer{}, h.tracer, "named, it takes tracing's place")

	ctx, cancel := newCaddyContext()
	defer cancel()
	h = &Handler{FeaturesRaw: features(t, "test_tracer", map[string]any{}, "test_tracer_b", map[string]any{})}
	err := h.Provision(ctx)
	_ = h.Cleanup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test_tracer, test_tracer_b each trace requests")
}
