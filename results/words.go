package results

import (
	"strconv"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// TooLarge is the code of a result over its budget (a custom code: the
// contract allows them).
const TooLarge envelope.Code = "RESULT_TOO_LARGE"

// tooLarge: the result of tool is size bytes (0: more than the budget, not
// read further), over budget.
func tooLarge(tool string, size, budget int) envelope.Envelope {
	how := "over " + strconv.Itoa(budget) + " bytes"
	if size > 0 {
		how = strconv.Itoa(size) + " bytes"
	}
	return envelope.New(TooLarge, "The result of the tool "+feature.Clip(tool)+" is too large to be given to you: "+how+", over its budget of "+strconv.Itoa(budget)+" bytes (about "+strconv.Itoa(budget/BytesPerToken)+" tokens)").
		Suggest("Ask for less: call the tool again with a narrower query, use its paging or filter arguments if it has any (a limit, a page or cursor, fewer fields), or ask for a summary. Calling it again the same way gives the same answer.").
		Details(envelope.Detail{Key: "tool", Value: feature.Clip(tool)}, envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)}).
		Envelope()
}

// unreadable: the call's answer could not be read to hold it to its budget
// (compressed, or not JSON-RPC).
func unreadable(tool string, err error) envelope.Envelope {
	return envelope.New(envelope.InternalError, "The result of the tool "+feature.Clip(tool)+" could not be checked against its size budget: "+err.Error()).
		Suggest("Tell the user the MCP server's answer could not be read by the gateway; retrying the same call is likely to fail the same way.").
		Envelope()
}

// callInBatch: a call whose result has a budget, in a batch.
func callInBatch(tool string) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "This batch calls the tool "+feature.Clip(tool)+", whose result this server holds to a size budget only when the call is sent alone; nothing in the batch ran").
		Suggest("Send each tools/call as a request of its own.").
		Envelope()
}

// Words are the envelopes of the budgets, for the golden list.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "a result over its budget", Envelope: tooLarge("search_logs", 3145728, 102400)},
		{Name: "a result over its budget, not read past it", Envelope: tooLarge("search_logs", 0, 102400)},
		{Name: "a result that could not be read to hold it to its budget", Envelope: unreadable("search_logs", feature.ErrTooLarge)},
		{Name: "a call with a budget, in a batch", Envelope: callInBatch("search_logs")},
	}
}
