package busy

import (
	"errors"
	"fmt"
	"time"
)

// DefaultQueueTimeout is the longest wait in a queue that configurations
// apply when they give none.
const DefaultQueueTimeout = 10 * time.Second

// Limits are a guard's settings. Guards need valid Limits (see Validate).
type Limits struct {
	// Max is the number of holders admitted at once; at least 1.
	Max int
	// Queue is the number of callers that may wait for a place when all are
	// held; 0 sheds every caller that finds no free place.
	Queue int
	// QueueTimeout is the longest a caller waits in the queue before it is
	// shed; positive.
	QueueTimeout time.Duration
}

// Validate reports whether Max is at least 1, Queue is not negative and
// QueueTimeout is positive, naming each bad field and value.
func (l Limits) Validate() error {
	var errs []error
	if l.Max < 1 {
		errs = append(errs, fmt.Errorf("max %d: must be at least 1", l.Max))
	}
	if l.Queue < 0 {
		errs = append(errs, fmt.Errorf("queue %d: must not be negative", l.Queue))
	}
	if l.QueueTimeout <= 0 {
		errs = append(errs, fmt.Errorf("queue_timeout %v: must be positive", l.QueueTimeout))
	}
	return errors.Join(errs...)
}
