package feature

import "time"

// Admitter is a feature that takes something for a request before it runs
// (a rate limit's tokens), which it may have to give back. Admitters run
// once the body is read and the session opened, before the checks (a
// request a check refuses still costs what the admitters took), in the
// order they are configured; the first refusal answers the request, and
// what the admitters before it took is given back as if the request had
// not run.
type Admitter interface {
	// Admit takes what x needs, and returns how to give it back (nil when
	// nothing was taken), or refuses x, having taken nothing.
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

// Rule is who refused a request, for the log: the kind of rule ("limit",
// "guard"), its name, and, when the rule has one, the key the request was
// refused under. The log shows the key as a digest unless log_key is on.
type Rule struct {
	Kind, Name string
	Key        string
	Keyed      bool
}
