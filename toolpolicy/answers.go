package toolpolicy

import (
	"bytes"
	"cmp"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Answers is the tool policy's say in the upstream's answers (a
// feature.Responder): a tools/list answer filtered, a tools/call's outcome
// counted and a deprecated tool's success given a warning, and a GET's
// stream filtered.
type Answers struct {
	Rules  *Rules
	Logger *zap.Logger
}

// Open opens the hook for the answer to x, nil when the policy has no say
// in it.
func (a *Answers) Open(x *feature.Exchange) feature.Hook {
	if x.Request.Method == http.MethodGet {
		if a.Rules.EditsLists() {
			return streamFilter{a}
		}
		return nil
	}
	m := x.Single()
	switch {
	case m == nil:
	case m.Kind == jsonrpc.Request && string(m.Method) == "tools/list" && a.Rules.EditsLists():
		return listFilter{a}
	case feature.IsCall(m):
		return &callRead{a: a, tool: string(m.Name)}
	}
	return nil
}

// MaxList bounds a tools/list answer read to filter it.
const MaxList = 8 << 20

// listFilter filters the answer to a tools/list. One that cannot be read
// with certainty fails closed when the policy hides tools.
type listFilter struct{ a *Answers }

func (f listFilter) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: MaxList, FailClosed: f.a.Rules.Hides()}
}

func (f listFilter) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	result, err := jsonrpc.Result(msg, x.Single().ID)
	if err != nil || result.Start == 0 {
		return nil, err // not the response owed, or an error: as it is
	}
	return f.a.filtered(msg, result)
}

func (listFilter) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return listUnreadable(err)
}

func (listFilter) End(*feature.Exchange, feature.Ending) {}

// filtered is msg with the rules applied to the tools/list result in it,
// nil when they change nothing.
func (a *Answers) filtered(msg []byte, result jsonrpc.Member) ([]byte, error) {
	original := msg[result.Start:result.End]
	filtered, removed, err := a.Rules.FilterList(original)
	if err != nil {
		return nil, err
	}
	toolsHidden.Add(float64(removed))
	if bytes.Equal(filtered, original) {
		return nil, nil
	}
	return jsonrpc.Splice(msg, result, filtered), nil
}

// streamFilter reads a GET's event stream. A resumed one (Last-Event-ID)
// replays what an earlier POST's stream carried: the answer to a tools/list
// among it must be filtered as it was the first time, or a client that left
// that stream after its first event would read the hidden tools here. The
// standalone stream carries no response from a server that follows the
// protocol, but one that sends one there is read the same way. Which
// response answers a tools/list is not known on these streams, so every
// result holding "tools" is filtered; one that cannot be read with
// certainty, whatever its size, is replaced by an error for its id. (A
// replayed call result gets no deprecation warning: nothing here says which
// tool it is from.)
type streamFilter struct{ a *Answers }

func (f streamFilter) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: MaxList, FailClosed: f.a.Rules.Hides()}
}

func (f streamFilter) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	result, err := jsonrpc.Result(msg, nil)
	if err != nil || result.Start == 0 || msg[result.Start] != '{' {
		return nil, err
	}
	return f.a.filtered(msg, result)
}

func (streamFilter) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return streamUnreadable(err)
}

func (streamFilter) End(*feature.Exchange, feature.Ending) {}

// MaxEditedResult bounds a call result held to add a warning to; a larger
// one passes as it is, without the warning (its outcome is still counted
// when it comes as an event).
const MaxEditedResult = 1 << 20

// callRead counts the outcome of a tools/call, and adds the deprecation
// warning to a successful result.
type callRead struct {
	a    *Answers
	tool string
	// outcome is "" until the call's response is read.
	outcome string
}

func (*callRead) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: MaxEditedResult}
}

func (c *callRead) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	id := x.Single().ID
	result, err := jsonrpc.Result(msg, id)
	if err != nil || result.Start == 0 {
		if err == nil && jsonrpc.IsResponseTo(msg, id) {
			c.outcome = "rpc_error"
		}
		return nil, nil
	}
	body := msg[result.Start:result.End]
	isError, _ := IsError(body)
	c.outcome = "success"
	if isError {
		c.outcome = "is_error"
	}
	d := c.a.Rules.Deprecated(c.tool)
	if d == nil || isError {
		return nil, nil
	}
	env := toolDeprecated(c.tool, d)
	edited, ok := AppendContent(body, envelope.AppendTextContent(nil, env.Text()))
	if !ok {
		return nil, nil
	}
	deprecatedCalls.Inc()
	c.a.Logger.Debug("deprecated tool called", zap.String("tool", feature.Clip(c.tool)))
	return jsonrpc.Splice(msg, result, edited), nil
}

// Unreadable is never asked for: a call's answer fails open.
func (*callRead) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return listUnreadable(err)
}

// End counts the call's outcome: timeout when its deadline cut it, unread
// when no response the gateway could read came.
func (c *callRead) End(_ *feature.Exchange, e feature.Ending) {
	if e == feature.DeadlinePassed {
		c.outcome = "timeout"
	}
	toolCalls.WithLabelValues(cmp.Or(c.outcome, "unread")).Inc()
}

// CountDenied counts a call to a hidden tool, refused before it ran.
func CountDenied() { toolCalls.WithLabelValues("denied").Inc() }

// Collectors are the policy's metrics. They are the process's, registered
// with each config's registry, so that they survive reloads.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{toolCalls, deprecatedCalls, toolsHidden}
}

var (
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tool_calls_total",
		Help: "tools/call requests under a tools policy, by outcome: success, is_error (the tool failed: isError true), rpc_error (a JSON-RPC error), denied (a hidden tool), timeout (cut at its deadline), unread (no answer the gateway could read).",
	}, []string{"outcome"})
	deprecatedCalls = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "deprecated_calls_total",
		Help: "Successful calls of deprecated tools, answered with a DEPRECATED warning.",
	})
	toolsHidden = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "tools_hidden_total",
		Help: "Tools removed from tools/list answers by the tools policy.",
	})
)
