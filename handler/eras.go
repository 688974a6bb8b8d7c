package handler

import "github.com/caddymcp/caddy-mcp/feature"

// The two eras of MCP's Streamable HTTP transport (feature.Era says what
// differs between them), by the short names the handler uses.
type era = feature.Era

const (
	sessionEra   = feature.SessionEra
	statelessEra = feature.StatelessEra
)

// eraOf is the era r declares.
var eraOf = feature.EraOf
