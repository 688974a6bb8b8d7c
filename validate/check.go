package validate

import (
	"errors"
	"net/http"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Check checks a tools/call's arguments against the tool's learned
// schema, refusing the call when they break it (a CallToolResult with the
// <validation_error>, isError) or when the tool is not in a complete,
// fresh list (UNKNOWN_ACTION). A call it cannot check passes, and is
// counted; so do a batch's calls, whose arguments are not checked.
func (f *Feature) Check(x *feature.Exchange) *feature.Refusal {
	m := x.Single()
	if m == nil {
		if f.checks {
			for i := range x.Messages {
				if feature.IsCall(&x.Messages[i]) {
					validUnchecked.Inc()
				}
			}
		}
		return nil
	}
	if !feature.IsCall(m) {
		return nil
	}
	tool := string(m.Name)
	// A tool a complete, fresh list lacks is unknown; under a policy that
	// hides tools, it gets the answer a hidden one gets, so that the two
	// look alike, whatever the call's size.
	schema, found, names := f.catalog.Lookup(f.KeyOf(x), tool, x.Start)
	if found == toolschema.Absent {
		if f.checks {
			validUnknown.Inc()
		}
		return &feature.Refusal{Envelope: UnknownTool(tool, f.nearest(tool, names)), Status: http.StatusOK}
	}
	if !f.checks {
		return nil
	}
	if found != toolschema.Known {
		// No schema to check with: the call passes, as the server reads
		// it.
		validUnchecked.Inc()
		return nil
	}
	return f.checkArguments(x, schema, tool)
}

// ReadsWholeBody reports whether calls' arguments are checked, which needs
// the whole body before the call goes upstream (feature.WholeBody).
func (f *Feature) ReadsWholeBody() bool { return f.checks }

// checkArguments checks a call's arguments against the tool's schema.
func (f *Feature) checkArguments(x *feature.Exchange, schema *toolschema.Schema, tool string) *feature.Refusal {
	problems, err := schema.CheckCall(x.Request.Context(), x.Body)
	switch {
	case errors.Is(err, toolschema.ErrOverBudget):
		// Checking it would cost more than its bytes allow: it passes,
		// as a call whose tool is not known does.
		validOverBudget.Inc()
		f.logOverBudget(tool, len(x.Body))
		return nil
	case err != nil:
		// The client left: nothing is checked for it any more, and the
		// forward step gives up on it.
		validUnchecked.Inc()
		return nil
	case problems == nil:
		validValid.Inc()
		return nil
	}
	validInvalid.Inc()
	text := envelope.ValidationText(tool, problems)
	texts := []string{text}
	for _, a := range f.annotators {
		if s := a.Annotate(x, tool); s != "" {
			texts = append(texts, s)
		}
	}
	id := x.Single().ID
	body := envelope.AppendTextResult(make([]byte, 0, 96+len(text)+len(id)), id, true, texts...)
	return &feature.Refusal{Envelope: argumentsRefused(tool, len(problems)), Body: body}
}

// Absent reports whether the complete, fresh list of x's tools lacks tool.
func (f *Feature) Absent(x *feature.Exchange, tool string) bool {
	_, found, _ := f.catalog.Lookup(f.KeyOf(x), tool, x.Start)
	return found == toolschema.Absent
}

// Arguments are the names of the arguments tool's learned schema
// declares, nil when its schema is not known.
func (f *Feature) Arguments(x *feature.Exchange, tool string) []string {
	schema, found, _ := f.catalog.Lookup(f.KeyOf(x), tool, x.Start)
	if found != toolschema.Known {
		return nil
	}
	return schema.Arguments()
}

// Nearest are the five names nearest to tool among those x's list holds
// that the model may be told of.
func (f *Feature) Nearest(x *feature.Exchange, tool string) []string {
	return f.nearest(tool, f.catalog.Names(f.KeyOf(x)))
}

// nearest are the five names nearest to tool among names (the catalog's,
// which it leaves as they are), none of them hidden by the tools policy.
func (f *Feature) nearest(tool string, names []string) []string {
	if f.allowed != nil {
		allowed := make([]string, 0, len(names))
		for _, name := range names {
			if f.allowed(name) {
				allowed = append(allowed, name)
			}
		}
		names = allowed
	}
	return toolschema.Nearest(tool, names, 5)
}
