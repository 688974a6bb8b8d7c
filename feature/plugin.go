package feature

import (
	"net/http"
	"time"
)

// Namespace is the Caddy module namespace of the features the mcp handler
// loads as guest modules, from its "features" list, each named by its
// "feature" key: {"feature": "audit", ...} loads the module
// http.handlers.mcp.features.audit. In a Caddyfile, a feature's name is a
// subdirective of mcp, whose block the module reads itself when it
// implements caddyfile.Unmarshaler.
//
// A guest feature is a Caddy module like any other: Caddy provisions,
// validates and cleans it up with the config that loads it (caddy.Context
// gives it its logger and the config's metrics registry). Adding one is a
// package of its own and one import line in the build; nothing in the
// core names it.
//
// A feature that is on without a word of the configuration (tracing,
// which Caddy's own tracing directive switches) says so (Default): every
// mcp handler loads it, with its zero configuration, when its features do
// not name it.
const Namespace = "http.handlers.mcp.features"

// Plugin is a feature. Once every feature of the handler is provisioned,
// the core asks each, once, for its Parts, telling it what the handler
// offers (Host), and runs each part where its phase runs. An error refuses
// the config.
type Plugin interface {
	Parts(h Host) (Parts, error)
}

// Parts is what a guest feature plugs into the core: each part it has, in
// the phase it runs in (nil: none). The core asks a Check it is given
// whether it is Governing, reads WholeBody or is a Deadline, and an
// Admitter of the entry phase whether it reads WholeBody, once, when the
// config loads.
type Parts struct {
	// Order places the feature's parts among the other features' of
	// their phases: lower first, and equal ones by name. The built-in
	// features take negative orders (docs/architecture.md lists them), so
	// that a feature that gives none runs after them.
	Order int
	// AnswerOrder places its Responder among the others, when that order
	// differs from Order (0: Order).
	AnswerOrder int
	// Front answers what must be answered before the origin check: a
	// public document a client of any origin reads (authorization's
	// Protected Resource Metadata).
	Front Front
	// Inputs are the parts of a request the feature's key templates read
	// (a header, a cookie): a request that gives one of them more than
	// once is refused before any feature sees it.
	Inputs Inputs
	// Identity verifies a request's credentials, before its body is read;
	// Session opens its session; Admission takes what it needs before the
	// checks; Entry after them (see Admitter).
	Identity, Session, Admission, Entry Admitter
	// Check decides on a request on its way in.
	Check Check
	// Responder opens hooks on the upstream's answers.
	Responder Responder
	// Annotator tells the model about a tool beside the gateway's
	// answers to a call to it.
	Annotator Annotator
	// Observer is told how each request ended.
	Observer Observer
	// Router sends a request to one of the handler's upstream routes.
	Router Router
	// Rewriter rewrites a request's body before it goes upstream.
	Rewriter Rewriter
	// Answerer answers a request in the upstream's place.
	Answerer Answerer
	// Tracer follows each request from its start (trace.go). A handler
	// has one: a feature its features name takes the place of one on by
	// default (Default), and two they name are refused.
	Tracer Tracer
	// Status is the feature's section of the admin API's /mcp/status,
	// under its name; nil: none. It is called for each GET of the status,
	// from any goroutine.
	Status func() any
}

// Default is implemented by a feature module that every mcp handler
// loads when its "features" do not name it: the core asks each module of
// the Namespace that this build registers, when the handler is
// provisioned, and loads those whose ByDefault is true with their zero
// configuration (JSON null), as if the handler's features named them
// with no settings. A handler whose features name one loads it as they
// configure it.
type Default interface {
	ByDefault() bool
}

// Front answers requests before the origin check.
type Front interface {
	// Front answers r, or reports that it is not its to answer.
	Front(w http.ResponseWriter, r *http.Request) bool
}

// Observer is told how each request the handler took ended, once, after
// what the admitters took was given back: a request refused on its way
// in, answered by the gateway in the upstream's place, or passed through.
// It is called on the request's goroutine, and may keep nothing of the
// exchange past its return: its buffers are recycled.
type Observer interface {
	Observe(x *Exchange, o Outcome)
}

// Outcome is how a request ended.
type Outcome struct {
	// Code is the envelope code the gateway answered with (a refusal, or
	// an upstream failure it answered for: HANDOFF_UPSTREAM_UNAVAILABLE,
	// TIMEOUT…); "" when the upstream's answer passed. A server's own
	// error (a tool's isError result, a JSON-RPC error) passes: it is the
	// server's to tell.
	Code string
	// ClientGone: the client left before its answer.
	ClientGone bool
	// End is when the request was over for the gateway.
	End time.Time
}

// Duration is how long the request of x took, from its arrival to the
// outcome's end.
func (o Outcome) Duration(x *Exchange) time.Duration { return o.End.Sub(x.Start) }

// Router sends a request to one of the handler's upstream routes: its
// "upstreams", named lists of Caddy routes, each with its own
// reverse_proxy (load balancing, health checks, transport), rather than
// to the handler's next one. It runs once the request was admitted, just
// before it goes on. The first router that names a route decides.
type Router interface {
	// Route is the name of the upstream route x goes to; "" leaves it to
	// the next handler.
	Route(x *Exchange) string
}

// RouteHolder is implemented by a Router whose routes are its own rather
// than the handler's upstreams (federation's servers, each configured in
// its block): the route a name it gave is looked up there first.
type RouteHolder interface {
	// Upstream is the route named name; nil when the router holds none
	// of that name.
	Upstream(name string) Upstream
}

// Upstream is a route a request is sent through, as Caddy's handlers are:
// it writes the upstream's answer to w, or returns the error
// reverse_proxy returns when it could not (the core words it, as it
// words the next handler's).
type Upstream interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request) error
}

// Rewriter rewrites a request's body before it goes upstream, once it was
// admitted (a tool's name as clients know it to its server's own). The
// features read the body as the client sent it; the upstream, its
// retries and resends get the rewritten one. A handler with a rewriter
// reads every body whole: none streams to the upstream as it arrives.
type Rewriter interface {
	// Rewrite is given the body as the rewriters before it left it (with
	// the trace context already spliced in, when the request is traced),
	// and returns the body to send instead, or nil to leave it as it is.
	// It may not change body.
	Rewrite(x *Exchange, body []byte) []byte
}

// Answerer answers a request in the upstream's place, with an answer
// that is not a refusal (a list from a cache). Its answer goes through
// the core as the upstream's would: every hook reads it (a policy filters
// a list it answers), and it is counted as passed. It runs once the
// request was admitted, before the routers; the first that answers
// decides.
type Answerer interface {
	// Answer is the handler that answers x, or nil to let it go on.
	Answer(x *Exchange) http.Handler
}

// SessionAnswerer is implemented by an Answerer whose answers may open a
// session (federation's initialize, which opened one on each server):
// the Mcp-Session-Id its answer gives reaches the client. Any other
// answerer's is dropped, since no upstream opened it.
type SessionAnswerer interface {
	OpensSessions() bool
}
