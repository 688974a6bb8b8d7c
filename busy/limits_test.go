package busy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/busy"
)

func TestValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		limits busy.Limits
		want   []string
	}{
		{busy.Limits{Max: 1, QueueTimeout: time.Second}, nil},
		{busy.Limits{Max: 0, QueueTimeout: time.Second}, []string{"max 0: must be at least 1"}},
		{busy.Limits{Max: 2, Queue: -1, QueueTimeout: time.Second}, []string{"queue -1: must not be negative"}},
		{busy.Limits{Max: 2}, []string{"queue_timeout 0s: must be positive"}},
		{busy.Limits{Max: -3, Queue: -1, QueueTimeout: -time.Second}, []string{
			"max -3: must be at least 1",
			"queue -1: must not be negative",
			"queue_timeout -1s: must be positive",
		}},
	} {
		err := tc.limits.Validate()
		if tc.want == nil {
			assert.NoError(t, err, "%+v", tc.limits)
			continue
		}
		for _, w := range tc.want {
			assert.ErrorContains(t, err, w, "%+v", tc.limits)
		}
	}
}

func TestShedErrorGivesReasonCountsAndRetryAfter(t *testing.T) {
	shed := &busy.Shed{Reason: busy.WaitExceeded, Active: 4, Queued: 8, RetryAfter: 3 * time.Second}
	assert.EqualError(t, shed, "busy: wait exceeded (4 active, 8 queued); retry after 3s")
	assert.Equal(t, "queue full", busy.QueueFull.String())
	assert.Equal(t, "Reason(0)", busy.Reason(0).String())
}
