package credential

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// status is a handler's section of /mcp/status: how its server gets its
// credential, the tokens remembered (their count and bytes, never a
// token), when the issuer last gave one, and why it last did not.
type status struct {
	h     *Handler
	known atomic.Bool // server is set

	mu          sync.Mutex
	server      string // the federated server's name, once a request told it
	lastRefresh time.Time
	lastError   string
	lastErrorAt time.Time
}

// Status is the JSON of a handler's section.
type Status struct {
	// Server is the federated server's name, known from the first
	// request to it; absent for a site's one server.
	Server        string   `json:"server,omitempty"`
	Use           string   `json:"use"`
	Issuer        string   `json:"issuer,omitempty"`
	TokenEndpoint string   `json:"token_endpoint,omitempty"`
	Audience      string   `json:"audience,omitempty"`
	Resource      string   `json:"resource,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
	Header        string   `json:"header,omitempty"`
	// Remembered is how many tokens are held, and RememberedBytes the
	// bytes counted for them, within MaxTokens and MaxBytes.
	Remembered      int   `json:"remembered"`
	RememberedBytes int64 `json:"remembered_bytes"`
	MaxTokens       int   `json:"max_tokens,omitempty"`
	MaxBytes        int64 `json:"max_bytes,omitempty"`
	// LastRefresh is how long ago the issuer last gave a token;
	// LastError why it last did not, and how long ago.
	LastRefresh string `json:"last_refresh,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	LastErrorAt string `json:"last_error_ago,omitempty"`
}

// named records the name of the server the handler's requests go to.
func (s *status) named(server string) {
	if server == "" || s.known.Load() {
		return
	}
	s.mu.Lock()
	s.server = server
	s.mu.Unlock()
	s.known.Store(true)
}

// asked records the issuer's answer at now.
func (s *status) asked(now time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastRefresh = now
		return
	}
	s.lastError, s.lastErrorAt = clip(err.Error()), now
}

func (s *status) view() any {
	h := s.h
	v := Status{Use: h.Use, Header: h.Name}
	if g := h.grant; g != nil {
		v.Issuer, v.Audience, v.Resource, v.Scopes = h.Issuer, h.Audience, h.Resource, h.Scopes
		v.TokenEndpoint = g.asker.known()
		v.Remembered, v.RememberedBytes = g.cache.size()
		v.MaxTokens, v.MaxBytes = g.cache.max, g.cache.maxBytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Server = s.server
	now := time.Now()
	if !s.lastRefresh.IsZero() {
		v.LastRefresh = now.Sub(s.lastRefresh).Round(time.Millisecond).String()
	}
	if s.lastError != "" {
		v.LastError, v.LastErrorAt = s.lastError, now.Sub(s.lastErrorAt).Round(time.Millisecond).String()
	}
	return v
}

// requests counts the credentials given and refused, by how the server
// gets its credential, the server (a federated server's name: a word of
// the config), and outcome: remembered, obtained, refused, unavailable,
// limited, broken, misconfigured, unverified, other_issuer.
var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp_credential", Name: "requests_total",
	Help: "Requests given a server's credential (remembered or obtained from the issuer) or refused for want of one, by use, server and outcome.",
}, []string{"use", "server", "outcome"})

func collectors() []prometheus.Collector { return []prometheus.Collector{requests} }

func count(use, server, outcome string) {
	requests.WithLabelValues(use, server, outcome).Inc()
}
