package session

import "github.com/prometheus/client_golang/prometheus"

// sessionTokens counts session tokens by outcome: issued, opened, why one
// did not open (expired, invalid, other_principal, upstream_removed), and
// initialize requests refused for giving no principal (no_principal).
var sessionTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "session_tokens_total",
	Help: "Session tokens the gateway issued, opened, or refused (expired, invalid, other_principal, upstream_removed), and sessions refused for want of a principal (no_principal).",
}, []string{"outcome"})

// sessionsReopened counts the sessions reopened on their upstream, with
// the initialize their token carries, after it answered 404 to them.
var sessionsReopened = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "sessions_reopened_total",
	Help: "Sessions the gateway reopened on their upstream, with the client's initialize sealed in the session's token, once the upstream had lost them (answered 404).",
})

// The series counted on the paths every session takes, looked up once.
var (
	tokensOpened = sessionTokens.WithLabelValues("opened")
	tokensIssued = sessionTokens.WithLabelValues("issued")
)

// Collectors are the metrics of the sessions, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{sessionTokens, sessionsReopened}
}
