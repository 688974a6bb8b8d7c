package keys

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

// check refuses placeholders that would expand to nothing on every
// request: an unknown shorthand ({clientip}), an unknown namespace, or an
// unknown name under http.request or http.mcp; and the request body, which
// would cost a copy of the body per message. Placeholders of other
// http.* namespaces (http.vars, http.auth, http.regexp, ...) are set by
// other handlers, and are taken as written.
func check(text string) error {
	for _, p := range placeholdersOf(text) {
		namespace, rest, dotted := strings.Cut(p, ".")
		switch {
		case !dotted:
			return unknownPlaceholder(p, shorthandNames)
		case namespace == "env" || namespace == "system" || namespace == "time" || namespace == "file":
		case namespace != "http":
			return fmt.Errorf("unknown placeholder {%s}: placeholders are {http.*}, {env.*}, {system.*}, {time.*} or a shorthand such as {client_ip}", p)
		case strings.HasPrefix(rest, "mcp."):
			if claim, ok := strings.CutPrefix(p, Prefix+feature.AuthClaimPrefix); ok && claim != "" {
				break
			}
			if !slices.Contains(mcpPlaceholders, p) {
				return unknownPlaceholder(p, mcpPlaceholders)
			}
		case p == "http.request.body" || p == "http.request.body_base64":
			return fmt.Errorf("{%s} copies the whole request body for every message a limit counts, and differs with every id: key on who calls or on what, such as {client_ip}, a header or {http.mcp.tool}", p)
		case strings.HasPrefix(rest, "request."):
			if !knownRequestPlaceholder(p) {
				return unknownPlaceholder(p, requestCandidates(p))
			}
		}
	}
	return nil
}

// Check checks a template as Parse does, so that a config's Validate,
// and the Caddyfile adapter at the line it is on, report a mistake.
func Check(template string) error {
	return check(expandShorthands(template))
}

func unknownPlaceholder(p string, known []string) error {
	if near := spelling.Nearest(p, known); near != "" {
		return fmt.Errorf("unknown placeholder {%s}: did you mean {%s}?", p, near)
	}
	return fmt.Errorf("unknown placeholder {%s}", p)
}

// Prefix starts every placeholder the gateway provides.
const Prefix = feature.PlaceholderPrefix

// mcpPlaceholders are the placeholders the gateway provides
// (feature.Exchange.Value, and the outcome's error code).
var mcpPlaceholders = []string{
	"http.mcp.method", "http.mcp.tool", "http.mcp.id", "http.mcp.session_id",
	"http.mcp.protocol_version", "http.mcp.batch_size", "http.mcp.error_code",
	Prefix + feature.Authorization,
	Prefix + feature.AuthIssuer, Prefix + feature.AuthSubject, Prefix + feature.AuthClientID, Prefix + feature.AuthScopes,
}

// shorthandNames are the Caddyfile shorthands most used in keys, for
// suggestions.
var shorthandNames = []string{
	"client_ip", "remote_host", "remote", "host", "method", "path", "uri",
	"header.Authorization", "vars.client_ip",
}

// requestPlaceholders are the fixed {http.request.*} placeholders of Caddy
// v2.11, and requestPrefixes those that end in a name or an index.
var (
	requestPlaceholders = []string{
		"http.request.method", "http.request.scheme", "http.request.proto", "http.request.proto_name",
		"http.request.host", "http.request.port", "http.request.hostport", "http.request.local",
		"http.request.local.host", "http.request.local.port", "http.request.remote",
		"http.request.remote.host", "http.request.remote.port", "http.request.uri",
		"http.request.uri_escaped", "http.request.uri.path", "http.request.uri.path_escaped",
		"http.request.uri.path.file", "http.request.uri.path.dir", "http.request.uri.path.file.base",
		"http.request.uri.path.file.ext", "http.request.uri.query", "http.request.uri.query_escaped",
		"http.request.uri.prefixed_query", "http.request.duration", "http.request.duration_ms",
		"http.request.uuid", "http.request.body", "http.request.body_base64", "http.request.orig_method",
		"http.request.orig_uri", "http.request.orig_uri.path", "http.request.orig_uri.path.file",
		"http.request.orig_uri.path.file_escaped", "http.request.orig_uri.path.dir",
		"http.request.orig_uri.query", "http.request.orig_uri.prefixed_query",
	}
	requestPrefixes = []string{
		"http.request.header.", "http.request.cookie.", "http.request.host.labels.",
		"http.request.tls.", "http.request.uri.path.", "http.request.uri.query.",
		"http.request.orig_uri.path.", "http.request.remote.host/",
	}
)

// requestCandidates are what an unknown {http.request.*} placeholder may
// have meant: the fixed ones, and each prefix with the name p ends in
// ({http.request.headers.X-Key} for {http.request.header.X-Key}).
func requestCandidates(p string) []string {
	candidates := slices.Clone(requestPlaceholders)
	if parts := strings.SplitN(p, ".", 4); len(parts) == 4 {
		for _, prefix := range requestPrefixes {
			if strings.Count(prefix, ".") == 3 {
				candidates = append(candidates, prefix+parts[3])
			}
		}
	}
	return candidates
}

func knownRequestPlaceholder(p string) bool {
	if slices.Contains(requestPlaceholders, p) {
		return true
	}
	for _, prefix := range requestPrefixes {
		if len(p) > len(prefix) && strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
