// Package busy bounds how many requests are served at once, and how many may
// wait for their turn.
//
// A Guard has Max places. A caller takes one (Acquire), or several at once,
// all or nothing (AcquireNAt: one per message of a batch, say). When the
// places it asks for are not free, up to Queue callers wait, each at most
// QueueTimeout; a caller beyond that is shed at once. A holder gets a Slot,
// and frees its places with Release.
//
// Waiters are admitted strictly in arrival order. A Release does not put its
// places back for anyone to take: under the same lock it hands them to the
// waiters at the head of the queue, as many as fit, so a caller arriving at
// that moment cannot barge in ahead of those who waited, and a waiter asking
// for several places is not starved by callers asking for one. A waiter whose
// context ends leaves the queue at once. If places were handed to a waiter
// just as it gave up, the waiter passes them on to the next in line, or frees
// them when no one waits, so no place is ever lost.
//
// A refusal is a *Shed, for one of three reasons: QueueFull, when the places
// are not free and the queue is full (or Queue is 0), WaitExceeded, when a
// waiter was not admitted within QueueTimeout, and TooMany, when a caller
// asks for more places than Max and so could never be admitted. It carries
// the places held and the waiters counted at the moment of refusal, and
// RetryAfter, an estimate of when a place will be free for the caller: the
// recent service time, an exponentially weighted moving average of the time
// from admission to Release in which each Release counts for one eighth,
// scaled by (Queued+1)/Max, because the Queued waiters ahead and the caller
// itself are served Max at a time. It is never less than a second, and before
// any slot has been released it is QueueTimeout.
//
// A Set is a family of guards by key, such as one per tool name, all under
// the same Limits. A key's guard lives only while it has holders or waiters,
// so the memory of a Set follows the keys that are busy now, not every key
// ever seen.
//
// SetLimits applies new settings at once: a raised Max admits waiters, a
// lowered one lets the extra holders finish and admits no one until they
// have, and sheds with TooMany the waiters asking for more than it. Surviving a configuration reload is the caller's concern: it must
// keep one Guard or Set across reloads and call SetLimits, because a second
// Guard built from the new configuration would admit Max more holders while
// the old one's are still being served.
//
// As in golang.org/x/time/rate, whose AllowN takes the time from its caller
// and Allow reads time.Now, time has one seam: AcquireAt, AcquireNAt and
// ReleaseAt take now, the time a place is taken or given back, from a caller
// that has read the clock already; Acquire and Release read time.Now. Queue
// timeouts are timers of package time, which each waiter waits on itself:
// the package runs no goroutine of its own. There is no clock to
// inject: inside a testing/synctest bubble, time.Now and those timers run on
// the bubble's fake clock, so a test makes a waiter time out by sleeping
// past QueueTimeout, which takes no real time, and knows that a caller waits
// in the queue once synctest.Wait returns.
package busy
