package results

import (
	"errors"
	"strconv"
	"strings"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// TooLarge is the code of a result over its budget, refused (a custom
// code: the contract allows them).
const TooLarge envelope.Code = "RESULT_TOO_LARGE"

// Truncated is the code of the warning before a result cut to its budget.
const Truncated envelope.Code = "RESULT_TRUNCATED"

// tooLarge: the result of tool is size bytes (0: more than the budget, not
// read further), over budget; paging are the tool's arguments that page or
// limit.
func tooLarge(tool string, size, budget int, paging []string) envelope.Envelope {
	how := strconv.Itoa(size) + " bytes, over its budget of " + budgetWords(budget)
	if size == 0 {
		how = "larger than its budget of " + budgetWords(budget) + "; the gateway stopped reading it before its end"
	}
	return envelope.New(TooLarge, "The result of the tool "+feature.Clip(tool)+" is too large to be given to you: "+how).
		Suggest("Ask for less: call the tool again with a narrower query, "+askForLess(paging)+", or ask for a summary. Calling it again the same way gives the same answer.").
		Details(envelope.Detail{Key: "tool", Value: feature.Clip(tool)}, envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)}).
		Envelope()
}

// replayedTooLarge: a result replayed on a resumed stream, size bytes, is
// over budget, the smallest any tool has.
func replayedTooLarge(size, budget int) envelope.Envelope {
	how := strconv.Itoa(size) + " bytes, over " + budgetWords(budget)
	if size == 0 {
		how = "larger than " + budgetWords(budget)
	}
	return envelope.New(TooLarge, "A tool's result sent on a resumed stream is too large to be given to you: "+how+", the smallest budget of this server's tools (which tool it came from is not known here)").
		Suggest("Ask for less: call the tool again with a narrower query, fewer items or the next page, or ask for a summary.").
		Details(envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)}).
		Envelope()
}

// truncated: the result of tool, size bytes, was cut to kept bytes of
// content to fit budget, and dropped content blocks were left out.
func truncated(tool string, size, kept, dropped, budget int, paging []string) envelope.Envelope {
	what := "The result of the tool " + feature.Clip(tool) + " was cut to fit its budget of " + budgetWords(budget) + ": the server wrote " + strconv.Itoa(size) + " bytes, and you have the first " + strconv.Itoa(kept) + " bytes of its content"
	switch {
	case dropped == 1:
		what += "; 1 more content block was left out"
	case dropped > 1:
		what += "; " + strconv.Itoa(dropped) + " more content blocks were left out"
	}
	return envelope.New(Truncated, what).Warning().
		Suggest("What follows is incomplete: do not take it for the whole answer. To get the rest, call the tool again for a part at a time: "+askForLess(paging)+", or narrow the query; or ask for a summary.").
		Details(envelope.Detail{Key: "tool", Value: feature.Clip(tool)}, envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)}, envelope.Detail{Key: "result_bytes", Value: strconv.Itoa(size)}).
		Envelope()
}

// budgetWords is a budget in bytes and tokens.
func budgetWords(budget int) string {
	return strconv.Itoa(budget) + " bytes (about " + strconv.Itoa(budget/BytesPerToken) + " tokens)"
}

// askForLess says how to ask the tool for less: by the arguments that page
// or limit it, when its schema is known to have some.
func askForLess(paging []string) string {
	if len(paging) == 0 {
		return "use its paging or filter arguments if it has any (a limit, a page or cursor, fewer fields)"
	}
	return "use its arguments " + strings.Join(paging, ", ") + " (fewer items, or the next page)"
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
	paging := []string{"cursor", "limit"}
	return append([]feature.Word{
		{Name: "a result over its budget", Envelope: tooLarge("search_logs", 3145728, 102400, nil)},
		{Name: "a result over its budget, not read past it", Envelope: tooLarge("search_logs", 0, 102400, nil)},
		{Name: "a result over its budget, of a tool whose schema has paging arguments", Envelope: tooLarge("search_logs", 3145728, 102400, paging)},
		{Name: "a result cut to its budget", Envelope: truncated("search_logs", 3145728, 101871, 3, 102400, nil)},
		{Name: "a result cut to its budget, of a tool whose schema has paging arguments", Envelope: truncated("search_logs", 3145728, 101871, 0, 102400, paging)},
		{Name: "a result that could not be read to hold it to its budget", Envelope: unreadable("search_logs", errors.New("the answer is compressed"))},
		{Name: "a call with a budget, in a batch", Envelope: callInBatch("search_logs")},
		{Name: "a result over the smallest budget, sent on a resumed stream", Envelope: replayedTooLarge(3145728, 20480)},
	}, pageWords()...)
}
