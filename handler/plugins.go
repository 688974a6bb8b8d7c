package handler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Features: Caddy modules of the feature.Namespace, in the handler's
// "features" map, each under its name, which plug parts into the core's
// phases (feature.Parts). Caddy provisions, validates and cleans them up
// with the config; the core asks each for its parts once all are
// provisioned, and runs them by their order.

// pluggedStatus is a feature's section of /mcp/status.
type pluggedStatus struct {
	name   string
	status func() any
}

// plugged is one feature's parts, under its name.
type plugged struct {
	name  string
	parts feature.Parts
}

// loadPlugins loads the features and plugs their parts into the phases
// they run in, each phase's in order.
func (h *Handler) loadPlugins(ctx caddy.Context) error {
	host := &host{h: h, ctx: ctx}
	mods, byDefault, err := h.loadFeatures(ctx)
	if err != nil {
		return err
	}
	names := sortedNames(mods)
	for _, name := range names {
		if v, ok := mods[name].(feature.PrincipalVerifier); ok && v.VerifiesPrincipal() {
			host.verifies = true
		}
	}
	// What the features shared is closed with the handler, also when
	// one of them refused the config.
	defer func() { h.closers = host.closers() }()
	var all []plugged
	for _, name := range names {
		p, ok := mods[name].(feature.Plugin)
		if !ok {
			return fmt.Errorf("features: %q is no feature of the mcp handler: its module does not implement feature.Plugin", name)
		}
		parts, err := p.Parts(host)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, plugged{name, parts})
	}
	// What the features share, plugged once, after them: its parts may
	// only be known once every feature has asked for it.
	for _, s := range host.shared {
		if p, ok := s.value.(feature.Plugin); ok {
			parts, err := p.Parts(host)
			if err != nil {
				return fmt.Errorf("%s: %w", s.key, err)
			}
			all = append(all, plugged{s.key, parts})
		}
	}
	if err := oneTracer(all, byDefault); err != nil {
		return err
	}
	h.plugAll(all)
	for _, o := range h.openers {
		if _, routes := o.(feature.Router); len(h.routers) > 0 && !routes {
			// A session's token names one upstream: a request routed to
			// another would carry its session id there. A router that
			// opens sessions itself (federation) gives each route its own.
			return errors.New("features: sessions cannot be combined with a feature that routes requests to upstream routes (federation seals each server's session itself: drop sessions)")
		}
	}
	return nil
}

// loadFeatures loads the features the handler's "features" name, and
// every feature module of this build that is on by default
// (feature.Default) and that they do not name, with its zero
// configuration; byDefault are the names of the latter.
func (h *Handler) loadFeatures(ctx caddy.Context) (mods map[string]any, byDefault map[string]bool, err error) {
	mods, byDefault = map[string]any{}, map[string]bool{}
	if len(h.FeaturesRaw) > 0 {
		loaded, err := ctx.LoadModule(h, "FeaturesRaw")
		if err != nil {
			return nil, nil, fmt.Errorf("features: %w", err)
		}
		mods = loaded.(map[string]any)
	}
	for _, m := range caddy.GetModules(feature.Namespace) {
		name := m.ID.Name()
		if _, named := mods[name]; named {
			continue
		}
		if d, ok := m.New().(feature.Default); !ok || !d.ByDefault() {
			continue
		}
		mod, err := ctx.LoadModuleByID(string(m.ID), nil)
		if err != nil {
			return nil, nil, fmt.Errorf("features: %s: %w", name, err)
		}
		mods[name], byDefault[name] = mod, true
	}
	return mods, byDefault, nil
}

// oneTracer leaves one feature's tracer: one the handler's features name
// takes the place of those on by default; two they name, or two on by
// default and none named, are refused.
func oneTracer(all []plugged, byDefault map[string]bool) error {
	var named, defaults []int
	for i, p := range all {
		switch {
		case p.parts.Tracer == nil:
		case byDefault[p.name]:
			defaults = append(defaults, i)
		default:
			named = append(named, i)
		}
	}
	if len(named) == 0 {
		named, defaults = defaults, nil
	}
	if len(named) > 1 {
		names := make([]string, len(named))
		for k, i := range named {
			names[k] = all[i].name
		}
		return fmt.Errorf("features: %s each trace requests, and a handler has one tracer", strings.Join(names, ", "))
	}
	for _, i := range defaults {
		all[i].parts.Tracer = nil
	}
	return nil
}

// plugAll plugs every feature's parts, each phase's by Order (and the
// responders by AnswerOrder), equal orders by name.
func (h *Handler) plugAll(all []plugged) {
	slices.SortStableFunc(all, func(a, b plugged) int {
		return cmp.Or(cmp.Compare(a.parts.Order, b.parts.Order), cmp.Compare(a.name, b.name))
	})
	for _, p := range all {
		h.plug(p.name, p.parts)
	}
	answerOrder := func(p plugged) int { return cmp.Or(p.parts.AnswerOrder, p.parts.Order) }
	slices.SortStableFunc(all, func(a, b plugged) int {
		return cmp.Or(cmp.Compare(answerOrder(a), answerOrder(b)), cmp.Compare(a.name, b.name))
	})
	for _, p := range all {
		if p.parts.Responder != nil {
			h.responders = append(h.responders, p.parts.Responder)
		}
	}
}

// plug adds the parts of one feature, but its responder, to the phases
// they run in.
func (h *Handler) plug(name string, p feature.Parts) {
	for _, part := range []struct {
		list *[]feature.Admitter
		a    feature.Admitter
	}{{&h.identity, p.Identity}, {&h.openers, p.Session}, {&h.admitters, p.Admission}, {&h.entries, p.Entry}} {
		if part.a != nil {
			*part.list = append(*part.list, part.a)
		}
	}
	h.keyInputs.Add(p.Inputs)
	if p.Front != nil {
		h.fronts = append(h.fronts, p.Front)
	}
	if p.Check != nil {
		h.checks = append(h.checks, p.Check)
	}
	if p.Annotator != nil {
		h.annotators = append(h.annotators, p.Annotator)
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
	if p.Tracer != nil {
		h.tracer = p.Tracer
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
	o := feature.Outcome{Code: x.errorCode, ClientGone: x.canceled || x.watch.Gone(), End: now}
	fx := x.view()
	for _, obs := range h.observers {
		obs.Observe(fx, o)
	}
}

// closeShared closes what the features shared, when the handler is
// cleaned up.
func (h *Handler) closeShared() {
	for _, c := range h.closers {
		_ = c.Close()
	}
	h.closers = nil
}
