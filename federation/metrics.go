package federation

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Federation's metrics. The server label is a configured server's name:
// bounded by the configuration.
var (
	listFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_list_failures_total",
		Help: "Lists a server did not give within its deadline and bounds, left out of the merged list.",
	}, []string{"server"})
	serversConnected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_sessions_connected_total",
		Help: "Sessions opened with a server after the client's initialize (the server was not connected then).",
	}, []string{"server"})
	serversReopened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_sessions_reopened_total",
		Help: "Sessions a server lost, opened anew for that server alone.",
	}, []string{"server"})
	listsChanged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_list_changed_total",
		Help: "list_changed notifications a server sent, each making the federation list again before it routes.",
	}, []string{"server"})
	routed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_routed_requests_total",
		Help: "Requests routed to one server, by server and how they ended: passed (the server's answer reached the client), client_gone, or the code of the gateway's envelope.",
	}, []string{"server", "outcome"})
	strayResponses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_stray_responses_total",
		Help: "Responses a server sent to no request it was sent, kept from the client.",
	}, []string{"server"})
	namesPrefixed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "federation_names_prefixed",
		Help: "Entries of the last merged list advertised under a prefixed name, by list.",
	}, []string{"list"})
)

func collectors() []prometheus.Collector {
	return []prometheus.Collector{listFailures, serversConnected, serversReopened, listsChanged, namesPrefixed, routed, strayResponses}
}

// Observe counts a routed request by its server and how it ended.
func (f *federation) Observe(x *feature.Exchange, o feature.Outcome) {
	if x.Server == "" {
		return
	}
	outcome := o.Code
	switch {
	case o.ClientGone:
		outcome = "client_gone"
	case outcome == "":
		outcome = "passed"
	}
	routed.WithLabelValues(x.Server, outcome).Inc()
}
