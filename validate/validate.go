// Package validate is the validate feature: it learns each tool's
// inputSchema from the tools/list answers that pass (a JSON body or the
// response event of a stream, every page), keeps them per endpoint and
// caller in a toolschema.Catalog, and checks each tools/call's arguments
// against them before the call takes a place in the guard. A call with
// arguments that break the schema is answered with a <validation_error>
// the model can fix its call from; a call to a tool a complete list lacks
// is answered UNKNOWN_ACTION with the nearest names.
//
// Module is the feature validate (http.handlers.mcp.features.validate).
// The tools learned are also what the tool policy, the contract and the
// result budgets read: a handler's features share one Feature (Shared),
// on the process's one catalog (catalog.go).
package validate

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/logsample"
	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Feature is validate at work for one handler: its feature.Responder
// learns tools, and its feature.Check checks calls.
type Feature struct {
	catalog *toolschema.Catalog
	// checks: calls' arguments are checked (validate is on); absent:
	// a call to a tool a complete list lacks is refused (validate is on,
	// or a tools policy hides tools, whose refusals must look alike).
	checks, absent bool
	// allowed reports whether the tools policy lets a tool be named to
	// the model (nil: every tool); annotators tell about a tool beside a
	// refusal.
	allowed    func(tool string) bool
	annotators []feature.Annotator
	logger     *zap.Logger
	// pooled: the catalog is the process's, given back by Close;
	// maxCatalogSize is the handler's max_catalog_size (shared.go).
	pooled         bool
	maxCatalogSize int64
	// overBudget logs the first call passed unchecked for its cost, and
	// counts the ones after it.
	overBudget *logsample.Sampler[overBudget]
	// lastEndpoint is the endpoint KeyOf worked out last: a request to the
	// same one (nearly every request) reuses its string.
	lastEndpoint atomic.Pointer[string]
}

// Config is what a handler gives the feature.
type Config struct {
	Catalog *toolschema.Catalog
	// CheckArguments: validate is on. RefuseAbsent: a call to a tool a
	// complete list lacks is refused (also under a policy that hides
	// tools).
	CheckArguments, RefuseAbsent bool
	Allowed                      func(tool string) bool
	Logger                       *zap.Logger
}

// New starts the feature; Stop ends it.
func New(c Config) *Feature {
	f := &Feature{catalog: c.Catalog, checks: c.CheckArguments, absent: c.RefuseAbsent || c.CheckArguments,
		allowed: c.Allowed, logger: c.Logger}
	f.overBudget = logsample.New(overBudgetEvery, 1, f.logOverBudgetRepeated)
	return f
}

// Stop stops the feature's log sampler.
func (f *Feature) Stop() { f.overBudget.Stop() }

// overBudgetEvery is the least time between two log lines of calls passed
// unchecked because checking them would cost more than their budget: the
// first is logged at once, the ones after it counted on one line a minute
// (every call is counted by caddy_mcp_validations_total).
const overBudgetEvery = time.Minute

// overBudget is the one kind of line logOverBudget writes.
type overBudget struct{}

// logOverBudget logs a call passed unchecked for its cost, unless one was
// logged within overBudgetEvery: then it is only counted.
func (f *Feature) logOverBudget(tool string, size int) {
	if log, _ := f.overBudget.Note(overBudget{}, overBudget{}); log {
		f.logger.Warn("checking a call's arguments would cost more than their budget: the call passes unchecked",
			zap.String("tool", feature.Clip(tool)), zap.Int("bytes", size))
	}
}

// siteLogSample is where a panic of writing a count, on the log
// sampler's timer, is recovered (package panics).
const siteLogSample = "log_sample"

// logOverBudgetRepeated logs the calls passed unchecked for their cost and
// not logged, from the sampler's timer, on a goroutine of its own.
func (f *Feature) logOverBudgetRepeated(c logsample.Count[overBudget]) {
	defer panics.Recover(f.logger, siteLogSample)
	f.logger.Warn("more calls' arguments would cost more than their budget to check: they passed unchecked",
		zap.Int64("repeated", c.N))
}
