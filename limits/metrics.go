package limits

import "github.com/prometheus/client_golang/prometheus"

// decisions counts each limit's decisions.
var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "ratelimit_decisions_total",
	Help: "Rate-limit decisions, by limit and decision (allowed or denied).",
}, []string{"limit", "decision"})

// bucketsDesc is the gauge of each limit's live buckets, read from the
// buckets that survive reloads at scrape time, so that the request path
// pays nothing for it.
var bucketsDesc = prometheus.NewDesc("caddy_mcp_ratelimit_buckets", "Live token buckets of a rate limit (a bucket that has refilled is dropped).", []string{"limit"}, nil)

type bucketCollector struct{}

func (bucketCollector) Describe(ch chan<- *prometheus.Desc) { ch <- bucketsDesc }

func (bucketCollector) Collect(ch chan<- prometheus.Metric) {
	byLimit := make(map[string]int)
	buckets.Range(func(_, v any) bool {
		z := v.(*zone)
		byLimit[z.name] += z.Len()
		return true
	})
	for name, n := range byLimit {
		ch <- prometheus.MustNewConstMetric(bucketsDesc, prometheus.GaugeValue, float64(n), name)
	}
}

// Collectors are the metrics of the rate limits, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{decisions, bucketCollector{}}
}
