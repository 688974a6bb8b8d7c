package limits

import (
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words the model reads when a rate limit refuses a call.

// deniedWords are the fixed parts of a limit's RATE_LIMITED envelope,
// made once when the limit is provisioned.
func deniedWords(l *Limit) (message string, details []envelope.Detail) {
	return "Rate limit exceeded: " + l.describe() + " for " + l.scope, []envelope.Detail{
		{Key: "limit", Value: l.name},
		{Key: "rate", Value: l.describe()},
		{Key: "burst", Value: strconv.Itoa(l.lim.Burst)},
	}
}

// rateLimited: the limit's bucket holds too few tokens until retry.
func rateLimited(l *Limit, retry time.Duration) envelope.Envelope {
	secs, in := feature.InSeconds(retry)
	return envelope.Envelope{
		Code:       envelope.RateLimited,
		Severity:   envelope.SeverityError,
		Message:    l.deniedMessage,
		Recovery:   "Wait " + in + ", then retry the same call. Calls made sooner are refused too.",
		Details:    l.details,
		RetryAfter: float64(secs),
	}
}

// batchOverBurst: a batch needs more tokens than the bucket ever holds, so
// waiting cannot help.
func batchOverBurst(l *Limit, cost int) envelope.Envelope {
	return envelope.New(envelope.RateLimited, fmt.Sprintf("Rate limit exceeded: this batch counts %s against the limit %s, which allows at most %d at once (%s), so it can never pass as one request",
		feature.CountOf(cost, l.methods), l.name, l.lim.Burst, l.describe())).
		Suggest(fmt.Sprintf("Split the batch into requests of at most %s each, or send them one at a time.", feature.CountOf(l.lim.Burst, l.methods))).
		Details(l.details...).
		Envelope()
}

// unchecked: the shared store of l's buckets does not answer, and is
// configured to refuse what it cannot count (on_error deny).
func unchecked(l *Limit, retry time.Duration) envelope.Envelope {
	secs, words := feature.InSeconds(retry)
	return envelope.New(envelope.ServerBusy, "Server busy: the rate limits cannot be checked right now (the store that keeps them does not answer), and this server runs no call it cannot count").
		Suggest("Retry this call in " + words + ". The limits were not reached: nothing else needs to change.").
		Details(envelope.Detail{Key: "limit", Value: l.name}).
		RetryAfter(float64(secs)).
		Envelope()
}

// Words are the envelopes a rate limit writes, with an example's values,
// for the golden list of the gateway's words.
func Words() []feature.Word {
	perClient := example("words_per_client", Config{Rate: "3/1m"})
	lists := example("words_lists", Config{Rate: "2/10s", Methods: []string{"tools/list", "tools/call"}})
	return []feature.Word{
		{Name: "rate limited", Envelope: rateLimited(perClient, 19200*time.Millisecond)},
		{Name: "the shared store of the limits does not answer", Envelope: unchecked(perClient, 2*time.Second)},
		{Name: "a batch over the burst", Envelope: batchOverBurst(lists, 5)},
	}
}

// example is a limit configured for its words only.
func example(name string, cfg Config) *Limit {
	l, err := configure(name, &cfg, zap.NewNop())
	if err != nil {
		panic(err) // the examples are valid
	}
	return l
}
