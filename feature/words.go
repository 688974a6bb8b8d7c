package feature

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Writing numbers and values in the words the model reads, the way a
// person would.

// InSeconds rounds a delay up to whole seconds, at least 1, and writes it:
// 20 and "20 seconds".
func InSeconds(d time.Duration) (int64, string) {
	secs := max(1, int64(math.Ceil(d.Seconds())))
	return secs, Plural(secs, "second")
}

// CountOf counts what a limit or guard with these methods counts: "1 call",
// "3 calls" when it counts only tools/call, else "1 request", "3 requests".
func CountOf(n int, methods []string) string {
	unit := "request"
	if len(methods) == 1 && methods[0] == "tools/call" {
		unit = "call"
	}
	return Plural(int64(n), unit)
}

// Plural is n units: "1 second", "3 seconds".
func Plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(n, 10) + " " + unit + "s"
}

// Window writes a window the way a person would: 1s, 30s, 1m, 2h, 1.5s.
func Window(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// ReduceConcurrency is the recovery of every "busy" envelope, the
// gateway's or the upstream's; when is "in 12 seconds" or "later".
func ReduceConcurrency(when string) string {
	return "Reduce concurrent calls: send them one at a time, and retry this one " + when + "."
}
