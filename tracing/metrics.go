package tracing

import (
	"github.com/prometheus/client_golang/prometheus"
)

// duration is the conventions' mcp.server.operation.duration, by method,
// tool and error type, in seconds: the time from the request's arrival to
// its response written (a notification's: to the answer's end). Tool
// names are the client's to choose: the first MaxTools seen are labels of
// their own, every other one "_OTHER", so that the series stay bounded
// (tools.go).
var duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "server_operation_duration_seconds",
	Help:    "Time from an MCP message's arrival to its response written (mcp.server.operation.duration), for messages Caddy's tracing traces, by method, tool and error type.",
	Buckets: []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type"})

// MaxTools bounds the tool names a config labels the duration with.
const MaxTools = 100

// errorLabel is an error type as a label: the envelope codes, the JSON-RPC
// codes and the endings are few; a JSON-RPC code is the upstream's to
// choose, and past the specification's range it is "_OTHER".
func errorLabel(t string) string {
	if len(t) > 0 && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) && (len(t) > 6 || !inRPCRange(t)) {
		return "_OTHER"
	}
	return t
}

// inRPCRange reports whether the code t is the JSON-RPC specification's
// or MCP's: -32768 to -32000.
func inRPCRange(t string) bool {
	return len(t) == 6 && t >= "-32000" && t <= "-32768"
}

// Collectors are the metrics of tracing, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{duration}
}
