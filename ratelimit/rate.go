package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is how fast a bucket refills: Events tokens per Window.
type Rate struct {
	Events int
	Window time.Duration
}

// ParseRate parses a rate written as EVENTS/WINDOW, such as "10/s",
// "600/1m", "5/30s", "100/1h", "1000/1d" or "1/500ms". The window is a
// time.ParseDuration value that may also count days ("d", 24h, as Caddy's
// durations do), or a bare unit "s", "m", "h" or "d" meaning one of it.
// Events and window must be positive. Errors name the bad value.
func ParseRate(s string) (Rate, error) {
	events, window, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want EVENTS/WINDOW, like \"10/s\" or \"600/1m\"", s)
	}
	n, err := strconv.Atoi(events)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: events %q: not a whole number", s, events)
	}
	if n <= 0 {
		return Rate{}, fmt.Errorf("rate %q: events must be positive", s)
	}
	switch window {
	case "s", "m", "h", "d":
		window = "1" + window
	}
	d, err := parseWindow(window)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: window: %w", s, err)
	}
	if d <= 0 {
		return Rate{}, fmt.Errorf("rate %q: window must be positive", s)
	}
	return Rate{Events: n, Window: d}, nil
}

// maxDays is the most days a window may count: about 290 years, the range of
// a time.Duration.
const maxDays = 106_000

// parseWindow is time.ParseDuration, with "d" for days of 24 hours.
func parseWindow(s string) (time.Duration, error) {
	days, rest, found := strings.Cut(s, "d")
	if !found {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || n < 0 || n > maxDays || strings.ContainsAny(days, "eE+-") {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest != "" {
		more, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		d += more
	}
	return d, nil
}

// String returns the rate in the canonical form that ParseRate reads back,
// such as "10/1s", "600/1m" or "1/500ms".
func (r Rate) String() string {
	w := r.Window.String()
	// Duration.String writes a minute as "1m0s" and an hour as "1h0m0s".
	if strings.HasSuffix(w, "m0s") {
		w = w[:len(w)-2]
	}
	if strings.HasSuffix(w, "h0m") {
		w = w[:len(w)-2]
	}
	return strconv.Itoa(r.Events) + "/" + w
}

// tokensIn returns the tokens that refill in d nanoseconds.
func (r Rate) tokensIn(d int64) float64 {
	return float64(d) * float64(r.Events) / float64(r.Window)
}

// timeFor returns the nanoseconds in which n tokens refill.
func (r Rate) timeFor(n float64) float64 {
	return n * float64(r.Window) / float64(r.Events)
}

// Limit is the settings of a bucket: it refills at Rate and holds at most
// Burst tokens. Store methods need a valid Limit (see Validate).
type Limit struct {
	Rate  Rate
	Burst int
}

// Validate reports whether the rate's events and window and the burst are
// all positive, naming the bad value when they are not.
func (l Limit) Validate() error {
	var errs []error
	if l.Rate.Events <= 0 || l.Rate.Window <= 0 {
		errs = append(errs, fmt.Errorf("rate %q: events and window must be positive", l.Rate))
	}
	if l.Burst <= 0 {
		errs = append(errs, fmt.Errorf("burst %d: must be positive", l.Burst))
	}
	return errors.Join(errs...)
}
