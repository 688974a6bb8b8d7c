package handler

import (
	"errors"
	"fmt"
	"time"

	"github.com/caddymcp/caddy-mcp/oauth"
)

// The configuration of the features that are packages of their own, under
// the names the handler's fields give them.

// Authorization makes the gateway the servers' OAuth 2.1 resource server
// (package oauth).
type Authorization = oauth.Config

// AuthorizationIssuer is one issuer whose tokens Authorization accepts.
type AuthorizationIssuer = oauth.IssuerConfig

// AuthorizationIntrospection is how an issuer's opaque tokens are checked.
type AuthorizationIntrospection = oauth.IntrospectionConfig

// AuthorizationScopeRule gives the scopes a tool, prompt or resource needs.
type AuthorizationScopeRule = oauth.ScopeRule

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
	if h.Authorization != nil {
		if err := h.Authorization.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("authorization: %w", err))
		}
	}
	return errors.Join(errs...)
}
