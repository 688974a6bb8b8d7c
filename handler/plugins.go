package handler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Guest features: Caddy modules of the feature.Namespace, listed in the
// handler's features, which plug parts into the core's phases
// (feature.Parts). Caddy provisions, validates and cleans them up with the
// config; the core only runs their parts, after the built-in features' of
// each phase, by their Order.

// pluggedStatus is a guest feature's section of /mcp/status.
type pluggedStatus struct {
	name   string
	status func() any
}

// loadPlugins loads the guest features and plugs their parts into the
// phases they run in.
func (h *Handler) loadPlugins(ctx caddy.Context) error {
	if len(h.FeaturesRaw) == 0 {
		return nil
	}
	mods, err := ctx.LoadModule(h, "FeaturesRaw")
	if err != nil {
		return fmt.Errorf("features: %w", err)
	}
	type plugin struct {
		name  string
		parts feature.Parts
	}
	var plugins []plugin
	for _, m := range mods.([]any) {
		name := m.(caddy.Module).CaddyModule().ID.Name()
		if slices.ContainsFunc(plugins, func(p plugin) bool { return p.name == name }) {
			return fmt.Errorf("features: %q given twice", name)
		}
		p, ok := m.(feature.Plugin)
		if !ok {
			return fmt.Errorf("features: %q is no feature of the mcp handler: its module does not implement feature.Plugin", name)
		}
		plugins = append(plugins, plugin{name, p.Parts()})
	}
	slices.SortStableFunc(plugins, func(a, b plugin) int { return cmp.Compare(a.parts.Order, b.parts.Order) })
	for _, p := range plugins {
		h.plug(p.name, p.parts)
	}
	if len(h.routers) > 0 && h.sessions != nil {
		// A session's token names one upstream: a request routed to
		// another would carry its session id there.
		return errors.New("features: sessions cannot be combined yet with a feature that routes requests to upstream routes")
	}
	return nil
}

// plug adds the parts of one guest feature to the phases they run in.
func (h *Handler) plug(name string, p feature.Parts) {
	for _, part := range []struct {
		list *[]feature.Admitter
		a    feature.Admitter
	}{{&h.identity, p.Identity}, {&h.openers, p.Session}, {&h.admitters, p.Admission}, {&h.entries, p.Entry}} {
		if part.a != nil {
			*part.list = append(*part.list, part.a)
		}
	}
	if p.Check != nil {
		h.checks = append(h.checks, p.Check)
	}
	if p.Responder != nil {
		h.responders = append(h.responders, p.Responder)
	}
	if p.Observer != nil {
		h.observers = append(h.observers, p.Observer)
	}
	if p.Router != nil {
		h.routers = append(h.routers, p.Router)
	}
	if p.Rewriter != nil {
		h.rewriters = append(h.rewriters, p.Rewriter)
		h.wholeBody = true // no body streams past it unrewritten
	}
	if p.Answerer != nil {
		h.answerers = append(h.answerers, p.Answerer)
	}
	if p.Status != nil {
		h.pluggedStatus = append(h.pluggedStatus, pluggedStatus{name, p.Status})
	}
}

// tellObservers tells the observers how x ended.
func (h *Handler) tellObservers(x *exchange, now time.Time) {
	if len(h.observers) == 0 {
		return
	}
	o := feature.Outcome{Code: x.errorCode, ClientGone: x.canceled || x.watch.gone, End: now}
	fx := x.view()
	for _, obs := range h.observers {
		obs.Observe(fx, o)
	}
}
