// Package caddyfile turns the mcp Caddyfile directive into the handler's
// configuration. Placeholders are left for the handler to expand per
// request; values are checked here with the handler's own rules, so that a
// mistake is reported with the file and line it is on. Rate limits and named
// concurrency blocks given the same name in two sites must agree, since they
// share their state: a disagreement names both places.
//
//	mcp {
//		rate_limit <name> {
//			key      <placeholder template>   # default {client_ip}
//			rate     <n>/<duration>           # required: 10/s, 600/1m, 5/30s, 1000/1d
//			burst    <n>                      # bucket size, default n
//			methods  <method...>              # default tools/call
//			tools    <glob...>                # default every tool
//			max_keys <n>                      # live buckets, default 1000000
//		}
//		max_request_body <size>               # default 4MiB
//		stream_above <size>                   # calls streamed upstream as they arrive, default 256KiB
//		read_body_timeout <duration>          # default 10s
//		max_batch <n>                         # messages per POST, default 16
//		concurrency [<name>] {
//			max           <n>                 # in flight, required
//			queue         <n>                 # waiting, default 0
//			queue_timeout <duration>          # default 10s
//			cancel_grace  <duration>          # places kept after the client left, default 5s
//			key           <template>          # one guard per value; default one guard
//			methods       <method...>         # default tools/call
//		}
//		allowed_origins <origin...>           # default loopback origins only
//		upstream_retry_after <duration>       # default 30s
//		sse_keepalive <duration>|off          # comment line on idle event streams, default 25s
//		log_key                               # log the key of refused requests
//		validate {                            # check tools/call arguments against the learned inputSchema
//			max_catalog_size <size>           # memory of the tools learned, default 128MiB
//		}
//		contract <file> {                     # the approved tools (caddy mcp-lock): drift logged, told to the model
//			on_breaking warn|refuse           # default warn
//		}
//		upstream_cancels_on_close             # the upstream stops a 2026-07-28 call when its stream closes
//		sessions {                            # pin 2025-era sessions to their upstream (package session)
//			secret <secret...>                # the first seals, all open; default: keys in Caddy's storage
//			ttl    <duration>                 # default 24h
//			bind   <placeholder template>     # the principal a session belongs to; default none
//		}
//		store redis {                         # buckets shared by a fleet (package redisstore)
//			address    <url...>               # redis://host:port/db, rediss:// for TLS; several: a cluster
//			username   <user>
//			password   <password>
//			key_prefix <prefix>               # default caddy-mcp:
//			timeout    <duration>             # per decision, default 50ms
//			on_error   local|allow|deny       # when Redis does not answer, default local
//		}
//		<feature> ...                         # a guest feature (features.go), in its own words
//	}
package caddyfile

import (
	"encoding/json"
	"reflect"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/handler"
)

// Parse is the mcp directive's unmarshaler, for
// httpcaddyfile.RegisterHandlerDirective.
func Parse(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	cfg := new(handler.Handler)
	a := &adaptation{featurefile.NewAdaptation(h.State, warner(h))}
	a.SetRoutes(func(d *caddyfile.Dispenser) (json.RawMessage, error) { return routes(h, d) })
	if err := a.unmarshal(h.Dispenser, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Unmarshal reads one mcp directive from d into cfg. Warnings are left
// out.
func Unmarshal(d *caddyfile.Dispenser, cfg *handler.Handler) error {
	a := &adaptation{featurefile.NewAdaptation(nil, func(caddyconfig.Warning) {})}
	return a.unmarshal(d, cfg)
}

// adaptation is what adapting one mcp directive shares with the rest of
// the Caddyfile (the shared names it must agree with, and the warnings),
// and the features it configures.
type adaptation struct {
	*featurefile.Adaptation
}

// routes reads the block the dispenser is in as a site's directives, the
// dispenser on a value of the block's first line: the line's other values
// were read by the caller (a server's name), and are left out.
func routes(h httpcaddyfile.Helper, d *caddyfile.Dispenser) (json.RawMessage, error) {
	seg := d.NextSegment()
	// The segment from the value on: its first line is that value and
	// what follows it, the block after. The directive's name is put back
	// in its place, alone on its line, as the reader of a segment wants.
	line := seg[0].Line
	body := seg
	for len(body) > 0 && body[0].Line == line && body[0].Text != "{" {
		body = body[1:]
	}
	tokens := append([]caddyfile.Token{seg[0]}, body...)
	sub, err := httpcaddyfile.ParseSegmentAsSubroute(h.WithDispenser(caddyfile.NewDispenser(tokens)))
	if err != nil {
		return nil, err
	}
	sr, ok := sub.(*caddyhttp.Subroute)
	if !ok {
		return nil, d.Errf("the block did not read as routes")
	}
	return json.Marshal(sr.Routes)
}

// warner returns what adds a warning to those the adapter returns. Caddy
// v2.11's Helper keeps them in an unexported field, with no method to add
// one; where that field is not found, a warning is logged as Caddy logs
// the adapter's warnings.
func warner(h httpcaddyfile.Helper) func(caddyconfig.Warning) {
	f := reflect.ValueOf(h).FieldByName("warnings")
	if f.IsValid() && f.Type() == reflect.TypeFor[*[]caddyconfig.Warning]() && !f.IsNil() {
		warnings := (*[]caddyconfig.Warning)(f.UnsafePointer())
		return func(w caddyconfig.Warning) { *warnings = append(*warnings, w) }
	}
	return func(w caddyconfig.Warning) {
		caddy.Log().Named("adapters.caddyfile").Warn(w.Directive+": "+w.Message,
			zap.String("file", w.File), zap.Int("line", w.Line))
	}
}

func (a *adaptation) unmarshal(d *caddyfile.Dispenser, cfg *handler.Handler) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if f, ok := featurefile.Lookup(sub); ok && !seen[sub] || ok && f.Repeats {
			seen[sub] = true
			if err := f.Read(d, a.Adaptation); err != nil {
				return err
			}
			continue
		}
		if seen[sub] {
			return d.Errf("%s given twice", sub)
		}
		seen[sub] = true
		if err := a.unmarshalOption(d, cfg, sub); err != nil {
			return err
		}
	}
	features, err := a.Features()
	if err != nil {
		return err
	}
	if len(features) > 0 {
		cfg.FeaturesRaw = features
	}
	return nil
}

// subdirectives are those of each block of the mcp directive, by block
// ("" for the mcp block itself), for suggestions.
var subdirectives = map[string][]string{
	"": {
		"allowed_origins", "sse_keepalive", "log_key",
		"upstream_cancels_on_close", "upstream_retry_after",
		"max_request_body", "stream_above", "read_body_timeout", "max_batch",
	},
}

// unmarshalOption reads one subdirective of the mcp block into cfg.
func (a *adaptation) unmarshalOption(d *caddyfile.Dispenser, cfg *handler.Handler, sub string) error {
	var err error
	switch sub {
	case "allowed_origins":
		cfg.AllowedOrigins, err = origins(d)
	case "sse_keepalive":
		cfg.SSEKeepalive, err = keepalive(d)
	case "log_key":
		cfg.LogKey, err = true, featurefile.NoArgs(d)
	case "upstream_cancels_on_close":
		cfg.UpstreamCancelsOnClose, err = true, featurefile.NoArgs(d)
	case "upstream_retry_after":
		cfg.UpstreamRetryAfter, err = featurefile.PositiveDuration(d)
	case "max_request_body":
		cfg.MaxRequestBody, err = featurefile.Size(d)
	case "stream_above":
		cfg.StreamAbove, err = featurefile.Size(d)
	case "read_body_timeout":
		cfg.ReadBodyTimeout, err = featurefile.PositiveDuration(d)
	case "max_batch":
		cfg.MaxBatch, err = featurefile.PositiveInt(d)
	default:
		if guestFeature(sub) {
			return a.unmarshalFeature(d, sub)
		}
		return unrecognized(d, "", sub)
	}
	return err
}

// unrecognized is the error for a subdirective name that block does not
// know, at its line, with the known one it is closest to.
func unrecognized(d *caddyfile.Dispenser, block, name string) error {
	known := subdirectives[block]
	if block == "" {
		known = mcpSubdirectives()
	}
	return featurefile.Unrecognized(d, block, name, known...)
}
