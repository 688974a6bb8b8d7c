package toolpolicy

import (
	"net/http"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/validate"
)

// Calls is the tool policy's check of the requests on their way in (a
// feature.Check): a call to a hidden tool is answered as if the tool did
// not exist.
type Calls struct {
	Rules *Rules
	// Tools are the tools learned from the upstream's lists.
	Tools Tools
}

// Governs: the policy decides which calls run by their tool's name
// (feature.Governing).
func (*Calls) Governs() bool { return true }

// Deadline is how long a call may run: the timeout the policy gives its
// tool (feature.Deadline). A batch's calls have none: a deadline cuts one
// call's answer.
func (c *Calls) Deadline(x *feature.Exchange) time.Duration {
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return 0
	}
	return c.Rules.Deadline(string(m.Name))
}

// TimedOut is what the model is told of a call its deadline cut.
func (c *Calls) TimedOut(x *feature.Exchange, after time.Duration) envelope.Envelope {
	return toolTimedOut(string(x.Single().Name), after)
}

// Tools is what the policy asks of the tools learned from the upstream's
// lists.
type Tools interface {
	// Absent reports whether the complete, fresh list of x's tools lacks
	// tool.
	Absent(x *feature.Exchange, tool string) bool
	// Nearest are the names nearest to tool that the model may be told of.
	Nearest(x *feature.Exchange, tool string) []string
}

// Check refuses a request that calls a tool the policy hides: a single
// call gets UNKNOWN_ACTION with the nearest tools it may call, as a tool
// that does not exist would; a batch holding one is refused whole. The
// decision reads the name only: it says nothing of what exists. A batch
// holding a tools/list is refused too when the policy edits lists (its
// answer is only edited alone).
func (c *Calls) Check(x *feature.Exchange) *feature.Refusal {
	for i := range x.Messages {
		m := &x.Messages[i]
		if x.Batch && m.Kind == jsonrpc.Request && string(m.Method) == "tools/list" && c.Rules.EditsLists() {
			return &feature.Refusal{Envelope: listInBatch(), Status: http.StatusOK}
		}
		if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification || string(m.Method) != "tools/call" {
			continue
		}
		tool := string(m.Name)
		hidden := !c.Rules.Allowed(tool)
		if hidden {
			CountDenied()
		} else if x.Batch && c.Rules.Hides() && c.Tools.Absent(x, tool) {
			// A batch calling a tool the list lacks is refused as one
			// calling a hidden tool is, so that the two look alike.
			hidden = true
		}
		switch {
		case !hidden:
			continue
		case x.Batch:
			return &feature.Refusal{Envelope: hiddenInBatch(tool), Status: http.StatusBadRequest}
		case m.Kind == jsonrpc.Notification:
			// A call sent as a notification runs nowhere that follows the
			// protocol; one that names a hidden tool is refused all the
			// same, in case the server runs it.
			return &feature.Refusal{Envelope: validate.UnknownTool(tool, nil), Status: http.StatusBadRequest}
		}
		return &feature.Refusal{Envelope: validate.UnknownTool(tool, c.Tools.Nearest(x, tool)), Status: http.StatusOK}
	}
	return nil
}
