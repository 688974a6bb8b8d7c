package toolpolicy

import (
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words of the tool policy's answers, as the model reads them.

// toolDeprecated: the warning a deprecated tool's successful result
// carries.
func toolDeprecated(tool string, d *Deprecation) envelope.Envelope {
	b := envelope.New(envelope.Deprecated, `The tool "`+feature.Clip(tool)+`" is deprecated: `+d.Message).Warning()
	if len(d.Replacements) > 0 {
		return b.Suggest("This call succeeded, and its result above is valid. Use " + strings.Join(d.Replacements, " or ") + " for the next calls instead.").
			Actions(d.Replacements...).
			Envelope()
	}
	return b.Suggest("This call succeeded, and its result above is valid. Stop relying on this tool: it may be removed.").Envelope()
}

// toolTimedOut: a call ran past the deadline the policy gives its tool.
func toolTimedOut(tool string, after time.Duration) envelope.Envelope {
	return envelope.New(envelope.Timeout, `The tool "`+feature.Clip(tool)+`" did not answer within `+feature.Window(after)+", the longest this gateway lets it run; the gateway asked the MCP server to stop it").
		Suggest("The call may still complete on the server: check its effect before retrying, so that it does not run twice.").
		Details(envelope.Detail{Key: "timeout", Value: feature.Window(after)}).
		Envelope()
}

// listUnreadable: a tools/list answer the gateway must filter and cannot
// read.
func listUnreadable(err error) envelope.Envelope {
	return envelope.New(envelope.InternalError, "The MCP server's tool list could not be read by this gateway, which must filter it: "+err.Error()).
		Suggest("Tell the user the tools cannot be listed through this gateway right now; retrying will not help.").
		Envelope()
}

// streamUnreadable: a GET's event stream held a message the gateway must
// read to keep hidden tools hidden, and could not.
func streamUnreadable(err error) envelope.Envelope {
	return envelope.New(envelope.InternalError, "A message on this event stream could not be read by this gateway, which must filter the tools it lists: "+err.Error()).
		Suggest("Send the request again instead of resuming its stream.").
		Envelope()
}

// hiddenInBatch: a batch calls a tool the policy hides; nothing in it ran.
func hiddenInBatch(tool string) envelope.Envelope {
	return envelope.New(envelope.UnknownAction, `This batch calls the tool "`+feature.Clip(tool)+`", which does not exist on this MCP server; nothing in the batch ran`).
		Suggest("Send the batch again without that call, or list the tools to see which exist.").
		Envelope()
}

// listInBatch: a batch holds a tools/list, whose answer the gateway edits
// only when it comes alone.
func listInBatch() envelope.Envelope {
	return envelope.New(envelope.ValidationError, "This batch holds a tools/list request, which this gateway answers only when it is sent alone; nothing in the batch ran").
		Suggest("Send tools/list as a request of its own, then the rest of the batch.").
		Envelope()
}

// Words are the policy's envelopes, with an example's values.
func Words() []feature.Word {
	d := &Deprecation{Tool: "search_v1", Message: "search_v1 is replaced by search", Replacements: []string{"search"}}
	return []feature.Word{
		{Name: "a deprecated tool's success", Envelope: toolDeprecated("search_v1", d)},
		{Name: "a deprecated tool with no replacement", Envelope: toolDeprecated("search_v1", &Deprecation{Message: "it goes away in June"})},
		{Name: "a tool list that cannot be read", Envelope: listUnreadable(ErrUnreadable)},
		{Name: "a stream message that cannot be read", Envelope: streamUnreadable(ErrUnreadable)},
		{Name: "a batch calling a hidden tool", Envelope: hiddenInBatch("admin_reset")},
		{Name: "a batch holding a tools/list", Envelope: listInBatch()},
		{Name: "a call past its tool's deadline", Envelope: toolTimedOut("search", 30*time.Second)},
	}
}
