package feature

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

// Methods are the methods of the MCP specification, 2025-03-26 to
// 2026-07-28 (with the tasks extension). Each gets its own metric label
// value, and a limit or guard may name any of them.
var Methods = []string{
	"initialize", "ping", "server/discover", "subscriptions/listen",
	"tools/list", "tools/call",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get",
	"completion/complete", "logging/setLevel",
	"tasks/get", "tasks/list", "tasks/result", "tasks/cancel", "tasks/update",
	"roots/list", "sampling/createMessage", "elicitation/create",
	"notifications/initialized", "notifications/cancelled", "notifications/progress",
	"notifications/message", "notifications/roots/list_changed",
	"notifications/resources/updated", "notifications/resources/list_changed",
	"notifications/tools/list_changed", "notifications/prompts/list_changed",
	"notifications/tasks/status", "notifications/elicitation/complete",
}

// CheckMethods refuses, in a limit's or guard's methods, a name that is
// neither a method of the specification nor an extension's: a typo such as
// tools/calls would otherwise make the limit count nothing. An extension
// method lives in a namespace of its own (vendor/method), not in one of the
// specification's.
func CheckMethods(methods []string) error {
	for _, m := range methods {
		if slices.Contains(Methods, m) {
			continue
		}
		namespace, _, found := strings.Cut(m, "/")
		if found && namespace != "" && !slices.ContainsFunc(Methods, func(s string) bool {
			return strings.HasPrefix(s, namespace+"/")
		}) {
			continue // an extension's method
		}
		if near := spelling.Nearest(m, Methods); near != "" {
			return fmt.Errorf("methods: unknown method %q: did you mean %q?", m, near)
		}
		return fmt.Errorf("methods: unknown method %q: name a method of the MCP specification, or an extension's in a namespace of its own (vendor/method)", m)
	}
	return nil
}

// Label values for exchanges that are not one message of a known method.
const (
	methodOther    = "other"
	methodBatch    = "batch"
	methodResponse = "response"
	methodInvalid  = "invalid"
)

// methodNames are the methods of the specification, by name, for a label
// value that allocates nothing.
var methodNames = func() map[string]string {
	m := make(map[string]string, len(Methods))
	for _, name := range Methods {
		m[name] = name
	}
	return m
}()

// MethodLabel is the exchange's method as a bounded metric label value:
// a method of the specification, GET or DELETE, or "batch", "response",
// "invalid" or "other".
func (x *Exchange) MethodLabel() string {
	switch x.Request.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		return x.Request.Method
	default:
		return methodOther
	}
	switch {
	case x.Batch:
		return methodBatch
	case len(x.Messages) == 0 || x.Messages[0].Kind == jsonrpc.Invalid:
		return methodInvalid
	case x.Messages[0].Kind == jsonrpc.Response:
		return methodResponse
	}
	return MethodName(x.Messages[0].Method)
}

// MethodName is method as a metric's label may hold it: one of the MCP
// specification's methods, or "other" for anything a client invents.
func MethodName(method []byte) string {
	if name, ok := methodNames[string(method)]; ok {
		return name
	}
	return methodOther
}
