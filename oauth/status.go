package oauth

import (
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
}

// Status is the gate's status now.
func (g *Gate) Status() *Status {
	s := &Status{Resource: g.cfg.Resource, Scopes: g.cfg.Scopes, Remembered: g.verifier.verified.len()}
	now := g.verifier.now()
	for _, url := range g.issuers {
		s.Issuers = append(s.Issuers, g.verifier.issuers[url].status(now))
	}
	return s
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
