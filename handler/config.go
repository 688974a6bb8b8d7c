package handler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/oauth"
	"github.com/caddymcp/caddy-mcp/session"
)

// The configuration of the features that are packages of their own, under
// the names the handler's fields give them.

// Sessions pins the sessions of MCP's 2025 revisions to the upstream that
// holds them (package session).
type Sessions = session.Config

// DefaultSessionTTL is the default of Sessions.TTL.
const DefaultSessionTTL = session.DefaultTTL

// Authorization makes the gateway the servers' OAuth 2.1 resource server
// (package oauth).
type Authorization = oauth.Config

// AuthorizationIssuer is one issuer whose tokens Authorization accepts.
type AuthorizationIssuer = oauth.IssuerConfig

// AuthorizationIntrospection is how an issuer's opaque tokens are checked.
type AuthorizationIntrospection = oauth.IntrospectionConfig

// AuthorizationScopeRule gives the scopes a tool, prompt or resource needs.
type AuthorizationScopeRule = oauth.ScopeRule

// principalWithoutAuthorization refuses a key or bind that reads the
// verified principal ({http.mcp.auth.*}) when no authorization verifies
// one: every request would have the same empty value, one bucket for all.
func (h *Handler) principalWithoutAuthorization() []error {
	if h.Authorization != nil {
		return nil
	}
	var errs []error
	check := func(where, template string) {
		if strings.Contains(template, "{http.mcp.auth.") {
			errs = append(errs, fmt.Errorf("%s %q reads the verified principal, and no authorization verifies one: configure authorization", where, template))
		}
	}
	if h.Sessions != nil {
		check("sessions: bind", h.Sessions.Bind)
	}
	return errs
}

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
	if h.Sessions != nil {
		if err := h.Sessions.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("sessions: %w", err))
		}
	}
	if h.Authorization != nil {
		if err := h.Authorization.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("authorization: %w", err))
		}
	}
	errs = append(errs, h.principalWithoutAuthorization()...)
	return errors.Join(errs...)
}
