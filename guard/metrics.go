package guard

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

var (
	queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "queue_wait_seconds",
		Help:    "Time requests waited for a place in a concurrency guard, by method.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"method"})
	queueWaits = promreg.ByLabel[prometheus.Observer](queueWait)

	inflightDesc = prometheus.NewDesc("caddy_mcp_inflight", "Requests holding a place in the concurrency guards of a name.", []string{"guard"}, nil)
	queuedDesc   = prometheus.NewDesc("caddy_mcp_queued", "Requests waiting in the concurrency guards of a name.", []string{"guard"}, nil)
)

// placesCollector reads the live guards at scrape time, so that the
// request path pays nothing for these gauges.
type placesCollector struct{}

func (placesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- queuedDesc
}

func (placesCollector) Collect(ch chan<- prometheus.Metric) {
	type counts struct{ active, queued int }
	byGuard := make(map[string]counts)
	guards.Range(func(_, v any) bool {
		gs := v.(guardSet)
		t := gs.Totals()
		n := byGuard[gs.name]
		byGuard[gs.name] = counts{n.active + t.Active, n.queued + t.Queued}
		return true
	})
	for name, n := range byGuard {
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(n.active), name)
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(n.queued), name)
	}
}

// Collectors are the metrics of the guards, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{queueWait, placesCollector{}}
}
