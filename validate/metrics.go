package validate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Collectors are validate's metrics and the learned tools', reading the
// process's catalog (none while no config learns tools) at scrape time.
// The counters are the process's, registered with each config's registry,
// so that they survive reloads: every feature that learns tools registers
// them.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{validations, toolsLearned, badSchemas, catalogCollector{liveCatalog}}
}

var (
	validations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "validations_total",
		Help: "tools/call arguments checked against the learned inputSchema, by outcome: valid, invalid, unknown_tool, unchecked (no schema known, or the client left: the call passed), or over_budget (checking it would cost more than its bytes allow: the call passed).",
	}, []string{"outcome"})
	// The outcomes' counters, looked up once rather than on every call.
	validValid      = validations.WithLabelValues("valid")
	validInvalid    = validations.WithLabelValues("invalid")
	validUnknown    = validations.WithLabelValues("unknown_tool")
	validUnchecked  = validations.WithLabelValues("unchecked")
	validOverBudget = validations.WithLabelValues("over_budget")
	toolsLearned    = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tools_learned_total",
		Help: "Tools learned from tools/list answers, with a schema that compiles.",
	})
	badSchemas = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tool_schemas_invalid_total",
		Help: "Tools listed with an inputSchema that does not compile, or that gives a member twice or in another letter case (their calls pass unchecked).",
	})
	catalogDescs = struct{ bytes, maxBytes, keys, lists, schemas, evictions *prometheus.Desc }{
		bytes:     prometheus.NewDesc("caddy_mcp_tool_catalog_bytes", "Memory the tools learned from tools/list answers take: lists, compiled schemas, and an entry per endpoint and scope.", nil, nil),
		maxBytes:  prometheus.NewDesc("caddy_mcp_tool_catalog_max_bytes", "The bound of that memory (max_catalog_size).", nil, nil),
		keys:      prometheus.NewDesc("caddy_mcp_tool_catalog_keys", "Endpoints and scopes (callers' credentials, or public) given a tool list.", nil, nil),
		lists:     prometheus.NewDesc("caddy_mcp_tool_catalog_lists", "Distinct tool lists held, each once however many keys were given it.", nil, nil),
		schemas:   prometheus.NewDesc("caddy_mcp_tool_catalog_schemas", "Distinct compiled inputSchemas held.", nil, nil),
		evictions: prometheus.NewDesc("caddy_mcp_tool_catalog_evictions_total", "Keys whose list was dropped to stay within max_catalog_size (their calls pass unchecked until listed again).", nil, nil),
	}
)

// catalogCollector reads the catalog at scrape time.
type catalogCollector struct{ catalog func() *toolschema.Catalog }

func (catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	d := &catalogDescs
	for _, desc := range []*prometheus.Desc{d.bytes, d.maxBytes, d.keys, d.lists, d.schemas, d.evictions} {
		ch <- desc
	}
}

func (cc catalogCollector) Collect(ch chan<- prometheus.Metric) {
	c := cc.catalog()
	if c == nil {
		return
	}
	s := c.Stats()
	d := &catalogDescs
	ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(d.maxBytes, prometheus.GaugeValue, float64(s.MaxBytes))
	ch <- prometheus.MustNewConstMetric(d.keys, prometheus.GaugeValue, float64(s.Keys))
	ch <- prometheus.MustNewConstMetric(d.lists, prometheus.GaugeValue, float64(s.Lists))
	ch <- prometheus.MustNewConstMetric(d.schemas, prometheus.GaugeValue, float64(s.Schemas))
	ch <- prometheus.MustNewConstMetric(d.evictions, prometheus.CounterValue, float64(s.Evictions))
}
