package results

import (
	"errors"
	"strconv"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// paged: the result of tool, written bytes, was kept whole as id (size
// bytes of text, for ttl), and the first kept bytes of its text are given;
// others blocks that are not text were left out.
func paged(tool string, written, size, kept, others, budget int, ttl, id string, paging []string) envelope.Envelope {
	what := "The result of the tool " + feature.Clip(tool) + " is larger than its budget of " + budgetWords(budget) +
		": the server wrote " + strconv.Itoa(written) + " bytes, " + strconv.Itoa(size) + " bytes of text, which the gateway keeps for you for " + ttl +
		". You have its first " + strconv.Itoa(kept) + " bytes below, and a link to the whole (" + resultURI(id, 0) + ")"
	switch {
	case others == 1:
		what += "; 1 content block that is not text was left out"
	case others > 1:
		what += "; " + strconv.Itoa(others) + " content blocks that are not text were left out"
	}
	return envelope.New(Truncated, what).Warning().
		Suggest("What follows is incomplete: do not take it for the whole answer. Read the rest with resources/read of "+resultURI(id, int64(kept))+
			": each page names the next one's URI in its _meta \"caddymcp.dev/next\", and the last page names none. There is no need to call the tool again for it.").
		Details(envelope.Detail{Key: "tool", Value: feature.Clip(tool)}, envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)},
			envelope.Detail{Key: "result_bytes", Value: strconv.Itoa(written)}, envelope.Detail{Key: "text_bytes", Value: strconv.Itoa(size)},
			envelope.Detail{Key: "next", Value: resultURI(id, int64(kept))}).
		Envelope()
}

// notKept: the result of tool, size bytes (0: not read to its end), is
// over budget, and was not kept: why is errNoOwner or the store's error.
func notKept(tool string, size, budget int, paging []string, why error, lim resultstore.Limits) envelope.Envelope {
	how := strconv.Itoa(size) + " bytes, over its budget of " + budgetWords(budget)
	if size == 0 {
		how = "larger than its budget of " + budgetWords(budget)
	}
	reason, words, more := whyNotKept(why, lim)
	return envelope.New(TooLarge, "The result of the tool "+feature.Clip(tool)+" is too large to be given to you: "+how+"; and the gateway could not keep it for you to read in pages: "+words+". Nothing of it was kept").
		Suggest("Ask for less: call the tool again with a narrower query, "+askForLess(paging)+", or ask for a summary."+more).
		Details(envelope.Detail{Key: "tool", Value: feature.Clip(tool)}, envelope.Detail{Key: "budget_bytes", Value: strconv.Itoa(budget)}, envelope.Detail{Key: "reason", Value: reason}).
		Envelope()
}

// whyNotKept words why a result was not kept, and what the model may do
// beside asking for less.
func whyNotKept(why error, lim resultstore.Limits) (reason, words, more string) {
	ttl := ttlWords(lim.TTL.String())
	var quota *resultstore.QuotaError
	switch {
	case errors.Is(why, errNoOwner):
		return "no_owner", "it keeps a result only for the caller who made the call, and this call came with neither a verified identity nor a session (Mcp-Session-Id)", ""
	case errors.Is(why, resultstore.ErrTooLarge):
		return "max_result", "its text is over " + strconv.FormatInt(lim.MaxResult, 10) + " bytes, the most one result may keep", ""
	case errors.As(why, &quota) && quota.Why == resultstore.WhyPerOwnerCount:
		return quota.Why, "you already have " + strconv.Itoa(lim.PerOwnerCount) + " results kept, the most one caller may have; each is kept " + ttl + " from its call",
			" Read the results you were given before, or wait until the oldest expires."
	case errors.As(why, &quota) && quota.Why == resultstore.WhyPerOwnerBytes:
		return quota.Why, "the results kept for you would pass " + strconv.FormatInt(lim.PerOwner, 10) + " bytes, the most one caller may have; each is kept " + ttl + " from its call",
			" Read the results you were given before, or wait until the oldest expires."
	case errors.As(why, &quota):
		return quota.Why, "the gateway's storage for results is full", " Retrying later may succeed."
	}
	return "storage", "its storage failed", " Retrying later may succeed."
}

// notFound answers a link the caller may not read: expired, another
// caller's, made up or malformed; one answer for all, so that it tells
// nothing of whether the result exists.
func notFound() envelope.Envelope {
	return envelope.New(envelope.NotFound, "No result is kept at this link for you: it expired, or it is not a link the gateway gave you").
		Suggest("Do not retry this link. If you still need the result, call the tool again: a result is kept for a limited time, and only for the caller who made the call.").
		Envelope()
}

// readFailed answers a page the store could not read.
func readFailed() envelope.Envelope {
	return envelope.New(envelope.InternalError, "The page of this result could not be read from the gateway's storage").
		Suggest("Retry the same read in a moment; if it fails again, call the tool again.").
		Envelope()
}

// pageWords are the envelopes of paging, for the golden list.
func pageWords() []feature.Word {
	lim := resultstore.Limits{TTL: resultstore.DefaultTTL, MaxResult: resultstore.DefaultMaxResult, PerOwner: resultstore.DefaultPerOwner, PerOwnerCount: resultstore.DefaultPerOwnerCount}
	return []feature.Word{
		{Name: "a result kept whole, previewed, with its link", Envelope: paged("search_logs", 3145728, 3101870, 101201, 0, 102400, "1h", exampleID, nil)},
		{Name: "a result kept whole, with blocks that are not text left out", Envelope: paged("search_logs", 3145728, 3101870, 101201, 2, 102400, "1h", exampleID, nil)},
		{Name: "a result to keep, of a call with no owner", Envelope: notKept("search_logs", 3145728, 102400, nil, errNoOwner, lim)},
		{Name: "a result to keep, over the bound of one result", Envelope: notKept("search_logs", 0, 102400, nil, resultstore.ErrTooLarge, lim)},
		{Name: "a result to keep, past the caller's count", Envelope: notKept("search_logs", 3145728, 102400, nil, &resultstore.QuotaError{Why: resultstore.WhyPerOwnerCount}, lim)},
		{Name: "a result to keep, past the caller's bytes", Envelope: notKept("search_logs", 0, 102400, []string{"cursor", "limit"}, &resultstore.QuotaError{Why: resultstore.WhyPerOwnerBytes}, lim)},
		{Name: "a result to keep, past the store's total", Envelope: notKept("search_logs", 0, 102400, nil, &resultstore.QuotaError{Why: resultstore.WhyTotal}, lim)},
		{Name: "a page of a result not found", Envelope: notFound()},
		{Name: "a page of a result that could not be read", Envelope: readFailed()},
	}
}
