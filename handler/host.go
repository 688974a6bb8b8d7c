package handler

import (
	"io"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/origin"
)

// host is what a handler tells its features (feature.Host).
type host struct {
	h   *Handler
	ctx caddy.Context
	// verifies: a feature verifies each request's principal.
	verifies bool
	// shared are the values the features share, in the order first asked
	// for.
	shared []sharedValue
}

type sharedValue struct {
	key   string
	value any
}

func (o *host) Logger() *zap.Logger         { return o.h.logger }
func (o *host) Origin() (string, error)     { return origin.OfSite(o.ctx) }
func (o *host) RetryAfter() time.Duration   { return time.Duration(o.h.UpstreamRetryAfter) }
func (o *host) LogKey() bool                { return o.h.LogKey }
func (o *host) VerifiesPrincipal() bool     { return o.verifies }
func (o *host) Ordinal(settings string) int { return o.h.joined.Ordinal(settings) }
func (o *host) Declare(kind, name, settings string) error {
	return o.h.joined.Declare(kind, name, settings)
}

func (o *host) Share(key string, make func() (any, error)) (any, error) {
	for _, s := range o.shared {
		if s.key == key {
			return s.value, nil
		}
	}
	v, err := make()
	if err != nil {
		return nil, err
	}
	o.shared = append(o.shared, sharedValue{key, v})
	return v, nil
}

func (o *host) ShareInConfig(key string, make func() (any, error)) (any, error) {
	return o.h.joined.Share(key, make)
}

// closers are the shared values to close with the handler.
func (o *host) closers() []io.Closer {
	var cs []io.Closer
	for _, s := range o.shared {
		if c, ok := s.value.(io.Closer); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Interface guard.
var _ feature.Host = (*host)(nil)
