package oauth

import (
	"net/url"
	"time"
)

// Status is authorization in /mcp/status: the resource, the scopes
// required, and each issuer's keys.
type Status struct {
	Resource string         `json:"resource,omitempty"`
	Scopes   []string       `json:"scopes,omitempty"`
	Issuers  []IssuerStatus `json:"issuers"`
	// Remembered is the number of valid tokens remembered (at most
	// MaxCached).
	Remembered int `json:"remembered_tokens"`
}

// IssuerStatus is one issuer's keys: where they come from, how many are
// held, when they were fetched, and the last fetch's error, if it failed.
type IssuerStatus struct {
	URL  string `json:"url"`
	JWKS string `json:"jwks,omitempty"`
	Keys int    `json:"keys"`
	// FetchedAgo is how long ago the keys held were fetched, as a Go
	// duration; absent before the first successful fetch (keys are
	// fetched when the first token needs them).
	FetchedAgo string `json:"fetched_ago,omitempty"`
	// Error is why the last fetch failed; absent when it did not.
	Error string `json:"error,omitempty"`
	// Introspection is how its opaque tokens are checked, when they are.
	Introspection *IntrospectionStatus `json:"introspection,omitempty"`
}

// IntrospectionStatus is an issuer's introspection endpoint: where it is,
// when it was last asked about a token, and why that failed, if it did.
type IntrospectionStatus struct {
	Endpoint string `json:"endpoint,omitempty"`
	// AskedAgo is how long ago it was last asked about a token, as a Go
	// duration; absent before the first opaque token.
	AskedAgo string `json:"asked_ago,omitempty"`
	Error    string `json:"error,omitempty"`
	// Refused is the number of opaque tokens remembered as refused (at
	// most MaxCached).
	Refused int `json:"refused_tokens"`
}

// Status is the gate's status now.
func (g *Gate) Status() *Status {
	s := &Status{Resource: g.resource, Scopes: g.cfg.Scopes, Remembered: g.verifier.verified.len()}
	now := g.verifier.now()
	for _, url := range g.issuers {
		is := g.verifier.issuers[url].status(now)
		if in := g.verifier.opaque; in != nil && in.keys.issuer == url {
			is.Introspection = in.status(now)
		}
		s.Issuers = append(s.Issuers, is)
	}
	return s
}

// redacted is u without the password it may hold.
func redacted(u string) string {
	if parsed, err := url.Parse(u); err == nil {
		return parsed.Redacted()
	}
	return ""
}

func (in *introspector) status(now time.Time) *IntrospectionStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := &IntrospectionStatus{Endpoint: redacted(in.endpoint), Refused: in.refused.len()}
	if !in.tried.IsZero() {
		st.AskedAgo = now.Sub(in.tried).Round(time.Second).String()
	}
	if in.err != nil {
		st.Error = in.err.Error()
	}
	return st
}

func (s *keySet) status(now time.Time) IssuerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := IssuerStatus{URL: s.issuer, JWKS: s.jwks, Keys: len(s.keys)}
	if !s.fetched.IsZero() {
		st.FetchedAgo = now.Sub(s.fetched).Round(time.Second).String()
	}
	if s.err != nil {
		st.Error = s.err.Error()
	}
	return st
}
