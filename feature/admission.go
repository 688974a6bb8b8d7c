package feature

import "time"

// Admitter is a feature that takes something for a request before it runs
// (a rate limit's tokens, a guard's places), which it may have to give
// back. Admitters run in two phases, once the body is read and the session
// opened: admission (the rate limits) before the checks, so that a request
// a check refuses still costs what they took, and entry (the concurrency
// guard) after them, so that a request that will be refused never waits
// for a place. In each phase they run in the order they are configured;
// the first refusal answers the request, and what the admitters before it
// took is given back as if the request had not run.
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
type Undo interface {
	Undo(now time.Time, ran bool)
}

// Lingering is implemented by an Undo whose taking stands for work the
// upstream may go on doing after the client left (a guard's places: the
// calls may still be running). When the client of a request holding one
// leaves, the core tells the upstream to stop, and keeps what was taken
// until the upstream's answer ends, at most Linger after the client left
// (docs/architecture.md, "Abandoned requests").
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
