package feature

import "time"

// Admitter is a feature that takes something for a request before it runs
// (a session opened, a rate limit's tokens, a guard's places), which it
// may have to give back. Admitters run in four phases:
//
//   - identity (authorization), for every request, before its body is
//     read: who the request's credential speaks for (the Principal it
//     writes on the exchange), or a refusal that costs no more than the
//     headers;
//   - session (sessions), for every request, once its body is read: what
//     the request is pinned to, and the request's own session id restored
//     for the upstream (the one place a feature rewrites the request);
//   - admission (the rate limits), for a POST, before the checks, so that
//     a request a check refuses still costs what they took;
//   - entry (the concurrency guard), after the checks, so that a request
//     that will be refused never waits for a place.
//
// In each phase they run in the order they are configured; the first
// refusal answers the request, and what the admitters took is given back
// as if the request had not run.
type Admitter interface {
	// Admit takes what x needs, and returns how to give it back (nil when
	// nothing was taken), or refuses x, having taken nothing. It may wait
	// (for a place in a queue) as long as x's request lasts.
	Admit(x *Exchange) (Undo, *Refusal)
}

// Undo gives back what an Admitter took for a request. The core calls it
// once, whatever happened to the request: ran is false when the request
// never reached the upstream for want of room (a guard shed it, its body
// was refused as it streamed), true otherwise (it ran, or a check refused
// it: a refused call still costs its tokens). An Undo may not be used once
// called: its state may be recycled.
//
// An Undo that is also a Responder opens its hooks on the request's answer
// (after the features' own): the state an admitter keeps for one request
// reaches the hooks that read its answer. Unless it is Lingering, an Undo
// is called on the request's goroutine, once the hooks on its answer have
// ended: it may recycle that state. A Lingering Undo opens no hooks: it
// may be given back before the answer ends.
type Undo interface {
	Undo(now time.Time, ran bool)
}

// Lingering is implemented by an Undo whose taking stands for work the
// upstream may go on doing (a guard's places: the calls may still be
// running). When the client of a request holding one leaves, the core
// tells the upstream to stop, and keeps what was taken until the
// upstream's answer ends, at most Linger after the client left. When a
// deadline cuts the call, a Lingering Undo is called at once (the work is
// over for the gateway); the others at the end.
type Lingering interface {
	Linger() time.Duration
}

// Rule is who refused a request, for the log: the kind of rule ("limit",
// "guard"), its name, and, when the rule has one, the key the request was
// refused under. The log shows the key as a digest unless log_key is on.
type Rule struct {
	Kind, Name string
	Key        string
	Keyed      bool
}
