package handler

import (
	"errors"
	"fmt"
	"time"
)

// The configuration of the features that are packages of their own, under
// the names the handler's fields give them.

// Validate checks the configuration, with the same rules the Caddyfile
// applies.
func (h *Handler) Validate() error {
	var errs []error
	if h.MaxRequestBody < 0 {
		errs = append(errs, fmt.Errorf("max_request_body: %d is negative", h.MaxRequestBody))
	}
	if h.StreamAbove < 0 {
		errs = append(errs, fmt.Errorf("stream_above: %d is negative", h.StreamAbove))
	}
	if h.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("max_batch: %d is negative", h.MaxBatch))
	}
	if h.ReadBodyTimeout < 0 {
		errs = append(errs, fmt.Errorf("read_body_timeout: %s is negative", time.Duration(h.ReadBodyTimeout)))
	}
	if h.UpstreamRetryAfter < 0 {
		errs = append(errs, fmt.Errorf("upstream_retry_after: %s is negative", time.Duration(h.UpstreamRetryAfter)))
	}
	return errors.Join(errs...)
}

// DefaultSSEKeepalive is the default of Handler.SSEKeepalive.
const DefaultSSEKeepalive = 25 * time.Second
