package validate

import (
	"github.com/caddymcp/caddy-mcp/feature"
)

// The tools learned are shared by the features of a handler that read
// them (validate, the tool policy, the contract, the result budgets): the
// first of them to ask makes the handler's one Feature (Shared), each
// tells it what it needs of it, and the handler plugs it once, after them
// (feature.Host.Share).

// Order is where the learned tools run among the features (feature.Parts),
// both ways: on the way in, after the tool policy's, the budgets' and the
// contract's checks, so that a hidden or broken tool is refused as such;
// on the way out, last of the tool features, so that what is learned is
// what the client is given.
const Order = -30

// shareKey is the learned tools among what a handler's features share, and
// the name of their section of /mcp/status (the catalog's size).
const shareKey = "tool_catalog"

// Shared is the handler's one Feature, made the first time one of its
// features asks: it takes the process's catalog, which Close gives back
// with the handler.
func Shared(h feature.Host) (*Feature, error) {
	v, err := h.Share(shareKey, func() (any, error) {
		c, err := takeCatalog()
		if err != nil {
			return nil, err
		}
		f := New(Config{Catalog: c, Logger: h.Logger()})
		f.pooled = true
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Feature), nil
}

// CheckArguments turns validate on: calls' arguments are checked, and a
// call to a tool a complete list lacks is refused; maxCatalogSize is the
// handler's max_catalog_size (0: none given).
func (f *Feature) CheckArguments(maxCatalogSize int64) {
	f.checks, f.absent = true, true
	f.maxCatalogSize = maxCatalogSize
}

// RefuseAbsent refuses a call to a tool a complete list lacks, as a tools
// policy that hides tools needs (its refusals and these must look alike);
// allowed says which tools it lets be named to the model.
func (f *Feature) RefuseAbsent(allowed func(tool string) bool) {
	f.absent, f.allowed = true, allowed
}

// AddAnnotator adds what a feature tells about a tool (the contract's
// <contract_awareness>) to a refused call's answer.
func (f *Feature) AddAnnotator(a feature.Annotator) {
	f.annotators = append(f.annotators, a)
}

// Parts plugs the learned tools, once every feature told them what it
// needs: the hooks that learn, always, and the check of calls when one
// refuses what a list lacks. The shared catalog is bounded by the largest
// max_catalog_size of the config.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	bound, err := boundOf(h)
	if err != nil {
		return feature.Parts{}, err
	}
	f.catalog.SetMaxBytes(bound.record(f.maxCatalogSize))
	parts := feature.Parts{Order: Order, Responder: f, Status: func() any { return f.catalog.Stats() }}
	if f.absent {
		parts.Check = f
	}
	return parts, nil
}

// Close stops the feature, and gives back the catalog Shared took.
func (f *Feature) Close() error {
	f.Stop()
	if f.pooled {
		releaseCatalog()
	}
	return nil
}

// Interface guard.
var _ feature.Plugin = (*Feature)(nil)
