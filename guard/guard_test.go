package guard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func TestEveryEnvelopeOfTheGuardSaysWhatHappenedAndWhatToDo(t *testing.T) {
	featuretest.Words(t, []featuretest.WordCase{
		{Name: "the guard's queue is full", Env: full(example("tools/call"), &busy.Shed{Reason: busy.QueueFull, Active: 4, Queued: 8, RetryAfter: 2500 * time.Millisecond}), Want: envelope.Envelope{
			Code: envelope.ServerBusy, Severity: envelope.SeverityError,
			Message:  "Server busy: 4 calls in progress and 8 waiting, the most it takes (4 in progress, 8 waiting)",
			Recovery: "Reduce concurrent calls: send them one at a time, and retry this one in 3 seconds.",
			Details: []envelope.Detail{
				{Key: "guard", Value: "tools"}, {Key: "active", Value: "4"}, {Key: "queued", Value: "8"},
			},
			RetryAfter: 3,
		}},
		{Name: "the wait in the queue was too long", Env: full(example("tools/call", "prompts/get"), &busy.Shed{Reason: busy.WaitExceeded, Active: 1, Queued: 0, RetryAfter: time.Second}), Want: envelope.Envelope{
			Code: envelope.ServerBusy, Severity: envelope.SeverityError,
			Message:  "Server busy: 1 request in progress and 0 waiting; this call waited 30s in the queue without a free place",
			Recovery: "Reduce concurrent calls: send them one at a time, and retry this one in 1 second.",
			Details: []envelope.Detail{
				{Key: "guard", Value: "tools"}, {Key: "active", Value: "1"}, {Key: "queued", Value: "0"},
			},
			RetryAfter: 1,
		}},
		{Name: "a batch over the guard's max", Env: overMax(example("tools/call"), 5), Want: envelope.Envelope{
			Code: envelope.ServerBusy, Severity: envelope.SeverityError,
			Message:  "Server busy: this batch needs 5 calls at once, and at most 4 calls run at once here, so it can never be admitted",
			Recovery: "Send at most 4 calls per batch, or send them one at a time.",
			Details:  []envelope.Detail{{Key: "guard", Value: "tools"}, {Key: "max", Value: "4"}},
		}},
	})
}

func TestDemandsAreMergedByKeyInKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []demand
	}{
		{"one", []demand{{"a", 1}}, []demand{{"a", 1}}},
		{"one key, many messages", []demand{{"", 1}, {"", 1}, {"", 1}}, []demand{{"", 3}}},
		{"keys interleaved", []demand{{"b", 1}, {"a", 1}, {"b", 1}, {"c", 1}, {"a", 1}}, []demand{{"a", 2}, {"b", 2}, {"c", 1}}},
		{"all distinct", []demand{{"c", 1}, {"b", 1}, {"a", 1}}, []demand{{"a", 1}, {"b", 1}, {"c", 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, byKey(tc.in))
		})
	}
}
