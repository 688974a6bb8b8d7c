package handler

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/limits"
)

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func TestMethodLabelIsBounded(t *testing.T) {
	tests := []struct {
		name, method, body, want string
	}{
		{"a call", http.MethodPost, callOne, "tools/call"},
		{"a method of the specification", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}`, "resources/templates/list"},
		{"a notification", http.MethodPost, notification, "notifications/initialized"},
		{"a method a client invents", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"vendor/anything"}`, "other"},
		{"a batch", http.MethodPost, "[" + callOne + "]", "batch"},
		{"a client's response", http.MethodPost, `{"jsonrpc":"2.0","id":1,"result":{}}`, "response"},
		{"JSON that is not JSON-RPC", http.MethodPost, `{"hello":1}`, "invalid"},
		{"no messages", http.MethodPost, "", "invalid"},
		{"a GET stream", http.MethodGet, "", "GET"},
		{"a DELETE", http.MethodDelete, "", "DELETE"},
		{"another HTTP method", http.MethodPut, "", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &exchange{Exchange: feature.Exchange{Request: newRequest(tt.method, "")}}
			if tt.body != "" {
				var err error
				x.Messages, x.Batch, err = jsonrpc.Parse([]byte(tt.body), nil, 16)
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, x.MethodLabel())
		})
	}
}

func TestObserveCountsEachExchangeOnceByOutcome(t *testing.T) {
	h := &Handler{}
	msgs := parsed(t, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`)
	forwarded := forwardedCounters.Get("prompts/get")
	canceled := requestsTotal.WithLabelValues("prompts/get", outcomeCanceled)
	busy := requestsTotal.WithLabelValues("prompts/get", "SERVER_BUSY")
	durations := durationObservers.Get("prompts/get")
	getDurations := durationObservers.Get(http.MethodGet)
	before := [...]float64{featuretest.Counted(t, forwarded), featuretest.Counted(t, canceled), featuretest.Counted(t, busy)}
	postsBefore, getsBefore := histogramCount(t, durations), histogramCount(t, getDurations)

	now := time.Now()
	h.observe(&exchange{Exchange: feature.Exchange{Request: post(""), Messages: msgs, Start: now}}, now)
	h.observe(&exchange{Exchange: feature.Exchange{Request: post(""), Messages: msgs, Start: now}, canceled: true}, now)
	h.observe(&exchange{Exchange: feature.Exchange{Request: post(""), Messages: msgs, Start: now}, errorCode: "SERVER_BUSY"}, now)
	h.observe(&exchange{Exchange: feature.Exchange{Request: newRequest(http.MethodGet, ""), Start: now}}, now)

	assert.Equal(t, before[0]+1, featuretest.Counted(t, forwarded))
	assert.Equal(t, before[1]+1, featuretest.Counted(t, canceled))
	assert.Equal(t, before[2]+1, featuretest.Counted(t, busy))
	assert.Equal(t, postsBefore+3, histogramCount(t, durations), "every POST's duration")
	assert.Equal(t, getsBefore, histogramCount(t, getDurations), "a stream's duration is not a request's")
}

func TestLabelCacheResolvesEachSeriesOnce(t *testing.T) {
	a := forwardedCounters.Get("ping")
	b := forwardedCounters.Get("ping")
	assert.Same(t, a, b)
}

// gathered reads the value of the gauge name{label=value} from reg.
func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func TestGaugesReadTheLiveGuardsAndBucketsAtScrapeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{
			FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"gauge_limit": {Rate: "5/1h", Key: "{http.mcp.tool}"}},
				"concurrency", &Concurrency{Name: "gauge_guard", Max: 2, Queue: 1}),
		})
		serve(t, h, post(toolsCall(`1`, "a")), &upstream{})
		serve(t, h, post(toolsCall(`2`, "b")), &upstream{})
		hold(t, h, "", 2)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _, _ = guardOf(h).Places().Acquire(ctx, "") }()
		synctest.Wait()

		reg := prometheus.NewRegistry()
		for _, c := range append(guard.Collectors(), limits.Collectors()...) {
			require.NoError(t, reg.Register(c))
		}
		inflight, ok := gathered(t, reg, "caddy_mcp_inflight", "guard", "gauge_guard")
		require.True(t, ok)
		assert.Equal(t, 2.0, inflight)
		queued, _ := gathered(t, reg, "caddy_mcp_queued", "guard", "gauge_guard")
		assert.Equal(t, 1.0, queued)
		live, _ := gathered(t, reg, "caddy_mcp_ratelimit_buckets", "limit", "gauge_limit")
		assert.Equal(t, 2.0, live, "one bucket per tool that called")
	})
}

func TestMetricsRegisterWithEachConfigsRegistryOnce(t *testing.T) {
	ctx, cancel := newCaddyContext()
	defer cancel()
	require.NoError(t, registerMetrics(ctx))
	require.NoError(t, registerMetrics(ctx), "registering again is not an error")
	assert.NotNil(t, ctx.GetMetricsRegistry())
}
