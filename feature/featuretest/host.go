package featuretest

import (
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Host is a feature.Host as a handler gives it to its features, for a
// feature tested without one: the values its features share, and those
// of its config (Config, which the hosts of one config share).
type Host struct {
	// Config is what the handlers of the host's config share; nil: a
	// config of its own.
	Config *Shared
	shared Shared
}

// Shared are values shared by key, made by the first that asks.
type Shared struct {
	mu     sync.Mutex
	keys   []string
	values []any
}

func (s *Shared) get(key string, make func() (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range s.keys {
		if k == key {
			return s.values[i], nil
		}
	}
	v, err := make()
	if err != nil {
		return nil, err
	}
	s.keys, s.values = append(s.keys, key), append(s.values, v)
	return v, nil
}

// Close closes the values that are io.Closers, as the handler (or the
// config's last handler) does when it is cleaned up.
func (s *Shared) Close() {
	s.mu.Lock()
	values := s.values
	s.keys, s.values = nil, nil
	s.mu.Unlock()
	for _, v := range values {
		if c, ok := v.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// Plugins are the shared values that are features, which the handler
// plugs once, after its features.
func (h *Host) Plugins() []feature.Plugin {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	var ps []feature.Plugin
	for _, v := range h.shared.values {
		if p, ok := v.(feature.Plugin); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// Close closes what the host's features shared.
func (h *Host) Close() { h.shared.Close() }

func (h *Host) Logger() *zap.Logger                       { return zap.NewNop() }
func (h *Host) Origin() (string, error)                   { return "http://localhost", nil }
func (h *Host) RetryAfter() time.Duration                 { return 30 * time.Second }
func (h *Host) LogKey() bool                              { return false }
func (h *Host) VerifiesPrincipal() bool                   { return false }
func (h *Host) Declare(kind, name, settings string) error { return nil }
func (h *Host) Ordinal(settings string) int               { return 1 }

func (h *Host) Share(key string, make func() (any, error)) (any, error) {
	return h.shared.get(key, make)
}

func (h *Host) ShareInConfig(key string, make func() (any, error)) (any, error) {
	if h.Config == nil {
		h.Config = new(Shared)
	}
	return h.Config.get(key, make)
}

// Interface guard.
var _ feature.Host = (*Host)(nil)
