package handler

import (
	"fmt"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/oauth"
	"github.com/caddymcp/caddy-mcp/results"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
	"github.com/caddymcp/caddy-mcp/validate"
)

// provisionTools sets up what reads and decides about tools: the
// contract's lockfile, the tools policy, the catalog they and validate
// share, and the features built on them.
func (h *Handler) provisionTools() error {
	var err error
	if h.Contract != nil {
		if err = h.lockContract(); err != nil {
			return fmt.Errorf("contract: %w", err)
		}
	}
	if h.Tools != nil {
		if h.policy, err = h.Tools.rules(); err != nil {
			return fmt.Errorf("tools: %w", err)
		}
	}
	if h.Results != nil {
		if err = h.Results.Validate(); err != nil {
			return err
		}
		h.budgets = results.New(h.Results, h.joined.resultLabels(), h.logger)
	}
	// The tools' schemas are learned for whatever reads them: the checks,
	// the contract, and the budgets' words (a tool's paging arguments).
	if h.ValidateCalls || h.Contract != nil || h.policy != nil || h.budgets != nil {
		if h.catalog, err = takeCatalog(); err != nil {
			return err
		}
		h.catalog.SetMaxBytes(h.joined.catalogSize(h.MaxCatalogSize))
	}
	h.plugFeatures()
	return nil
}

// provisionGate sets up authorization, the identity phase, holding tokens
// to the configured resource or else to the address of the site the
// handler serves.
func (h *Handler) provisionGate(ctx caddy.Context) error {
	if err := h.Authorization.Resolve(); err != nil {
		return err
	}
	resource, err := h.Authorization.CanonicalURL(siteOrigin(ctx))
	if err != nil {
		return err
	}
	h.gate = oauth.New(h.Authorization, resource, h.logger, nil)
	h.identity = append(h.identity, h.gate)
	return nil
}

// plugFeatures plugs the features the handler is configured with into the
// core, each in the order it runs (docs/architecture.md).
func (h *Handler) plugFeatures() {
	if h.catalog != nil {
		cfg := validate.Config{Catalog: h.catalog, CheckArguments: h.ValidateCalls, Logger: h.logger}
		if h.policy != nil {
			cfg.RefuseAbsent, cfg.Allowed = h.policy.Hides(), h.policy.Allowed
		}
		h.validation = validate.New(cfg)
	}
	if h.locked != nil {
		h.contract = contract.NewLive(h.locked.file, h.Contract.OnBreaking == "refuse", h.locked.lists, h.validation, h.logger)
		h.annotators = append(h.annotators, h.contract)
	}
	// On the way in: a scope the token lacks is refused first, then a
	// hidden tool, then a broken contract, then a tool the list lacks and
	// arguments that break its schema.
	if h.gate != nil && h.gate.Governs() {
		h.checks = append(h.checks, h.gate)
	}
	if h.policy != nil {
		h.checks = append(h.checks, &toolpolicy.Calls{Rules: h.policy, Tools: h.validation})
	}
	if h.budgets != nil {
		h.checks = append(h.checks, h.budgets)
		h.budgets.SetSchemas(h.validation)
	}
	if h.contract != nil && h.contract.Refuses() {
		h.checks = append(h.checks, h.contract)
	}
	if h.ValidateCalls || (h.policy != nil && h.policy.Hides()) {
		h.checks = append(h.checks, h.validation)
	}
	if h.validation != nil && len(h.annotators) > 0 {
		h.validation.SetAnnotate(h.annotate)
	}
	// On the way out: the contract reads a tool list as the upstream wrote
	// it, the policy filters it, the scopes leave out what the caller's
	// token lacks, and validate learns what the client is given.
	if h.budgets != nil {
		// First: a result over its budget is refused before anything
		// else holds it.
		h.responders = append(h.responders, h.budgets)
	}
	if h.contract != nil {
		h.responders = append(h.responders, h.contract)
	}
	if h.policy != nil {
		h.responders = append(h.responders, &toolpolicy.Answers{Rules: h.policy, Logger: h.logger})
	}
	if h.gate != nil && h.gate.Governs() {
		h.responders = append(h.responders, h.gate)
	}
	if h.validation != nil {
		h.responders = append(h.responders, h.validation)
	}
}

// askFeatures asks the plugged features what the core must do for them:
// whether one governs which calls run (a body the core cannot read is then
// refused), whether one reads a whole body (none then streams), and which
// bound how long a call runs.
func (h *Handler) askFeatures() {
	for _, c := range h.checks {
		g, ok := c.(feature.Governing)
		h.governs = h.governs || (ok && g.Governs())
		h.wholeBody = h.wholeBody || readsWholeBody(c)
		if d, ok := c.(feature.Deadline); ok {
			h.deadlines = append(h.deadlines, d)
		}
	}
	for _, a := range h.entries {
		h.wholeBody = h.wholeBody || readsWholeBody(a)
	}
}

func readsWholeBody(f any) bool {
	w, ok := f.(feature.WholeBody)
	return ok && w.ReadsWholeBody()
}

// check runs the features' checks on x, in order, and returns the first
// refusal.
func (h *Handler) check(x *exchange) *feature.Refusal {
	if len(h.checks) == 0 {
		return nil
	}
	fx := x.view()
	for _, c := range h.checks {
		if ref := c.Check(fx); ref != nil {
			return ref
		}
	}
	return nil
}

// refuseWith answers x with an admitter's or a check's refusal.
func (h *Handler) refuseWith(w http.ResponseWriter, x *exchange, ref *feature.Refusal) error {
	if ref.Gone {
		// The client went away while it waited: nobody is left to answer.
		x.canceled = true
		return caddyhttp.Error(statusClientClosed, ref.Cause)
	}
	x.cause = ref.Cause
	maps.Copy(w.Header(), ref.Header)
	if p := ref.Plain; p != nil {
		x.errorCode = p.Outcome
		maps.Copy(w.Header(), p.Header)
		// A JSON-RPC error like every other refusal, and written the same
		// way: its type is the core's to set, not each feature's.
		return writeJSON(w, p.Status, nil, p.Body)
	}
	if ref.Body == nil {
		return h.answer(w, x, &ref.Envelope, ref.Status)
	}
	h.answered(x, &ref.Envelope)
	return writeJSON(w, http.StatusOK, &ref.Envelope, ref.Body)
}

// annotate are the annotators' sections about tool, each that has one.
func (h *Handler) annotate(x *feature.Exchange, tool string) []string {
	var sections []string
	for _, a := range h.annotators {
		if s := a.Annotate(x, tool); s != "" {
			sections = append(sections, s)
		}
	}
	return sections
}
