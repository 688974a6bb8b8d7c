package handler

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Admission: the admitters of the admission phase (the rate limits,
// package limits) take what a request needs, then, once the checks let it
// pass, those of the entry phase (the concurrency guard, package guard)
// take places. What they took comes back, through their Undo, once the
// request is over: given back as unspent when it never ran (the guard shed
// it, its body was refused as it streamed). A request admitted holds its
// places until its answer is written, or its deadline cut it, and for up
// to cancel_grace after its client left (answer.Abandonment).

// admit runs the admitters of a phase (h.admitters, h.entries) on x, in
// order, keeping what each took to be given back; the first refusal gives
// back what every admitter took, as for a request that did not run, and
// answers x.
func (x *exchange) admit(admitters []feature.Admitter) *feature.Refusal {
	if len(admitters) == 0 {
		return nil
	}
	fx := x.view()
	for _, a := range admitters {
		u, ref := a.Admit(fx)
		if ref != nil {
			x.undo(time.Now(), false)
			x.refusedBy = ref.By
			return ref
		}
		if u != nil {
			if x.undos == nil {
				x.undos = x.undoBuf[:0]
			}
			x.undos = append(x.undos, u)
		}
	}
	return nil
}

// undo gives back, once, what the admitters took for x; ran says whether
// x went on to the upstream (feature.Undo).
func (x *exchange) undo(now time.Time, ran bool) {
	for _, u := range x.undos {
		u.Undo(now, ran)
	}
	clear(x.undos)
	x.undos = x.undos[:0]
}

// release gives back at once what lingers (the guard's places), when a
// deadline ended the call for the gateway; the rest comes back at the end.
func (x *exchange) release(now time.Time) {
	var buf [len(x.undoBuf)]feature.Undo
	for _, u := range x.takeLingering(buf[:0]) {
		u.Undo(now, true)
	}
}

// takeLingering takes from x what lingers of what the admitters took
// (feature.Lingering), appended to dst. What does not linger stays, to be
// given back by finish, on the request's goroutine, once the answer's
// hooks have ended.
func (x *exchange) takeLingering(dst []feature.Undo) []feature.Undo {
	kept := x.undos[:0]
	for _, u := range x.undos {
		if _, ok := u.(feature.Lingering); ok {
			dst = append(dst, u)
		} else {
			kept = append(kept, u)
		}
	}
	clear(x.undos[len(kept):])
	x.undos = kept
	return dst
}

// linger is how long what the admitters took for x is kept after its
// client left while the upstream may still run it (feature.Lingering): the
// longest any of them asks, 0 when none does.
func (x *exchange) linger() time.Duration {
	var d time.Duration
	for _, u := range x.undos {
		if l, ok := u.(feature.Lingering); ok {
			d = max(d, l.Linger())
		}
	}
	return d
}

// siteLinger is where a panic of giving back what lingered is recovered
// (package panics).
const siteLinger = "linger"

// holdFor takes from x what lingers of what the admitters took, and
// gives it back d from now, on a timer, telling logger of a panic.
func (x *exchange) holdFor(d time.Duration, logger *zap.Logger) {
	lingering := x.takeLingering(nil)
	time.AfterFunc(d, func() {
		now := time.Now()
		for _, u := range lingering {
			giveBack(u, now, logger)
		}
	})
}

// giveBack gives back u at now, on holdFor's timer: a panic of one Undo
// ends there, and the others are given back all the same.
func giveBack(u feature.Undo, now time.Time, logger *zap.Logger) {
	defer panics.Recover(logger, siteLinger)
	u.Undo(now, true)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
