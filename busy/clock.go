package busy

import "time"

// Clock is the time source of a Guard or Set: tests inject a fake one, such
// as busytest.Clock.
type Clock interface {
	// Now returns the current time; service times are differences of it.
	Now() time.Time
	// AfterFunc calls f after d, unless stopped first, like time.AfterFunc;
	// stop reports whether it stopped the call. A Guard calls AfterFunc
	// with its lock held, so AfterFunc must not call f before it returns.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock returns the Clock of package time.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
