package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/keys"
)

// hold takes n places under key in h's guard, as requests in flight would,
// until the test ends or the returned func is called.
func hold(t *testing.T, h *Handler, key string, n int) (release func()) {
	t.Helper()
	slot, err := guardOf(h).Places().AcquireNAt(context.Background(), key, time.Now(), n)
	require.NoError(t, err)
	t.Cleanup(slot.Release)
	return slot.Release
}

// guardKeys are the places held and waiting in h's guard, by key.
func guardKeys(h *Handler) map[string][2]int {
	out := map[string][2]int{}
	for _, k := range guardOf(h).Places().Stats() {
		out[k.Key] = [2]int{k.Active, k.Queued}
	}
	return out
}

// placesSeen is a next handler that records how many places the guard
// holds while the upstream answers.
func placesSeen(h *Handler, seen *int) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		*seen = guardOf(h).Places().Totals().Active
		return (&upstream{}).ServeHTTP(w, r)
	})
}

func TestEachCountedMessageTakesOnePlace(t *testing.T) {
	tests := []struct {
		name    string
		methods []string
		body    string
		places  int
	}{
		{"a call", nil, toolsCall(`1`, "a"), 1},
		{"a request the guard does not count", nil, listOne, 0},
		{"a batch: one place per call", nil, "[" + toolsCall(`1`, "a") + "," + listOne + "," + toolsCall(`2`, "b") + "," + notification + "]", 2},
		{"counted notifications take places too", []string{"tools/call", "notifications/initialized"}, "[" + toolsCall(`1`, "a") + "," + notification + "]", 2},
		{"a client's response takes none", []string{"tools/call"}, `{"jsonrpc":"2.0","id":5,"result":{}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 3, Methods: tt.methods})})
			var seen int
			w := serve(t, h, post(tt.body), placesSeen(h, &seen))
			assert.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
			assert.Equal(t, tt.places, seen)
			assert.Zero(t, guardOf(h).Places().Totals().Active, "the places come back with the answer")
		})
	}
}

func TestStreamsOfGETNeverTakeAPlace(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1})})
	hold(t, h, "", 1)
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, h, newRequest(http.MethodGet, ""), u))
}

func TestBatchNeedingMorePlacesThanMaxIsToldItCanNeverPass(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 2})})
	u := &upstream{}
	batch := "[" + toolsCall(`1`, "a") + "," + toolsCall(`2`, "a") + "," + toolsCall(`3`, "a") + "]"
	w := serve(t, h, post(batch), u)
	assert.Zero(t, u.calls)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Header().Get("Retry-After"), "waiting cannot help")
	var answers []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &answers))
	require.Len(t, answers, 3)
	env, _ := toolError(t, answers[2]["result"])
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Equal(t, "Server busy: this batch needs 3 calls at once, and at most 2 calls run at once here, so it can never be admitted", env.Message)
	assert.False(t, env.HasRetryAfter())
}

func TestAFullGuardShedsWithServerBusy(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Methods: []string{"tools/call", "notifications/initialized"}})})
	hold(t, h, "", 1)
	u := &upstream{}

	w := serve(t, h, post(callOne), u)
	assert.Zero(t, u.calls)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "10", w.Header().Get("Retry-After"), "without service times, the queue timeout")
	env, isError := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.True(t, isError)
	assert.Equal(t, "Server busy: 1 request in progress and 0 waiting, the most it takes (1 in progress, 0 waiting)", env.Message, "a guard counting more than calls counts requests")

	w = serve(t, h, post(notification), u)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "a notification gets the status")
	m := members(t, w.Body.Bytes())
	assert.NotContains(t, m, "id")
	assert.Equal(t, string(envelope.ServerBusy), decodeRPCError(t, m["error"]).Data.Code)
}

func TestAQueuedRequestRunsWhenAPlaceFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Queue: 1})})
		release := hold(t, h, "", 1)
		go func() {
			time.Sleep(3 * time.Second)
			release()
		}()
		u := &upstream{}
		start := time.Now()
		requireForwarded(t, u, 1, serve(t, h, post(callOne), u))
		assert.Equal(t, 3*time.Second, time.Since(start), "it waited for the place, no longer")
	})
}

func TestAWaitTooLongInTheQueueIsShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Queue: 1, QueueTimeout: caddy.Duration(5 * time.Second)})})
		hold(t, h, "", 1)
		u := &upstream{}
		start := time.Now()
		w := serve(t, h, post(callOne), u)
		assert.Equal(t, 5*time.Second, time.Since(start))
		assert.Zero(t, u.calls)
		env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
		assert.Equal(t, "Server busy: 1 call in progress and 0 waiting; this call waited 5s in the queue without a free place", env.Message)
	})
}

func TestKeyedPlacesAreTakenInKeyOrder(t *testing.T) {
	// Two batches taking places under keys a and b each take a first, so
	// that neither can hold what the other waits for.
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Queue: 1, Key: "{http.mcp.tool}"})})
		release := hold(t, h, "b", 1)
		u := &upstream{}
		done := make(chan *httptest.ResponseRecorder)
		go func() {
			w := httptest.NewRecorder()
			assert.NoError(t, h.ServeHTTP(w, post("["+toolsCall(`1`, "b")+","+toolsCall(`2`, "a")+"]"), u))
			done <- w
		}()
		synctest.Wait()
		assert.Equal(t, map[string][2]int{"a": {1, 0}, "b": {1, 1}}, guardKeys(h), "a taken first, then waiting for b")
		release()
		requireForwarded(t, u, 1, <-done)
	})
}

func TestARefusalUnderOneKeyGivesBackTheOthers(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Key: "{http.mcp.tool}"}), LogKey: true, logger: zap.New(core)})
	hold(t, h, "b", 1)
	u := &upstream{}
	w := serve(t, h, post("["+toolsCall(`1`, "a")+","+toolsCall(`2`, "b")+","+toolsCall(`3`, "c")+"]"), u)
	assert.Zero(t, u.calls)
	assert.Equal(t, map[string][2]int{"b": {1, 0}}, guardKeys(h), "a's place was given back, c's never taken")
	assert.Contains(t, w.Body.String(), "SERVER_BUSY")

	entries := logs.FilterMessage("answered with an envelope").All()
	require.Len(t, entries, 1)
	fields := entries[0].ContextMap()
	assert.Equal(t, "default", fields["guard"])
	assert.Equal(t, "b", fields["key"], "the refusing key, as it is with log_key")
	assert.Equal(t, int64(3), fields["batch_size"])
	assert.Equal(t, zapcore.InfoLevel, entries[0].Level, "the gateway's own policy is routine")
}

func TestARefusingKeyIsLoggedAsADigestWithoutLogKey(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Key: "{header.X-Tenant}"}), logger: zap.New(core)})
	hold(t, h, "secret-tenant", 1)
	serve(t, h, post(callOne, header("X-Tenant", "secret-tenant")), &upstream{})
	entries := logs.FilterMessage("answered with an envelope").All()
	require.Len(t, entries, 1)
	assert.Equal(t, keys.Shown("secret-tenant"), entries[0].ContextMap()["key"])
	assert.NotContains(t, entries[0].ContextMap()["key"], "secret")
}

func TestAShedRequestGetsItsTokensBack(t *testing.T) {
	h := provision(t, &Handler{
		FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"shed_refund": {Rate: "1/1h"}},
			"concurrency", &Concurrency{Max: 1}),
	})
	release := hold(t, h, "", 1)
	u := &upstream{}
	w := serve(t, h, post(callOne), u)
	require.Contains(t, w.Body.String(), "SERVER_BUSY")
	release()
	requireForwarded(t, u, 1, serve(t, h, post(callOne), u))
	assert.Contains(t, serve(t, h, post(callOne), u).Body.String(), "RATE_LIMITED", "the one token was spent once")
}

func TestAClientThatLeavesTheQueueIsNotAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{
			FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"left_queue": {Rate: "1/1h"}},
				"concurrency", &Concurrency{Max: 1, Queue: 1}),
		})
		release := hold(t, h, "", 1)
		r := post(callOne)
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		u := &upstream{}
		w := httptest.NewRecorder()
		err := h.ServeHTTP(w, r, u)
		var he caddyhttp.HandlerError
		require.ErrorAs(t, err, &he)
		assert.Equal(t, statusClientClosed, he.StatusCode)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, w.Body.Len(), "nobody is left to answer")
		assert.Equal(t, map[string][2]int{"": {1, 0}}, guardKeys(h), "it left the queue at once")

		release()
		requireForwarded(t, u, 1, serve(t, h, post(callOne), u))
	})
}

func TestAdmitTakesFromEveryKeyOfABatchAllOrNothing(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"per_tool_batch": {Rate: "1/1h", Key: "{http.mcp.tool}"}}), LogKey: true, logger: zap.New(core)})
	batchOf := func(tools ...string) string {
		var parts []string
		for i, tool := range tools {
			parts = append(parts, toolsCall(`"`+tool+`-`+string(rune('a'+i))+`"`, tool))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	first := []string{"t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09", "t10", "t11", "t12"}
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, h, post(batchOf(first...)), u))

	fresh := []string{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"}
	w := serve(t, h, post(batchOf(append(fresh, "t07")...)), u)
	require.Equal(t, 1, u.calls, "t07 has no token left: %s", w.Body)
	entries := logs.FilterMessage("answered with an envelope").All()
	require.Len(t, entries, 1)
	assert.Equal(t, "t07", entries[0].ContextMap()["key"])
	assert.Equal(t, "per_tool_batch", entries[0].ContextMap()["limit"])

	requireForwarded(t, u, 2, serve(t, h, post(batchOf(fresh...)), u))
}

func TestGuardConfigIsCheckedAtLoad(t *testing.T) {
	tests := map[string]struct {
		cfg  Concurrency
		want string
	}{
		"no max":                   {Concurrency{}, "max 0: must be at least 1"},
		"negative queue":           {Concurrency{Max: 1, Queue: -1}, "queue -1: must not be negative"},
		"a mistyped method":        {Concurrency{Max: 1, Methods: []string{"tools/calls"}}, `did you mean "tools/call"?`},
		"a stream that stays open": {Concurrency{Max: 1, Methods: []string{"tools/call", "subscriptions/listen"}}, "subscriptions/listen cannot take a place"},
		"an unknown key":           {Concurrency{Max: 1, Key: "{clientip}"}, "did you mean {client_ip}?"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := tt.cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			h := &Handler{FeaturesRaw: features(t, "concurrency", &tt.cfg)}
			ctx, cancel := newCaddyContext()
			defer cancel()
			h.logger = zap.NewNop()
			err = h.Provision(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "concurrency: ")
			unload(t, h)
		})
	}
}

func TestNamedGuardIsSharedAndMustBeConfiguredAlike(t *testing.T) {
	a := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "shared_guard_test", Max: 1})})
	b := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "shared_guard_test", Max: 1})})
	hold(t, a, "", 1)
	w := serve(t, b, post(callOne), &upstream{})
	assert.Contains(t, w.Body.String(), "SERVER_BUSY", "both handlers hold places in one guard")
	env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Contains(t, env.Details, envelope.Detail{Key: "guard", Value: "shared_guard_test"})

	ctx, cancel := newCaddyContext()
	defer cancel()
	var errs []error
	for _, max := range []int{1, 2} {
		h := &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "shared_guard_conflict", Max: max}), logger: zap.NewNop()}
		errs = append(errs, h.Provision(ctx))
		t.Cleanup(func() { _ = h.Cleanup() })
	}
	require.NoError(t, errs[0])
	require.Error(t, errs[1], "one config, one name, two settings")
	assert.Contains(t, errs[1].Error(), "configured differently")
}

func TestReloadKeepsAnUnnamedGuardsPlacesWhileItsSettingsStay(t *testing.T) {
	old := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Queue: 3})})
	hold(t, old, "", 1)
	same := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, Queue: 3, QueueTimeout: caddy.Duration(busy.DefaultQueueTimeout)})})
	assert.Same(t, guardOf(old).Places(), guardOf(same).Places(), "capacity does not double during a reload")
	changed := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 2, Queue: 3})})
	assert.NotSame(t, guardOf(old).Places(), guardOf(changed).Places())
}

func TestUpstreamFailureIsLoggedAtWarnWithItsCause(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := provision(t, &Handler{logger: zap.New(core)})
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return errUnreachable })
	r := post(toolsCall(`"id-7"`, "search"))
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.upstream.hostport", "127.0.0.1:9")
	serve(t, h, r, next)
	entries := logs.All()
	require.Len(t, entries, 1)
	e := entries[0]
	assert.Equal(t, zapcore.WarnLevel, e.Level, "an upstream down is a warning")
	fields := e.ContextMap()
	assert.Equal(t, "HANDOFF_UPSTREAM_UNAVAILABLE", fields["code"])
	assert.Equal(t, "tools/call", fields["method"])
	assert.Equal(t, "search", fields["tool"])
	assert.Equal(t, "id-7", fields["id"])
	assert.Equal(t, int64(30), fields["retry_after"])
	assert.Equal(t, "127.0.0.1:9", fields["upstream"])
	assert.Contains(t, fields["error"], "refused")
	assert.NotContains(t, fields, "key")
}
