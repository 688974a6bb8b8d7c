// Package busy bounds how many requests are served at once, and how many may
// wait for their turn.
//
// A Guard admits at most Max holders at once. When all its places are held,
// up to Queue more callers wait, each at most QueueTimeout; a caller beyond
// that is shed at once. A holder gets a Slot, and frees it with Release.
//
// Waiters are admitted strictly in arrival order. A Release does not put its
// place back for anyone to take: it hands the place straight to the waiter at
// the head of the queue, so a caller arriving at that moment cannot barge in
// ahead of those who waited. A waiter whose context ends leaves the queue at
// once. If a place was handed to a waiter just as it gave up, the waiter
// passes the place on to the next in line, or frees it when no one waits, so
// no place is ever lost.
//
// A refusal is a *Shed, for one of two reasons: QueueFull, when every place
// is held and the queue is full (or Queue is 0), and WaitExceeded, when a
// waiter was not admitted within QueueTimeout. It carries the holders and
// waiters counted at the moment of refusal, and RetryAfter, an estimate of
// when a place will be free for the caller: the recent service time, an
// exponentially weighted moving average of the time from admission to
// Release in which each Release counts for one eighth, scaled by
// (Queued+1)/Max, because the Queued waiters ahead and the caller itself are
// served Max at a time. It is never less than a second, and before any slot
// has been released it is QueueTimeout.
//
// A Set is a family of guards by key, such as one per tool name, all under
// the same Limits. A key's guard lives only while it has holders or waiters,
// so the memory of a Set follows the keys that are busy now, not every key
// ever seen.
//
// SetLimits applies new settings at once: a raised Max admits waiters, a
// lowered one lets the extra holders finish and admits no one until they
// have. Surviving a configuration reload is the caller's concern: it must
// keep one Guard or Set across reloads and call SetLimits, because a second
// Guard built from the new configuration would admit Max more holders while
// the old one's are still being served.
//
// As in golang.org/x/time/rate, time comes from outside: a Guard reads its
// Clock, which tests replace with busytest.Clock to make timeouts happen
// without sleeping.
package busy
