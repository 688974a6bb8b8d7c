package feature

import (
	"time"

	"go.uber.org/zap"
)

// Host is what the mcp handler that loads a feature tells it, when it
// asks for the feature's Parts: the handler's own settings, the state its
// features share, and the state shared by name across the handlers of
// one config.
type Host interface {
	// Logger is the handler's logger: the gateway's log lines are all its
	// own, whichever feature writes them.
	Logger() *zap.Logger
	// Origin is the origin (scheme://host[:port]) of the site the handler
	// serves, read from the configuration, never from a request; the
	// error says why the configuration names no single one.
	Origin() (string, error)
	// RetryAfter is how long the model is told to wait for an upstream
	// that cannot be reached (upstream_retry_after).
	RetryAfter() time.Duration
	// LogKey: a rule's key may be shown as it is, in logs and in
	// /mcp/status, rather than as a digest (log_key).
	LogKey() bool
	// VerifiesPrincipal: one of the handler's features verifies who each
	// request speaks for (Exchange.Principal), so that a key template may
	// read {http.mcp.auth.*} and a session may be bound to its principal.
	VerifiesPrincipal() bool
	// Declare records that the handler gives the shared state of kind
	// and name the settings, and refuses settings another handler of the
	// config gave it differently: state shared by name (a rate limit's
	// buckets, a named guard's places) is shared across sites and
	// reloads, so every handler that names it must agree.
	Declare(kind, name, settings string) error
	// Ordinal numbers, from 1, the handlers of the config that give
	// state of their own the same settings, in the order they load: a
	// reload that keeps a site's block then keeps its state.
	Ordinal(settings string) int
	// Share is the handler's one value of key, made by make the first
	// time one of its features asks: what its features share (the tools
	// learned from lists). A value that is a Plugin has its parts plugged
	// once, with the features'; one that is an io.Closer is closed with
	// the handler.
	Share(key string, make func() (any, error)) (any, error)
	// ShareInConfig is the config's one value of key, made by make the
	// first time a feature of one of its handlers asks: what the
	// handlers of one config share (the tool names a metric is labelled
	// with), and a reload starts afresh. One that is an io.Closer is
	// closed when the config's last handler is cleaned up.
	ShareInConfig(key string, make func() (any, error)) (any, error)
}

// PrincipalVerifier is implemented by a feature that verifies who each
// request speaks for (authorization): the core asks it, before any
// feature's Parts, so that Host.VerifiesPrincipal is known to all.
type PrincipalVerifier interface {
	VerifiesPrincipal() bool
}
