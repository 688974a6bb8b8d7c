package guard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddyserver/caddy/v2"
)

// The words the model reads when the guard refuses a call.

// full: the guard's places and queue are taken, or the wait in the
// queue was too long.
func full(g *Guard, s *busy.Shed) envelope.Envelope {
	counts := fmt.Sprintf("%s in progress and %d waiting", feature.CountOf(s.Active, g.methods), s.Queued)
	message := fmt.Sprintf("Server busy: %s, the most it takes (%d in progress, %d waiting)", counts, g.limits.Max, g.limits.Queue)
	if s.Reason == busy.WaitExceeded {
		message = fmt.Sprintf("Server busy: %s; this call waited %s in the queue without a free place", counts, feature.Window(g.limits.QueueTimeout))
	}
	secs, in := feature.InSeconds(s.RetryAfter)
	return envelope.New(envelope.ServerBusy, message).
		Suggest(feature.ReduceConcurrency("in "+in)).
		Details(
			envelope.Detail{Key: "guard", Value: g.name},
			envelope.Detail{Key: "active", Value: strconv.Itoa(s.Active)},
			envelope.Detail{Key: "queued", Value: strconv.Itoa(s.Queued)},
		).
		RetryAfter(float64(secs)).
		Envelope()
}

// overMax: a batch needs more places than the guard has, so it can
// never be admitted.
func overMax(g *Guard, needed int) envelope.Envelope {
	most := feature.CountOf(g.limits.Max, g.methods)
	return envelope.New(envelope.ServerBusy, fmt.Sprintf("Server busy: this batch needs %s at once, and at most %s run at once here, so it can never be admitted", feature.CountOf(needed, g.methods), most)).
		Suggest(fmt.Sprintf("Send at most %s per batch, or send them one at a time.", most)).
		Details(envelope.Detail{Key: "guard", Value: g.name}, envelope.Detail{Key: "max", Value: strconv.Itoa(g.limits.Max)}).
		Envelope()
}

// Words are the envelopes the guard writes, with an example's values, for
// the golden list of the gateway's words.
func Words() []feature.Word {
	calls := example("tools/call")
	requests := example("tools/call", "prompts/get")
	return []feature.Word{
		{Name: "the guard's queue is full", Envelope: full(calls, &busy.Shed{Reason: busy.QueueFull, Active: 4, Queued: 8, RetryAfter: 2500 * time.Millisecond})},
		{Name: "the wait in the queue was too long", Envelope: full(requests, &busy.Shed{Reason: busy.WaitExceeded, Active: 1, Queued: 0, RetryAfter: time.Second})},
		{Name: "a batch over the guard's max", Envelope: overMax(calls, 5)},
	}
}

// example is a guard configured for its words only.
func example(methods ...string) *Guard {
	return configure(&Config{Name: "tools", Max: 4, Queue: 8, QueueTimeout: caddy.Duration(30 * time.Second), Methods: methods})
}
