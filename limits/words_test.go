package limits

import (
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func TestEveryEnvelopeOfALimitSaysWhatHappenedAndWhatToDo(t *testing.T) {
	perClient := example("words_per_client", Config{Rate: "3/1m"})
	lists := example("words_lists", Config{Rate: "2/10s", Methods: []string{"tools/list", "tools/call"}})
	featuretest.Words(t, []featuretest.WordCase{
		{Name: "rate limited", Env: rateLimited(perClient, 19200*time.Millisecond), Want: envelope.Envelope{
			Code: envelope.RateLimited, Severity: envelope.SeverityError,
			Message:  "Rate limit exceeded: 3 calls per 1m for this client",
			Recovery: "Wait 20 seconds, then retry the same call. Calls made sooner are refused too.",
			Details: []envelope.Detail{
				{Key: "limit", Value: "words_per_client"}, {Key: "rate", Value: "3 calls per 1m"}, {Key: "burst", Value: "3"},
			},
			RetryAfter: 20,
		}},
		{Name: "the shared store of the limits does not answer", Env: unchecked(perClient, 2*time.Second), Want: envelope.Envelope{
			Code: envelope.ServerBusy, Severity: envelope.SeverityError,
			Message:    "Server busy: the rate limits cannot be checked right now (the store that keeps them does not answer), and this server runs no call it cannot count",
			Recovery:   "Retry this call in 2 seconds. The limits were not reached: nothing else needs to change.",
			Details:    []envelope.Detail{{Key: "limit", Value: "words_per_client"}},
			RetryAfter: 2,
		}},
		{Name: "a batch over the burst", Env: batchOverBurst(lists, 5), Want: envelope.Envelope{
			Code: envelope.RateLimited, Severity: envelope.SeverityError,
			Message:  "Rate limit exceeded: this batch counts 5 requests against the limit words_lists, which allows at most 2 at once (2 requests per 10s), so it can never pass as one request",
			Recovery: "Split the batch into requests of at most 2 requests each, or send them one at a time.",
			Details: []envelope.Detail{
				{Key: "limit", Value: "words_lists"}, {Key: "rate", Value: "2 requests per 10s"}, {Key: "burst", Value: "2"},
			},
		}},
	})
}
