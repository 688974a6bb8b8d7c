package answer

import (
	"context"
	"errors"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
)

// ErrDeadline is why a call past its deadline was cut.
var ErrDeadline = errors.New("the tool's deadline passed")

// Deadline follows one call's deadline: the upstream request's context is
// cancelled, for ErrDeadline, when it passes before the answer is on its
// way. The watch stops it once the answer began.
type Deadline struct {
	After time.Duration
	// By is the check whose bound it is, which words the answer.
	By    feature.Deadline
	Timer *time.Timer
	// Ctx is the upstream request's context.
	Ctx context.Context
}

// answered stops the deadline: the answer is on its way.
func (d *Deadline) answered() {
	if d != nil {
		d.Timer.Stop()
	}
}

// Passed reports whether the deadline cut the call.
func (d *Deadline) Passed() bool {
	return d != nil && context.Cause(d.Ctx) == ErrDeadline
}
