package handler

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// The tool policy's hooks on the upstream's answers: a tools/list answer
// filtered, a tools/call's outcome counted and a deprecated tool's success
// given a warning, and a GET's stream filtered.

// policyAnswers is the tool policy's responder.
type policyAnswers struct{ h *Handler }

func (p policyAnswers) Open(x *feature.Exchange) feature.Hook {
	pol := p.h.policy
	if x.Request.Method == http.MethodGet {
		if pol.EditsLists() {
			return streamFilter{p.h}
		}
		return nil
	}
	m := x.Single()
	switch {
	case m == nil:
	case m.Kind == jsonrpc.Request && string(m.Method) == "tools/list" && pol.EditsLists():
		return listFilter{p.h}
	case isCall(m):
		return &callRead{h: p.h, tool: string(m.Name)}
	}
	return nil
}

// listFilter filters the answer to a tools/list. One that cannot be read
// with certainty fails closed when the policy hides tools.
type listFilter struct{ h *Handler }

func (f listFilter) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: maxListBody, FailClosed: f.h.policy.Hides()}
}

func (f listFilter) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	result, err := jsonrpc.Result(msg, x.Single().ID)
	if err != nil || result.Start == 0 {
		return nil, err // not the response owed, or an error: as it is
	}
	return f.h.filtered(msg, result)
}

func (f listFilter) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return listUnreadable(err)
}

func (listFilter) End(*feature.Exchange, feature.Ending) {}

// filtered is msg with the policy applied to the tools/list result in it,
// nil when nothing was hidden.
func (h *Handler) filtered(msg []byte, result jsonrpc.Member) ([]byte, error) {
	original := msg[result.Start:result.End]
	filtered, removed, err := h.policy.FilterList(original)
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
type streamFilter struct{ h *Handler }

func (f streamFilter) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: maxListBody, FailClosed: f.h.policy.Hides()}
}

func (f streamFilter) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	result, err := jsonrpc.Result(msg, nil)
	if err != nil || result.Start == 0 || msg[result.Start] != '{' {
		return nil, err
	}
	return f.h.filtered(msg, result)
}

func (f streamFilter) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return streamUnreadable(err)
}

func (streamFilter) End(*feature.Exchange, feature.Ending) {}

// maxEditedResult bounds a call result held to add a warning to; a larger
// one passes as it is, without the warning (its outcome is still counted
// when it comes as an event).
const maxEditedResult = 1 << 20

// callRead counts the outcome of a tools/call, and adds the deprecation
// warning to a successful result.
type callRead struct {
	h    *Handler
	tool string
	// outcome is "" until the call's response is read.
	outcome string
}

func (*callRead) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: maxEditedResult}
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
	isError, _ := toolpolicy.IsError(body)
	c.outcome = "success"
	if isError {
		c.outcome = "is_error"
	}
	d := c.h.policy.Deprecated(c.tool)
	if d == nil || isError {
		return nil, nil
	}
	env := toolDeprecated(c.tool, d)
	block := append([]byte(`{"type":"text","text":`), envelope.AppendJSONString(nil, env.Text())...)
	block = append(block, '}')
	edited, ok := toolpolicy.AppendContent(body, block)
	if !ok {
		return nil, nil
	}
	deprecatedCalls.Inc()
	c.h.logger.Debug("deprecated tool called", zap.String("tool", clip(c.tool)))
	return jsonrpc.Splice(msg, result, edited), nil
}

func (*callRead) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	return listUnreadable(err) // never: a call's answer fails open
}

// End counts the call's outcome: timeout when its deadline cut it, unread
// when no response the gateway could read came.
func (c *callRead) End(_ *feature.Exchange, e feature.Ending) {
	if e == feature.DeadlinePassed {
		c.outcome = "timeout"
	}
	toolCalls.WithLabelValues(cmp.Or(c.outcome, "unread")).Inc()
}

// unreadableMessage is the JSON-RPC error sent, for id, in place of what
// the hooks could not read, and recorded as the exchange's answer.
func (h *Handler) unreadableMessage(x *exchange, err error, id json.RawMessage) []byte {
	env := x.watch.hooks.unreadable(x.view(), err)
	h.answered(x, &env)
	return env.AppendRPCError(nil, id, x.era.RPCCode(&env))
}
