package results

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/resultstore"
	"github.com/caddymcp/caddy-mcp/validate"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Order is where the budgets' check runs among the features
// (feature.Parts): after the tool policy's, before the contract's and
// validate's.
const Order = -46

// AnswerOrder is where their hooks read an answer: first of the tool
// features, so that a result over its budget is refused before anything
// else holds it.
const AnswerOrder = -42

// Feature is the result budgets as a feature of the mcp handler: the
// module http.handlers.mcp.features.results, configured by Config. It
// holds each tool's result to a budget, in bytes or estimated tokens: a
// result over it is answered RESULT_TOO_LARGE, words the model can act
// on, and never held past the budget.
//
//	results {
//		max <size>          # every tool's result
//		max <glob> <size>   # the tools the glob matches; the first rule that matches
//		tokens <n>          # every tool's, in estimated tokens (bytes / 4)
//		truncate [<glob>...] # these tools' results (no glob: all) are cut to fit, not refused
//		page [<glob>...]     # these tools' results are kept whole, previewed and read in pages
//		store {              # where they are kept: Caddy's storage, encrypted
//			key <secret>     # required with page: at least 32 bytes, never kept in the storage
//			ttl <duration>
//			max_result <size>
//			per_principal <size> [<count>]
//			total <size>
//		}
//	}
type Feature struct {
	Config
	budgets *Budgets
	store   *resultstore.Store
	sweeper *sweeper
	// ledger is the store's ledger's key among the ledgers shared across
	// reloads.
	ledger string
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".results",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers the budgets' metrics, and the learned tools', with
// the config's registry, and opens the store of the results kept whole on
// Caddy's storage, swept every minute.
func (f *Feature) Provision(ctx caddy.Context) error {
	if err := promreg.Register(ctx, append(Collectors(), validate.Collectors()...)...); err != nil {
		return err
	}
	if len(f.Page) == 0 {
		return nil
	}
	if err := f.Store.validate(true); err != nil {
		return err
	}
	s, ledger, err := openStore(f.Store, ctx.Storage())
	if err != nil {
		return err
	}
	f.store, f.ledger, f.sweeper = s, ledger, sweep(s, ctx.Logger())
	return nil
}

// Validate checks the budgets.
func (f *Feature) Validate() error { return f.Config.Validate() }

// configLabels are the tool labels of a config, released with its last
// handler (feature.Host.ShareInConfig).
type configLabels struct{ *ToolLabels }

func (l configLabels) Close() error {
	l.Release() // the series of names no config labels go
	return nil
}

// labelsKey is the config's labels among what its handlers share.
const labelsKey = "results.tool_labels"

// Parts plugs the budgets: a check (a batch of budgeted calls) and the
// hooks that hold results to them, labelling the metric with the tool
// names of the config, and naming a tool's paging arguments from its
// learned schema.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	labels, err := h.ShareInConfig(labelsKey, func() (any, error) { return configLabels{NewToolLabels()}, nil })
	if err != nil {
		return feature.Parts{}, err
	}
	tools, err := validate.Shared(h)
	if err != nil {
		return feature.Parts{}, err
	}
	f.budgets = New(&f.Config, labels.(configLabels).ToolLabels, h.Logger())
	f.budgets.SetSchemas(tools)
	parts := feature.Parts{Order: Order, AnswerOrder: AnswerOrder, Check: f.budgets, Responder: f.budgets}
	if f.store != nil {
		f.budgets.SetStore(f.store)
		parts.Answerer = f.budgets
		parts.Status = func() any { return map[string]any{"store": statusOf(f.store)} }
	}
	return parts, nil
}

// Cleanup stops the budgets' log sampler and the store's sweeping.
func (f *Feature) Cleanup() error {
	if f.budgets != nil {
		f.budgets.Stop()
	}
	if f.sweeper != nil {
		f.sweeper.Stop()
		_, _ = ledgers.Delete(f.ledger)
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner  = (*Feature)(nil)
	_ caddy.Validator    = (*Feature)(nil)
	_ caddy.CleanerUpper = (*Feature)(nil)
	_ feature.Plugin     = (*Feature)(nil)
)
