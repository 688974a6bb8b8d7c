package validate

import (
	"fmt"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words of validate's answers, as the model reads them.

// UnknownTool: the upstream's tool list is known and complete, and the
// call names a tool it does not hold (or, under a tools policy, one it
// hides: the two look alike). nearest are the names to suggest.
func UnknownTool(tool string, nearest []string) envelope.Envelope {
	b := envelope.New(envelope.UnknownAction, `The tool "`+feature.Clip(tool)+`" does not exist on this MCP server`).
		Suggest("Call one of the available tools by its exact name, or list the tools again.")
	if len(nearest) > 0 {
		b = b.Actions(nearest...)
	}
	return b.Envelope()
}

// argumentsRefused is the envelope logged and counted for a call whose
// arguments break the tool's schema; the model reads the <validation_error>
// itself.
func argumentsRefused(tool string, problems int) envelope.Envelope {
	return envelope.New(envelope.ValidationError, fmt.Sprintf(`The arguments of "%s" break its inputSchema (%d fields)`, feature.Clip(tool), problems)).
		Suggest("Fix the fields and call the tool again.").
		Envelope()
}

// Words are validate's envelopes, with an example's values.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "a tool that does not exist", Envelope: UnknownTool("serch", []string{"search", "search_v1"})},
		{Name: "arguments that break the schema (logged; the model reads the <validation_error>)", Envelope: argumentsRefused("search", 2)},
	}
}
