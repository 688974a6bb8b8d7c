package contract

import (
	"fmt"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words of the contract's refusals, as the model reads them.

// broken: on_breaking refuse, and the tool changed in ways that break
// calls written against the approved contract.
func broken(tool string, changes []string) envelope.Envelope {
	return envelope.New(envelope.Forbidden, `The tool "`+feature.Clip(tool)+`" changed since its contract was approved, in ways that break calls; this gateway refuses it until the change is approved`).
		Suggest("Tell the user the tool is unavailable until its operator approves its new contract; do not retry.").
		Details(changeDetails(changes)...).
		Envelope()
}

// brokenInBatch: a batch calls a tool whose contract broke, and is refused
// whole.
func brokenInBatch(tool string, changes []string) envelope.Envelope {
	return envelope.New(envelope.Forbidden, `This batch calls the tool "`+feature.Clip(tool)+`", which changed since its contract was approved, in ways that break calls; this gateway refuses it until the change is approved, and nothing in the batch ran`).
		Suggest("Send the batch again without that call, and tell the user the tool is unavailable until its operator approves its new contract.").
		Details(changeDetails(changes)...).
		Envelope()
}

// changeDetails are a contract's changes as details, the first
// MaxAwareness of them.
func changeDetails(changes []string) []envelope.Detail {
	details := make([]envelope.Detail, 0, min(len(changes), MaxAwareness))
	for i, c := range changes[:min(len(changes), MaxAwareness)] {
		details = append(details, envelope.Detail{Key: fmt.Sprintf("change_%d", i+1), Value: c})
	}
	return details
}

// Words are the contract's envelopes, with an example's values.
func Words() []feature.Word {
	changes := []string{`properties.query: type "string" is now "integer"`}
	return []feature.Word{
		{Name: "a call to a tool whose contract broke", Envelope: broken("search", changes)},
		{Name: "a batch calling a tool whose contract broke", Envelope: brokenInBatch("search", changes)},
	}
}
