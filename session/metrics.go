package session

import "github.com/prometheus/client_golang/prometheus"

// sessionTokens counts session tokens by outcome: issued, opened, why one
// did not open (expired, invalid, other_principal, upstream_removed), and
// initialize requests refused for giving no principal (no_principal).
var sessionTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "session_tokens_total",
	Help: "Session tokens the gateway issued, opened, or refused (expired, invalid, other_principal, upstream_removed), and sessions refused for want of a principal (no_principal).",
}, []string{"outcome"})

// The series counted on the paths every session takes, looked up once.
var (
	tokensOpened = sessionTokens.WithLabelValues("opened")
	tokensIssued = sessionTokens.WithLabelValues("issued")
)

// Collectors are the metrics of the sessions, for a config's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{sessionTokens} }
